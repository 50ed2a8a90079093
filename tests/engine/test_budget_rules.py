"""The run budget at its exact edges: a run may spend exactly its limit and stops at the first
call past it; the scaling caps of check_params at their boundaries."""

from __future__ import annotations

import pytest

from engine.budget import Budget, BudgetExceededError, Meter, checkpoint
from engine.errors import BadParameterError


def test_limits_are_inclusive():
    b = Budget(max_seconds=2.0, max_calls=3.0)
    b.check(2.0, 3.0)  # exactly at both limits: allowed
    with pytest.raises(BudgetExceededError, match=r"spent 3\.5 network calls, over the server's budget of 3 per run"):
        b.check(0.0, 3.5)
    with pytest.raises(BudgetExceededError, match=r"computed for 2\.0 s, over the server's budget of 2 s per run"):
        b.check(2.0001, 0.0)
    Budget().check(1e9, 1e9)  # no limits


def test_a_run_stops_after_exactly_max_calls(tiny_asarm):
    """Sequential decoding spends one call per token: with max_calls = 2 the third call is refused,
    so the trace holds exactly two calls and two decided tokens."""
    from engine.api import InfillRun
    from engine.trace import DECIDING_KINDS

    run = InfillRun("[MASK:5]a", model=str(tiny_asarm.path), sampler="sequential", budget=Budget(max_calls=2))
    with pytest.raises(BudgetExceededError, match="2 per run"):
        for _ in run.stream():
            pass
    assert run.trace[-1].calls == 2
    assert sum(len(s.positions) for s in run.trace if s.kind in DECIDING_KINDS) == 2


def test_meter_checkpoint_counts_and_pauses():
    calls = [0.0]
    paused = []
    with Meter(Budget(max_calls=1.0), lambda: calls[0], pause=lambda: paused.append(1)) as m:
        checkpoint()
        calls[0] = 1.0
        checkpoint()
        calls[0] = 1.5
        with pytest.raises(BudgetExceededError):
            checkpoint()
    assert paused == [1, 1] and m.seconds >= 0
    checkpoint()  # outside a metered run: nothing happens


@pytest.mark.parametrize(
    "masked,params,ok",
    [
        (10, {"steps": 64}, True), (10, {"steps": 65}, False), (20, {"steps": 80}, True), (20, {"steps": 81}, False),
        (10, {"steps": 64, "inner": 4}, True), (10, {"steps": 64, "inner": 5}, False),
        (20, {"steps": 40, "inner": 8}, True), (20, {"steps": 40, "inner": 9}, False),
        (10, {}, True), (10, {"inner": 10**6}, True),
    ],
)
def test_check_params_caps(masked, params, ok):
    if ok:
        Budget().check_params(masked, params)
    else:
        with pytest.raises(BadParameterError, match="more than this input needs"):
            Budget().check_params(masked, params)


class Clock:
    """time.perf_counter as the test says: each read returns the next value."""

    def __init__(self, *ticks: float):
        self.ticks = list(ticks)

    def __call__(self) -> float:
        return self.ticks.pop(0)


def test_seconds_count_computing_time_only_across_blocks_and_pauses(monkeypatch):
    """Seconds add up over every `with meter` block (the app enters it once per step), and the time a
    consumer holds the run paused is not computing time."""
    import engine.budget as budget_mod

    # enter 10; checkpoint at 12 (+2), the pause ends at 20; exit at 23 (+3); enter 30, exit 31 (+1)
    monkeypatch.setattr(budget_mod.time, "perf_counter", Clock(10.0, 12.0, 20.0, 23.0, 30.0, 31.0))
    m = Meter(None, lambda: 0.0, pause=lambda: None)
    with m:
        checkpoint()
        assert m.seconds == 2.0
    assert m.seconds == 5.0
    with m:
        pass
    assert m.seconds == 6.0


def test_the_seconds_limit_is_checked_at_a_checkpoint(monkeypatch):
    import engine.budget as budget_mod

    monkeypatch.setattr(budget_mod.time, "perf_counter", Clock(0.0, 1.5, 3.0, 4.0))
    with Meter(Budget(max_seconds=2.0), lambda: 0.0) as m:
        checkpoint()  # 1.5 s: within
        with pytest.raises(BudgetExceededError, match=r"computed for 3\.0 s"):
            checkpoint()
    assert m.seconds == 4.0


def test_an_inner_meter_hands_the_checkpoints_back_to_the_outer_one():
    outer_calls, inner_calls = [], []
    outer = Meter(None, lambda: 0.0, pause=lambda: outer_calls.append(1))
    inner = Meter(None, lambda: 0.0, pause=lambda: inner_calls.append(1))
    with outer:
        with inner:
            checkpoint()
        checkpoint()
    checkpoint()  # outside every meter: nothing
    assert (outer_calls, inner_calls) == ([1], [1])


def test_a_checkpoint_in_a_thread_that_never_metered_is_a_no_op():
    import threading

    errors = []

    def run():
        try:
            checkpoint()
        except Exception as e:  # noqa: BLE001 - the test reports whatever escaped
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert errors == []


def test_install_puts_one_checkpoint_before_each_pass_and_is_idempotent():
    import torch

    from engine.budget import install

    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 2))
    install(model)
    install(model)
    assert len(model[0]._forward_pre_hooks) == 1
    seen = []
    with Meter(None, lambda: 0.0, pause=lambda: seen.append(1)):
        model(torch.tensor([1, 2]))
    assert seen == [1]


def test_the_servers_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("INFILL_RUN_MAX_SECONDS", raising=False)
    monkeypatch.delenv("INFILL_RUN_MAX_CALLS", raising=False)
    assert Budget.from_env() == Budget(20.0, 1024.0)
    monkeypatch.setenv("INFILL_RUN_MAX_SECONDS", "7.5")
    monkeypatch.setenv("INFILL_RUN_MAX_CALLS", "0")
    assert Budget.from_env() == Budget(7.5, None)


@pytest.mark.parametrize(("masked", "steps", "inner", "ok"), [
    (10, 1, 256, True), (10, 1, 257, False),  # the floor of steps x inner is 256, inclusive
    (20, 64, 5, True), (20, 66, 5, False),  # 16 per masked token: 320
])
def test_steps_times_inner_cap_at_its_edges(masked, steps, inner, ok):
    b = Budget()
    if ok:
        b.check_params(masked, {"steps": steps, "inner": inner})
    else:
        with pytest.raises(BadParameterError, match="steps x inner"):
            b.check_params(masked, {"steps": steps, "inner": inner})
