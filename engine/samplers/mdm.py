"""Masked diffusion baseline (docs/DESIGN.md §3.6) on the hybrid's non-causal head.

Calls are counted in the hybrid's units (hybrid_passes.py): an MDM step is one non-causal pass.
MDM: ancestral sampling on a cosine grid of T steps. After step s, round(m cos(pi/2 s/T)) of the m
masked positions are still masked. Each step reveals a uniformly random subset of the schedule's
size and samples those positions from the factorized prediction: the same law as sampling a full
x0 and keeping the subset, at the cost of the revealed positions only (reveal and value are not
sampled jointly, which avoids the truncation error). Calls are counted raw (every
step of the grid) and best case (a step that reveals nothing changes nothing, so the next step can
reuse its output: it is free); the raw count is the run's calls counter, the best case is in the
notes of the pass steps and of the last reveal.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import sample_categorical, tempered_probs

from ..trace import Step, StepKind
from .base import Recorder
from .hybrid_passes import CallCounter, cosine_remaining, hybrid_counter, model_ids, nc_pass
from .spec import SamplerSpec


def mdm(
    model, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, steps: int,
    counter: CallCounter,
) -> Iterator[Step]:
    """MDM ancestral sampling on a cosine grid of `steps` steps; the baseline self-spec is measured
    against (raw and best-case calls in `counter`)."""
    share = model.config.nc_share
    ids = model_ids(model, mi.tokens)
    unrevealed = list(mi.masked)
    remaining = cosine_remaining(len(unrevealed), steps)
    logits = None
    for s in range(1, steps + 1):
        n = remaining[s - 1] - remaining[s]
        if logits is None:  # the input changed since the last pass (or first pass)
            _, logits = nc_pass(model, ids, mi)
        counter.calls += share
        if n:
            counter.best += share
        yield rec(StepKind.MDM_PASS, s - 1, note=f"step {s}/{steps}: reveal {n} of {len(unrevealed)}; "
                  f"best-case calls {counter.best:g}")
        if not n:
            continue
        # x0 is factorized and independent of which subset is revealed, so drawing the subset first
        # and sampling only its positions gives the same joint law as sampling every unrevealed
        # position and keeping the subset (and skips the soft-max and draws of the rest)
        pick = sorted(torch.randperm(len(unrevealed), generator=gen)[:n].tolist())
        positions = [unrevealed[j] for j in pick]
        probs = tempered_probs(logits[[p + 1 for p in positions]], temperature)
        tokens = [sample_categorical(probs[r], gen) for r in range(len(positions))]
        for pos, tok in zip(positions, tokens):
            ids[pos + 1] = tok
        chosen = set(pick)
        unrevealed = [p for j, p in enumerate(unrevealed) if j not in chosen]
        logits = None
        note = f"raw calls {counter.calls:g}, best-case calls {counter.best:g}" if not unrevealed else ""
        yield rec(StepKind.REVEAL, s - 1, positions, tokens, [float(probs[r][t]) for r, t in enumerate(tokens)],
                  note=note)


def _run(ctx, *, steps: int, temperature: float) -> Iterator[Step]:
    return mdm(ctx.lm.model, ctx.mi, ctx.rec, ctx.gen, temperature, steps, hybrid_counter(ctx))


#: the catalogue's entry (engine.samplers.SAMPLERS)
SPEC = SamplerSpec(
    name="mdm", kind="hybrid", cache=False,
    help="Masked diffusion baseline: T steps on a cosine grid, each samples every masked token "
    "and reveals a schedule-sized random subset. Calls: raw (best case in the notes).",
    run=_run,
    calls_note="Its calls can exceed the tokens it fills: every one of its steps is a full network pass over "
               "all masked positions, however few tokens that step reveals.")
