"""The exactness check's deliberately broken samplers: ASSD that resamples a rejected draft from the
target q instead of the residual, and ASSD that keeps every draft untested. A visitor sees what a
failed check looks like next to the exact samplers.

Their own module, apart from the sampler catalogue (engine.samplers.SAMPLERS never lists them), so
a run, the CLI's `infill` and the app's sampler menus cannot reach them; only the check
(engine/exactness/check.py) and its menus offer them, through check_samplers()."""

from __future__ import annotations

import torch

from engine.samplers import SAMPLERS, SamplerSpec
from engine.samplers.acceptance import Verdict, sample_categorical, uniform
from engine.samplers.assd import assd


def residual_from_q(draft: int, p: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> Verdict:
    """A wrong speculative test: on rejection it draws from the target q instead of the residual
    norm(max(q - p, 0)), so tokens the draft over-proposes come out too often (mutant M1 of
    tests/engine/samplers/test_mutations.py)."""
    px, qx = float(p[draft]), float(q[draft])
    a = min(1.0, qx / px)
    if uniform(gen) < a:
        return Verdict(accepted=True, token=draft, accept_prob=a, p_draft=px, q_draft=qx, q_token=qx)
    tok = sample_categorical(q, gen)
    return Verdict(accepted=False, token=tok, accept_prob=a, p_draft=px, q_draft=qx, q_token=float(q[tok]))


def accept_every_draft(draft: int, p: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> Verdict:
    """No test at all: every draft is kept, so the drafted tokens come out independently from their
    parallel rows (the factorisation error of parallel decoding that verification removes)."""
    px, qx = float(p[draft]), float(q[draft])
    return Verdict(accepted=True, token=draft, accept_prob=1.0, p_draft=px, q_draft=qx, q_token=qx)


def _wrong(accept):
    """A catalogue-style run function: ASSD (on the run's cached oracle) with this acceptance test."""

    def run(ctx, *, k: int, temperature: float):
        return assd(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k, accept=accept)

    return run


WRONG_SAMPLERS: dict[str, SamplerSpec] = {
    s.name: s
    for s in [
        SamplerSpec(name="wrong-assd-residual-from-q", kind="asarm", cache=True,
                    help="DELIBERATELY WRONG: ASSD (cached) that resamples a rejected draft from the target q "
                    "instead of the residual max(q - p, 0). Offered only in the exactness check, to show "
                    "what a failed check looks like.",
                    run=_wrong(residual_from_q)),
        SamplerSpec(name="wrong-assd-accept-all", kind="asarm", cache=True,
                    help="DELIBERATELY WRONG: ASSD (cached) that keeps every draft without testing it, i.e. parallel "
                    "decoding: each token of a round comes from its own marginal, ignoring the others. Offered "
                    "only in the exactness check.",
                    run=_wrong(accept_every_draft)),
    ]
}


def check_samplers() -> dict[str, SamplerSpec]:
    """Every sampler the check offers: the catalogue plus the wrong ones."""
    return {**SAMPLERS, **WRONG_SAMPLERS}
