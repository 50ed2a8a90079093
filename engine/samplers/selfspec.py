"""Self-speculative masked diffusion sampling (the paper's Algorithm 3, docs/DESIGN.md §3.7).

Decode order: sigma is a uniformly random permutation of the masked positions, drawn once per run
from the run's generator (as in the paper; the hybrid is trained on uniformly random orders). The
exact likelihood in selfspec_likelihood.py is conditional on sigma, which the trace records (the
order in which positions get decided), and can be averaged over all orders for tiny inputs.

Outer loop (i positions of sigma revealed): one non-causal pass; the window holds the next
W(i) positions of sigma; their drafts are sampled independently from the non-causal head.
Inner loop, up to N (`inner`) times: one causal pass gives the target of every remaining draft
(the first position of the window has no causal row: its target is the non-causal row, so its
draft is always accepted); the drafts are tested along sigma with the shared speculative
acceptance routine; on the first rejection the token is resampled from the residual and the next
inner loop re-targets the remaining drafts with the same non-causal states. Drafts left after N
loops are dropped; the next outer iteration starts with a fresh non-causal pass.

Windows (D = number of masked positions, i = revealed among them):
  cosine: alpha = (D - i)/D, tau = 1 - (2/pi) arccos(alpha),
          W = floor(D (cos(pi/2 (1 - tau)) - cos(pi/2 (1 - tau + dtau))))
  linear: W = floor(D dtau)
both at least 1 and at most D - i.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import sample_categorical, speculative_accept, tempered_probs

from ..trace import Step, StepKind
from .base import Recorder
from .hybrid_passes import CallCounter, causal_pass, hybrid_counter, model_ids, nc_pass
from .spec import SamplerSpec


def window_size(i: int, d: int, dtau: float, window: str = "cosine") -> int:
    """How many positions of sigma the next outer iteration drafts: W(i) of the module docstring,
    at least 1 and at most what is left."""
    if window == "linear":
        w = math.floor(d * dtau)
    elif window == "cosine":
        alpha = (d - i) / d
        tau = 1.0 - (2.0 / math.pi) * math.acos(alpha)
        w = math.floor(d * (math.cos(0.5 * math.pi * (1 - tau)) - math.cos(0.5 * math.pi * (1 - tau + dtau))))
    else:
        raise ValueError(f"unknown window {window!r}")
    return max(1, min(w, d - i))


def random_order(mi: MaskedInput, gen: torch.Generator) -> list[int]:
    """The decode order sigma: a uniformly random permutation of the masked positions."""
    return [mi.masked[j] for j in torch.randperm(len(mi.masked), generator=gen).tolist()]


def self_spec(
    model, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, dtau: float,
    window: str, inner: int, counter: CallCounter, order: list[int] | None = None,
) -> Iterator[Step]:
    """The paper's Algorithm 3: non-causal drafts of a window, verified along sigma by the causal
    head with the shared speculative test (see the module docstring)."""
    cfg = model.config
    m = len(mi.masked)
    if order is None:
        order = random_order(mi, gen)
    ids = model_ids(model, mi.tokens)
    i, rnd = 0, 0
    while i < m:
        w = window_size(i, m, dtau, window)
        positions = order[i : i + w]
        h, logits = nc_pass(model, ids, mi)
        counter.calls += cfg.nc_share
        counter.best = counter.calls
        yield rec(StepKind.NC_PASS, rnd, note=f"non-causal pass, window {w}")
        p = tempered_probs(logits[[pos + 1 for pos in positions]], temperature)
        chain = [sample_categorical(p[k], gen) for k in range(w)]
        yield rec(StepKind.DRAFT, rnd, positions, chain, [float(p[k][t]) for k, t in enumerate(chain)],
                  note="non-causal drafts")
        s = 0  # window positions decided so far
        for loop in range(inner):
            q_rows: dict[int, torch.Tensor] = {0: p[0]} if s == 0 else {}
            if max(s, 1) < w:
                q = tempered_probs(causal_pass(model, h, positions, chain, mi), temperature)
                counter.calls += cfg.causal_share
                counter.best = counter.calls
                yield rec(StepKind.CAUSAL_PASS, rnd, note=f"causal pass {loop + 1}: targets for {w - max(s, 1)} drafts")
                q_rows.update({k: q[k - 1] for k in range(max(s, 1), w)})
            stop = w
            for k in range(s, w):
                v = speculative_accept(chain[k], p[k], q_rows[k], gen)
                pos = positions[k]
                if v.accepted:
                    ids[pos + 1] = chain[k]
                    yield rec(StepKind.ACCEPT, rnd, [pos], [chain[k]], [v.p_draft], [v.q_draft],
                              note="first draft: causal = non-causal" if k == 0 else "", tested=k > 0)
                    continue
                yield rec(StepKind.REJECT, rnd, [pos], [chain[k]], [v.p_draft], [v.q_draft],
                          note=f"acceptance probability {v.accept_prob:.4f}", tested=True)
                chain[k] = v.token
                ids[pos + 1] = v.token
                yield rec(StepKind.RESAMPLE, rnd, [pos], [v.token], q=[v.q_token], note="residual max(q - p, 0)")
                stop = k + 1
                break
            s = stop
            if s == w:
                break
        i += s
        rnd += 1


def _run(ctx, *, dtau: float, window: str, inner: int, temperature: float) -> Iterator[Step]:
    return self_spec(ctx.lm.model, ctx.mi, ctx.rec, ctx.gen, temperature, dtau, window, inner, hybrid_counter(ctx))


#: the catalogue's entry (engine.samplers.SAMPLERS)
SPEC = SamplerSpec(
    name="self-spec", kind="hybrid", cache=False,
    help="Self-speculative masked diffusion (paper's Algorithm 3): the non-causal head drafts a "
    "window, the causal head verifies it; fractional calls per pass.",
    run=_run,
    calls_note="Its calls can exceed the tokens it fills: each outer step drafts with one pass and checks "
               "with more, and a rejected window is drafted again.")
