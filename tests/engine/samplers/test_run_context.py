"""RunContext on its own, with stand-in models: which oracle it makes (the entry's cache unless the
run says otherwise; none for a hybrid), counters that start at zero, and the call count it reports
for either kind of run. Fast, so mutation testing runs it against engine/samplers/context.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import engine.samplers.context as context
from engine.params import settle
from engine.samplers import SAMPLERS
from engine.samplers.context import RunContext


@pytest.fixture
def made(monkeypatch) -> list[bool]:
    """The cache flag of every oracle the context makes (a stand-in oracle with 4 calls)."""
    flags: list[bool] = []

    def fake_oracle(lm, mi, use_cache):
        flags.append(use_cache)
        return SimpleNamespace(calls=4)

    monkeypatch.setattr(context, "make_oracle", fake_oracle)
    return flags


LM = SimpleNamespace(codec=SimpleNamespace(token_text=str))


def _ctx(name: str, **kw) -> RunContext:
    return RunContext(lm=LM, mi=None, spec=SAMPLERS[name], knobs=settle({}), seed=0, **kw)


@pytest.mark.parametrize("name, cache, expected", [
    ("assd-cache", None, True), ("sequential", None, False),  # the entry's own
    ("assd-cache", False, False), ("sequential", True, True),  # the run's word wins
])
def test_the_oracle_takes_the_entrys_cache_unless_the_run_names_one(made, name, cache, expected):
    ctx = _ctx(name, cache=cache)
    assert made == [expected] and ctx.oracle.calls == 4


def test_counters_start_at_zero_and_the_calls_are_the_oracles_plus_a_drafters(made):
    ctx = _ctx("assd-cache")
    assert ctx.extra_calls == [0.0] and ctx.drafter_passes == [0] and ctx.drafter_seconds == [0.0]
    assert ctx.calls() == 4
    ctx.extra_calls[0] += 0.5
    assert ctx.calls() == 4.5


def test_a_hybrid_run_has_no_oracle_and_counts_by_its_own_counter(made):
    ctx = _ctx("mdm")
    assert ctx.oracle is None and made == []
    assert ctx.counter is None and ctx.calls() == 0.0  # before the sampler installs its counter
    ctx.counter = lambda: 2.25
    ctx.extra_calls[0] = 1.0
    assert ctx.calls() == 3.25


def test_the_knobs_must_be_settled_values(made):
    with pytest.raises(TypeError, match="settled knob values"):
        RunContext(lm=LM, mi=None, spec=SAMPLERS["assd-cache"], knobs={"k": 3}, seed=0)
