"""Masked diffusion baseline (docs/DESIGN.md §3.6) on the hybrid's non-causal head, plus what every hybrid
sampler shares: the fractional call counter and the non-causal pass.

Call units: one call is one pass through *all* blocks of the hybrid. A non-causal pass costs
nc_blocks / all_blocks of a call, a causal pass causal_blocks / all_blocks (docs/DESIGN.md §4), so an MDM
step (a non-causal pass) and the self-speculative sampler's passes are counted in the same unit.

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

import math
from collections.abc import Iterator

import torch

from ..acceptance import sample_categorical, tempered_probs
from ..device import host64
from ..errors import IncompatibleModelsError
from ..masking import MaskedInput
from ..trace import Step, StepKind
from .base import Recorder


class CallCounter:
    """Fractional calls so far (install as ctx.counter); `best` is the best-case count."""

    def __init__(self) -> None:
        self.calls = 0.0
        self.best = 0.0

    def __call__(self) -> float:
        return self.calls


def require_hybrid(lm) -> None:
    if getattr(lm, "kind", "hybrid") != "hybrid":
        raise IncompatibleModelsError(f"{lm.name} is a {lm.kind} model; this sampler needs a hybrid "
                                      "(self-speculative masked diffusion) model.")


def model_ids(model, tokens: list[int]) -> list[int]:
    """Model input: BOS at position 0, token i at i + 1 (masked positions hold the mask id)."""
    return [model.config.bos_token_id] + list(tokens)


@torch.no_grad()
def nc_pass(model, ids: list[int], mi: MaskedInput | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-causal pass on one sequence: hidden [1, L, E] and float64 logits [L, V] (specials -inf;
    with `mi`, its word-start constraint too: row i + 1 is position i)."""
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    h, logits = model.noncausal(x)
    logits = host64(logits[0].masked_fill(model.special_mask(), float("-inf")))
    return h, (mi.constrain(logits, range(-1, len(ids) - 1)) if mi is not None else logits)


@torch.no_grad()
def causal_pass(
    model, h: torch.Tensor, positions: list[int], tokens: list[int], mi: MaskedInput | None = None
) -> torch.Tensor:
    """Causal logits (float64, specials -inf) [n - 1, V]: row r predicts positions[r + 1] given
    tokens[:r + 1] along the chain (positions are MaskedInput indices)."""
    dev = model.device
    order = torch.tensor([[p + 1 for p in positions]], dtype=torch.long, device=dev)
    toks = torch.tensor([tokens], dtype=torch.long, device=dev)
    logits = host64(model.causal(h, order, toks)[0].masked_fill(model.special_mask(), float("-inf")))
    return mi.constrain(logits, positions[1:]) if mi is not None else logits


def cosine_remaining(m: int, steps: int) -> list[int]:
    """Positions still masked after each step s = 0..T of a cosine grid (m at s = 0, 0 at s = T)."""
    return [round(m * math.cos(0.5 * math.pi * s / steps)) if s < steps else 0 for s in range(steps + 1)]


def mdm(
    model, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, steps: int,
    counter: CallCounter,
) -> Iterator[Step]:
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
