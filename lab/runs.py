"""The lab's one way to run a sampler on an input it already holds: a loaded model and a prepared
MaskedInput go straight into InfillRun (no second trip through the registry per input, no text to
parse again), the steps are drained, and the result comes back with the wall and CPU seconds of
the sampling alone (the model is ready before the clock starts). bench assd, bench fills, bench
self-spec and evaluate all call it, so a change to how a run is driven is made once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from engine.api import InfillResult, InfillRun
from engine.inputs.masking import MaskedInput
from engine.loading.loaded_model import LoadedModel


@dataclass(kw_only=True)
class Drained:
    """One finished run: the run (its drafter_passes, params), its result (without the log-probability:
    the benchmarks score fills themselves) and the seconds its steps took."""

    run: InfillRun
    result: InfillResult
    seconds: float  # wall-clock seconds of the sampling
    cpu: float  # CPU seconds of this process during the sampling (far less disturbed by others' load)


def drain(lm: LoadedModel, mi: MaskedInput, sampler: str, seed: int,
          draft_model: LoadedModel | str | None = None, **knobs) -> Drained:
    """Run `sampler` on `mi` with the model the caller holds, seed `seed` and the given knobs
    (InfillRun's keyword arguments: cache and the knobs of engine.params.KNOBS)."""
    run = InfillRun(masked_input=mi, model=lm, sampler=sampler, seed=seed, draft_model=draft_model, **knobs)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in run.stream():
        pass
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return Drained(run=run, result=run.result(with_log_prob=False), seconds=seconds, cpu=cpu)
