"""Compare's verdict (app.timing.compare_verdict): alternating pairs until the speed ratio's interval
decides or the budget is spent, said in one unit (faster / slower), a plain reason where no ratio means anything, and the timing
counted against the visitor who asked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.serving.admission import Admission
from app.timing import compare_verdict as cv


def test_a_winner_once_the_interval_excludes_one_in_one_unit():
    slower = cv.verdict_text("assd-cache", "sequential-cache", [1.3, 1.2, 1.4, 1.3], [1.0, 1.0, 1.0, 1.0])
    assert "A (assd-cache) is 1.30x slower (" in slower and ", 4 pairs) than B (sequential-cache)" in slower
    assert "the time of" not in slower and "took" not in slower
    faster = cv.verdict_text("a", "b", [0.5, 0.4, 0.6, 0.5], [1.0, 1.0, 1.0, 1.0])
    assert "A (a) is 2.0" in faster and "x faster (" in faster
    same = cv.verdict_text("a", "b", [1.0, 1.01, 0.99, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.01])
    assert "no difference within ±10% (5 pairs)" in same
    open_ = cv.verdict_text("a", "b", [0.9, 1.4, 1.1, 0.7], [1.0, 1.0, 1.0, 1.0])  # the interval straddles 1
    assert "no call within the budget (4 pairs" in open_ and "faster than" not in open_
    few = cv.verdict_text("a", "b", [2.0, 2.1], [1.0, 1.0])  # too few pairs to call
    assert "no call" in few and "slower (" not in few


def test_pairs_go_on_until_decided_or_the_budget(monkeypatch):
    times = {"assd": iter([1.0, 1.02, 0.98] * 30), "sequential-cache": iter([1.3, 1.31, 1.29] * 30)}
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: next(times[name]))
    monkeypatch.setenv("INFILL_COMPARE_SECONDS", "1000")
    ta, tb = cv.timed_pairs(_live(seconds=1.0), _live(seconds=1.3, sampler="sequential-cache"))
    assert cv.MIN_PAIRS_TO_CALL <= len(ta) < cv.MAX_PAIRS and cv.decided(ta, tb) == "faster"
    noisy = {"assd": iter([0.5, 2.0, 1.0, 1.5] * 40), "sequential-cache": iter([2.0, 0.5, 1.5, 1.0] * 40)}
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: next(noisy[name]))
    monkeypatch.setenv("INFILL_COMPARE_SECONDS", "12")
    ta, tb = cv.timed_pairs(_live(seconds=1.0), _live(seconds=1.0, sampler="sequential-cache"))
    assert sum(ta) + sum(tb) <= 12 and not cv.decided(ta, tb)
    assert "no call within the budget" in cv.verdict_text("a", "b", ta, tb)


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
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: order.append(name) or 0.2)
    monkeypatch.setenv("INFILL_COMPARE_SECONDS", "100")
    ta, tb = cv.timed_pairs(_live(), _live(sampler="sequential-cache"))
    # identical times: the interval is [1, 1], within +-10% as soon as a call may be made
    assert len(ta) == len(tb) == cv.MIN_PAIRS_TO_CALL and ta[0] == tb[0] == 0.2
    assert order == ["sequential-cache", "assd", "assd", "sequential-cache", "sequential-cache", "assd"]


def test_the_timing_counts_against_the_visitor_who_asked(monkeypatch):
    """A visitor who already holds every run they may have gets no timing (the seats of others are
    untouched); another visitor's timing runs."""
    adm = Admission(1, 0, 1)
    monkeypatch.setattr(cv, "admission", lambda: adm)
    monkeypatch.setattr(cv, "timed_rerun", lambda live, name: 0.2)
    monkeypatch.setenv("INFILL_COMPARE_SECONDS", "2")
    with adm.enter("busy-visitor", False):
        refused = cv.judge(_live(owner="busy-visitor"), _live(owner="busy-visitor", sampler="sequential-cache"))
        assert "not timed" in refused and "runs in progress" in refused
        other = cv.judge(_live(owner="v2"), _live(owner="v2", sampler="sequential-cache"))
    assert "no difference within ±10%" in other
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
