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
