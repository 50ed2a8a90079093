"""Compare's verdict (app.timing.compare_verdict): A against B timed as the speed line times, a winner
named only when every pair agrees, a plain reason where no ratio means anything, and the timing
counted against the visitor who asked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.serving.admission import Admission
from app.timing import compare_verdict as cv


def test_a_winner_only_when_every_pair_agrees():
    slower = cv.verdict_text("assd-cache", "sequential-cache", [1.3, 1.2, 1.4], [1.0, 1.0, 1.0])
    assert "took 1.30x the time of B (sequential-cache) (range 1.20-1.40, 3 alternating pairs)" in slower
    assert "A is slower on this machine" in slower
    faster = cv.verdict_text("a", "b", [0.5, 0.4, 0.6], [1.0, 1.0, 1.0])
    assert "A is faster on this machine, 2.00x as fast as B" in faster
    close = cv.verdict_text("a", "b", [0.9, 1.2, 1.1], [1.0, 1.0, 1.0])  # the range straddles 1
    assert "too close to call" in close and "faster" not in close.split("too close")[0]
    few = cv.verdict_text("a", "b", [2.0, 2.1], [1.0, 1.0])
    assert "too few pairs to call" in few and "slower" not in few


def _live(model="m", masked=20, seconds=0.2, owner="v1", finished=True, sampler="assd", address=None):
    run = SimpleNamespace(lm=SimpleNamespace(name=model), mi=SimpleNamespace(masked=list(range(masked))),
                          compute_seconds=seconds, spec=SimpleNamespace(name=sampler))
    return SimpleNamespace(run=run, result=object() if finished else None, owner=owner, created=0.0,
                           address=address)


def test_a_plain_reason_instead_of_a_ratio():
    assert "compare the models" in cv.reason_not_to_time(_live(model="x"), _live(model="y"))
    assert "Too short to time: 3 masked tokens" in cv.reason_not_to_time(_live(masked=3), _live(masked=3))
    assert "quicker side computed in 1 ms" in cv.reason_not_to_time(_live(seconds=0.001), _live())
    assert "did not finish" in cv.reason_not_to_time(_live(finished=False), _live())
    assert cv.reason_not_to_time(_live(), _live(sampler="sequential-cache")) == ""


def test_pairs_alternate_and_the_compare_run_is_the_first(monkeypatch):
    order = []
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: order.append(name) or 0.1)
    monkeypatch.setenv("INFILL_SPEEDUP_SECONDS", "2.1")  # 2.1 // (0.2 + 0.2) = 5 pairs
    ta, tb = cv.timed_pairs(_live(), _live(sampler="sequential-cache"))
    assert len(ta) == len(tb) == 5 and ta[0] == tb[0] == 0.2
    assert order == ["sequential-cache", "assd"] * 4


def test_the_timing_counts_against_the_visitor_who_asked(monkeypatch):
    """A visitor who already holds every run they may have gets no timing (the seats of others are
    untouched); another visitor's timing runs."""
    adm = Admission(1, 0, 1)
    monkeypatch.setattr(cv, "admission", lambda: adm)
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: 0.2)
    monkeypatch.setenv("INFILL_SPEEDUP_SECONDS", "2")
    with adm.enter("busy-visitor", False):
        refused = cv.judge(_live(owner="busy-visitor"), _live(owner="busy-visitor", sampler="sequential-cache"))
        assert "not timed" in refused and "runs in progress" in refused
        other = cv.judge(_live(owner="v2"), _live(owner="v2", sampler="sequential-cache"))
    assert "took 1.00x the time" in other and "too close to call" in other
    with adm.enter("10.0.0.7", False):  # the address's runs, whatever page session asks
        refused = cv.judge(_live(owner="tab-2", address="10.0.0.7"),
                           _live(owner="tab-2", address="10.0.0.7", sampler="sequential-cache"))
    assert "runs in progress" in refused


@pytest.fixture()
def pending():
    yield
    cv._PENDING.clear()


def test_each_comparison_is_judged_once(pending):
    a, b = _live(), _live()
    cv.remember("sid", a, b)
    assert cv.take("sid") == (a, b) and cv.take("sid") is None
