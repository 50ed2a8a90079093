"""Randomness and the speculative acceptance test, in one place, in float64.

Every speculative sampler (ASSD and its variants, self-speculative diffusion, the diffusion
drafter) calls `speculative_accept`; every random draw goes through the explicit generator, so a
stored seed replays a run exactly. Float64 matters: float32 ratios and residuals are a known
source of silently wrong distributions.

The per-token arithmetic (a draw's cumulative sums, a test's ratio and residual) runs on a NumPy view
of the row: the same float64 numbers, in microseconds, where each small torch call costs 10-20 us on
a 2-core CPU, and a round makes a dozen of them per token (docs/DESIGN.md §7.1, host work).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from engine.errors import DistributionError


def tempered_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T) in float64; -inf logits (special tokens) get exactly zero mass.

    Proposal and target both pass through here, so exactness holds for the tempered target. At
    T = 1 the division is skipped: x / 1.0 is x bitwise, and on a small CPU every operation of a
    round costs tens of microseconds.
    """
    x = logits.to(torch.float64)
    return torch.softmax(x if temperature == 1 else x / temperature, dim=-1)


def uniform(gen: torch.Generator) -> float:
    """One float64 uniform from the run's generator: the acceptance test's coin, so every random
    decision of a run comes from one seeded stream."""
    return float(torch.rand((), generator=gen, dtype=torch.float64))


def uniforms(gen: torch.Generator, n: int) -> list[float]:
    """n float64 uniforms from the run's generator in one draw: the same numbers, in the same order,
    as n calls of `uniform` (one torch call where a round would make n)."""
    return torch.rand(n, generator=gen, dtype=torch.float64).tolist()


def sample_categorical(probs: torch.Tensor, gen: torch.Generator) -> int:
    """Inverse-CDF draw from a float64 probability vector (normalised here) at a fresh uniform
    from the run's generator (see inverse_cdf)."""
    return inverse_cdf(probs, uniform(gen))


def host_row(probs: torch.Tensor | np.ndarray) -> np.ndarray:
    """A row as float64 NumPy numbers on the host: a view of a float64 CPU tensor or array (no copy), a
    promoted copy of anything else (float32 rows are promoted before any sum is taken)."""
    if isinstance(probs, np.ndarray):
        return probs.astype(np.float64, copy=False)
    return probs.detach().to("cpu", torch.float64).numpy()


def inverse_cdf(probs: torch.Tensor, u: float) -> int:
    """F^-1_p(u): the token whose CDF interval holds u * total mass, for a given uniform u in [0, 1).
    A row with NaN, infinite, negative or no mass is refused: an arbitrary token from it would be a
    wrong sample."""
    return inverse_cdf_host(host_row(probs), u)


def tempered_weights(logits: np.ndarray, temperature: float) -> np.ndarray:
    """exp(logits / T - max) of one float64 NumPy row: softmax(logits / T) before its division,
    -inf logits at exactly zero, the largest at 1 (so the total is >= 1 and finite). A proposal built
    on the host (assd-ptp's rows) draws from these; every target row the test reads still goes through
    `tempered_probs`. A row whose largest logit is not finite (all -inf, +inf or NaN) is refused: it
    has no distribution to draw from."""
    x = logits if temperature == 1 else logits / temperature
    top = float(x.max())
    if not math.isfinite(top):
        raise DistributionError(f"Cannot build a proposal row whose largest logit is {top!r}; the drafter "
                                "is broken for this input.")
    return np.exp(x - top)


def draw_host(logits: np.ndarray, u: float, temperature: float) -> tuple[int, np.ndarray]:
    """(F^-1_p(u), p) for p = softmax(logits / T) of one float64 NumPy row: the token at uniform u
    and the very row it was drawn from (the test reads that row), from one pass of cumulative
    sums over the tempered weights (cdf_index) and one division."""
    e = tempered_weights(logits, temperature)
    idx, total = cdf_index(e, u)
    return idx, e / total


def inverse_cdf_host(probs: np.ndarray, u: float) -> int:
    """inverse_cdf on a float64 NumPy row (negative entries refused). The residual draw of the
    speculative test comes here."""
    if bool((probs < 0).any()):
        raise DistributionError("Cannot sample from a row with negative mass; the model or drafter is broken "
                                "for this input.")
    return cdf_index(probs, u)[0]


#: cdf_index's block: a row of a multiple of it (>= 2 blocks) is searched block sums first
CDF_BLOCK = 64


def cdf_index(weights: np.ndarray, u: float) -> tuple[int, float]:
    """(i, W) for nonnegative float64 weights w [V] of total W: the i whose cumulative interval
    [w_0 + .. + w_{i-1}, w_0 + .. + w_i) holds u * W, i.e. i drawn with probability w_i / W for a
    uniform u; a u on the right edge of a zero-weight tail steps left to the last weighted entry.
    A total that is NaN, infinite or not positive is refused: an arbitrary token would be a wrong sample.
    Why blocks: NumPy's cumsum runs about 2.4 ns an entry, one after the other (10 us a 4096-token
    row), while a block's sum is vectorised; so a row of whole blocks sums its blocks, finds the
    block of u * W among their cumulative sums and cumsums that block alone (about half the time a
    draw; docs/DESIGN.md §7.1). The same interval, up to the order of float64 additions."""
    n = weights.size
    blocked = n % CDF_BLOCK == 0 and n >= 2 * CDF_BLOCK
    cdf = np.cumsum(weights.reshape(-1, CDF_BLOCK).sum(1) if blocked else weights)  # blocks' or entries' sums
    total = float(cdf[-1])
    if not math.isfinite(total) or total <= 0:
        raise DistributionError(f"Cannot sample from a row with total mass {total!r} (NaN, infinite, "
                                "negative or all zero); the model or drafter is broken for this input.")
    target = u * total
    idx = int(np.searchsorted(cdf, target, side="right"))
    if blocked:  # idx is the block: search inside it, from the mass before it
        b = min(idx, cdf.size - 1)
        before = float(cdf[b - 1]) if b else 0.0
        inside = np.cumsum(weights[b * CDF_BLOCK : (b + 1) * CDF_BLOCK])
        idx = b * CDF_BLOCK + int(np.searchsorted(inside, target - before, side="right"))
    idx = min(idx, n - 1)
    while weights[idx] <= 0 and idx > 0:  # u landed on the right edge of a zero-weight tail
        idx -= 1
    return idx, total


@dataclass(kw_only=True)
class Verdict:
    """The outcome of one speculative test: the token kept and the probabilities the trace shows
    (p and q of the draft, min(1, q/p), q of the kept token)."""

    accepted: bool
    token: int  # the draft if accepted, the residual sample otherwise
    accept_prob: float
    p_draft: float  # p(draft) under the proposal
    q_draft: float  # q(draft) under the target
    q_token: float  # q(token) of the final token (what the target says of the kept token)


def speculative_accept(
    draft: int, p: torch.Tensor, q: torch.Tensor, gen: torch.Generator
) -> Verdict:
    """Accept draft ~ p with probability min(1, q/p); else resample from norm(max(q - p, 0)).

    p and q are full float64 distributions over the vocabulary. The output is exactly
    distributed as q whatever p is, provided draft was drawn from p.
    """
    pa, qa = host_row(p), host_row(q)
    px, qx = float(pa[draft]), float(qa[draft])
    # a draft drawn from p has p(draft) > 0; anything else (NaN from a zero-sum row, 0, inf) would
    # make min(1, q/p) meaningless and silently accept or reject: refuse instead
    if not (math.isfinite(px) and px > 0):
        raise DistributionError(f"The proposal gives its own draft probability {px!r}; a draft must be drawn "
                                "from a proper proposal row (finite, positive mass on the draft).")
    if not (math.isfinite(qx) and qx >= 0 and math.isfinite(float(qa.sum()))):
        raise DistributionError(f"The target row is not a distribution (q(draft) = {qx!r}).")
    a = min(1.0, qx / px)
    if uniform(gen) < a:
        return Verdict(accepted=True, token=draft, accept_prob=a, p_draft=px, q_draft=qx, q_token=qx)
    residual = np.maximum(qa - pa, 0.0)
    if float(residual.sum()) <= 0.0:  # q == p to the last bit: rejection has probability 0
        residual = qa
    tok = inverse_cdf_host(residual, uniform(gen))
    return Verdict(accepted=False, token=tok, accept_prob=a, p_draft=px, q_draft=qx, q_token=float(qa[tok]))
