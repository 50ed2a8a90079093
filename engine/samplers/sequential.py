"""Sequential any-subset decoding: one density query per masked position, left to right.

The ground truth every exact speculative sampler must match in distribution (N calls for N tokens).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import sample_categorical, tempered_probs

from ..trace import Step, StepKind
from .base import DensityOracle, Recorder
from .spec import SamplerSpec


def sequential(
    oracle: DensityOracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float
) -> Iterator[Step]:
    """The exact reference: one network call per masked token, left to right, each sampled from the
    AS-ARM's conditional given everything decided before it."""
    for r, pos in enumerate(mi.masked):
        q = tempered_probs(oracle.call([], [(pos, 0)])[0], temperature)
        yield rec(StepKind.DENSITY_PASS, r, note="query 1 position")
        tok = sample_categorical(q, gen)
        oracle.commit(pos, tok)
        yield rec(StepKind.SAMPLE, r, [pos], [tok], q=[float(q[tok])])


#: the catalogue's entries (engine.samplers.SAMPLERS): the exact reference and its cached form
def _run(ctx, *, temperature: float) -> Iterator[Step]:
    """Both entries: the run's oracle is cached or not as the entry (or the caller) says."""
    return sequential(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature)


SPECS = [
    SamplerSpec(name="sequential", kind="asarm", cache=False,
                help="One network call per masked token, left to right: the exact reference.", run=_run),
    SamplerSpec(name="sequential-cache", kind="asarm", cache=True,
                help="Sequential decoding with a KV cache of decided tokens: same samples as sequential, "
                "one small call per token. The strongest non-speculative baseline.", run=_run),
]
