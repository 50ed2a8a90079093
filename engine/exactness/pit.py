"""The exactness test that needs no enumeration: randomised probability integral transforms.

The AS-ARM is an exact density oracle. For a drawn fill, one density call (the fill placed in
lattice order, every masked position queried given the tokens before it: engine/exactness/
contrast.py, record_from_oracle) gives the conditional the sampler targets at each position:
tempered, and under the input's word-start and one-line rules, because the call goes through the
same oracle (and its `constrain`) and the same `tempered_probs` as every sampler. Under an exact
sampler the randomised transforms of the decided tokens (Rosenblatt) are independent
Uniform(0, 1), so N fills give N x masked observations for one Kolmogorov-Smirnov test, whatever
the span length.

The vocabulary is ordered by the conditional's own probabilities, most likely first: a wrong rule
moves mass between likely and unlikely tokens, which this order turns into a shift of the
transforms; in token-id order the same shift is scattered and stays hidden.

Its own module because it is the statistic alone: arrays in, a p-value out, checked without a
sampler (tests/engine/exactness/test_exactness_power.py); engine/exactness/power.py reads it for power."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import kstwo


@dataclass
class Intervals:
    """Each drawn fill's transform intervals [lo, hi) per masked position (shape [draws, masked]):
    the conditional's mass on tokens ranked before the drawn one, and that plus the drawn token's
    own mass. A uniform point inside each interval is the randomised transform."""

    lo: np.ndarray
    hi: np.ndarray



def rank_intervals(rows: torch.Tensor, tokens: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """For each row (a distribution) and its token: the mass of every token ranked before it (higher
    probability, ties broken by lower id) and that mass plus the token's own."""
    rows = rows.to(torch.float64)
    tok = torch.tensor(tokens, dtype=torch.long)
    own = rows.gather(1, tok[:, None])  # [m, 1]
    ids = torch.arange(rows.shape[1])[None, :]
    before = (rows > own) | ((rows == own) & (ids < tok[:, None]))
    total = rows.sum(dim=1, keepdim=True)
    lo = (rows * before).sum(dim=1, keepdim=True) / total
    hi = lo + own / total
    return lo[:, 0].numpy(), np.minimum(hi[:, 0].numpy(), 1.0)


def transforms(iv: Intervals, rng: np.random.Generator) -> np.ndarray:
    """The randomised transforms: a uniform point in each interval (shape [draws, masked])."""
    return iv.lo + rng.random(iv.lo.shape) * (iv.hi - iv.lo)


def ks_distance(u: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance of a sample (flattened) from Uniform(0, 1)."""
    x = np.sort(np.clip(u.ravel(), 0.0, 1.0))
    n = x.size
    if n == 0:
        return 0.0
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - x), np.max(x - (i - 1) / n)))


def ks_p(d: float, n: int) -> float:
    """The exact two-sided p-value of a KS distance d over n observations."""
    return float(kstwo.sf(d, n)) if n else 1.0


def ks_critical(n: int, alpha: float) -> float:
    """The smallest KS distance that is significant at `alpha` over n observations."""
    return float(kstwo.isf(alpha, n)) if n else 1.0


@dataclass(kw_only=True)
class PitFit:
    """One sampler's transforms against Uniform(0, 1): the pooled test and the per-position ones."""

    p_value: float
    statistic: float  # KS distance, pooled
    observations: int
    position_p: list[float]  # per masked position (lattice order)
    worst_position: int  # index into the masked positions whose transforms depart most
    mean: float  # mean transform (0.5 under exactness; below: too many likely tokens)


def pit_fit(iv: Intervals, seed: int = 0) -> PitFit:
    """The KS test of the pooled randomised transforms, and each masked position's own test."""
    u = transforms(iv, np.random.default_rng(seed))
    n = u.size
    d = ks_distance(u)
    per = [ks_p(ks_distance(u[:, j]), u.shape[0]) for j in range(u.shape[1])]
    worst = int(np.argmin(per)) if per else 0
    return PitFit(p_value=ks_p(d, n), statistic=d, observations=n, position_p=per, worst_position=worst,
                  mean=float(u.mean()) if n else 0.5)
