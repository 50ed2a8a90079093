"""Run from what you hold (issue 23): InfillRun takes a loaded model, and the lab's one helper
(lab.runs.drain) gives the same fills, traces and calls as a run built from the model's name."""

from __future__ import annotations

import pytest

from engine.api import InfillRun
from engine.errors import BadParameterError
from engine.samplers import SAMPLERS
from lab.bench import _measure_one
from lab.runs import drain
from tests.support.tiny import masked_input


def _steps(trace):
    return [(s.kind, s.positions, s.tokens, s.calls) for s in trace]


@pytest.mark.parametrize("sampler", [n for n, s in SAMPLERS.items() if s.kind == "asarm" and s.second is None])
def test_drain_with_the_loaded_model_gives_what_a_run_by_name_gives(tiny_asarm, sampler):
    for seed in range(3):
        mi = masked_input(tiny_asarm.codec, {seed: "b"}, 6)
        d = drain(tiny_asarm, mi, sampler, seed, k=3, temperature=0.8)
        by_name = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=sampler, seed=seed, k=3,
                            temperature=0.8)
        steps = list(by_name.stream())
        res = by_name.result(with_log_prob=False)
        assert d.result.tokens == res.tokens and d.result.text == res.text
        assert _steps(d.result.trace) == _steps(steps) and d.result.calls == res.calls
        assert d.run.lm is tiny_asarm and d.seconds >= 0 and d.cpu >= 0


def test_bench_assd_measures_the_same_fills_as_runs_by_name(tiny_asarm):
    mi = masked_input(tiny_asarm.codec, {2: "a"}, 6)
    got = _measure_one(tiny_asarm, mi, ["sequential", "assd-pipelined", "assd-ngram"], 2, 5, 1.0)
    for name, row in got.items():
        run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=name, seed=5, k=2)
        list(run.stream())
        res = run.result(with_log_prob=False)
        assert row["fills"] == [sp.text for sp in res.spans] and row["calls"] == res.calls


def test_a_masked_input_of_another_tokenizer_is_refused(tiny_asarm):
    mi = masked_input(tiny_asarm.codec, {0: "a"}, 4)
    mi.mask_id = mi.mask_id + 1
    with pytest.raises(BadParameterError, match="mask id"):
        InfillRun(masked_input=mi, model=tiny_asarm, sampler="assd")
