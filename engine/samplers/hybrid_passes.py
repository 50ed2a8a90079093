"""What every sampler on the hybrid shares (mdm, self-spec, its exact likelihood, the diffusion
drafter of assd-diffusion): the model's input layout, the non-causal and causal passes with the
special tokens and the word-start constraint applied, the cosine grid, and the fractional call counter.

Call units: one call is one pass through *all* blocks of the hybrid. A non-causal pass costs
nc_blocks / all_blocks of a call, a causal pass causal_blocks / all_blocks (docs/DESIGN.md §4), so an MDM
step (a non-causal pass) and the self-speculative sampler's passes are counted in the same unit.
"""

from __future__ import annotations

import math

import torch

from engine.inputs.masking import MaskedInput
from engine.loading.device import host64

from ..errors import IncompatibleModelsError


class CallCounter:
    """Fractional calls so far (install as ctx.counter); `best` is the best-case count."""

    def __init__(self) -> None:
        self.calls = 0.0
        self.best = 0.0

    def __call__(self) -> float:
        return self.calls


def require_hybrid(lm) -> None:
    """Refuse, with a message, a model that is not a hybrid (these samplers need both heads)."""
    if getattr(lm, "kind", "hybrid") != "hybrid":
        raise IncompatibleModelsError(f"{lm.name} is a {lm.kind} model; this sampler needs a hybrid "
                                      "(self-speculative masked diffusion) model.")


def model_ids(model, tokens: list[int]) -> list[int]:
    """Model input: BOS at position 0, token i at i + 1 (masked positions hold the mask id)."""
    return [model.config.bos_token_id] + list(tokens)


def nc_pass(model, ids: list[int], mi: MaskedInput | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-causal pass on one sequence: hidden [1, L, E] and float64 logits [L, V] (specials -inf;
    with `mi`, its word-start constraint too: row i + 1 is position i)."""
    with torch.no_grad():  # a block, not a decorator: mutmut mutates no decorated function
        x = torch.tensor([ids], dtype=torch.long, device=model.device)
        h, logits = model.noncausal(x)
        logits = host64(logits[0].masked_fill(model.special_mask(), float("-inf")))
        return h, (mi.constrain(logits, range(-1, len(ids) - 1)) if mi is not None else logits)


def causal_pass(
    model, h: torch.Tensor, positions: list[int], tokens: list[int], mi: MaskedInput | None = None
) -> torch.Tensor:
    """Causal logits (float64, specials -inf) [n - 1, V]: row r predicts positions[r + 1] given
    tokens[:r + 1] along the chain (positions are MaskedInput indices)."""
    with torch.no_grad():  # a block, not a decorator: mutmut mutates no decorated function
        dev = model.device
        order = torch.tensor([[p + 1 for p in positions]], dtype=torch.long, device=dev)
        toks = torch.tensor([tokens], dtype=torch.long, device=dev)
        logits = host64(model.causal(h, order, toks)[0].masked_fill(model.special_mask(), float("-inf")))
        return mi.constrain(logits, positions[1:]) if mi is not None else logits


def cosine_remaining(m: int, steps: int) -> list[int]:
    """Positions still masked after each step s = 0..T of a cosine grid (m at s = 0, 0 at s = T)."""
    return [round(m * math.cos(0.5 * math.pi * s / steps)) if s < steps else 0 for s in range(steps + 1)]


def hybrid_counter(ctx) -> CallCounter:
    """A hybrid sampler's start: refuse a model that is not a hybrid, and install the run's call
    counter (fractional calls per pass) where the run's context reads it."""
    require_hybrid(ctx.lm)
    ctx.counter = CallCounter()
    return ctx.counter
