"""The deliberately wrong rules' laws, per position, from the same density call as the transforms.

A wrong ASSD rule draws position i of a round from r_i, a function of the round's draft row
p_i = P(x_i | tokens before the round) and the target row q_i = P(x_i | tokens before i):
- wrong-assd-residual-from-q: r = min(p, q) + (1 - sum min(p, q)) q (a rejection draws from q);
- wrong-assd-accept-all: r = p (parallel decoding).
The round starts are taken as the blocks of k a run without rejections makes (accept-all's own
rounds exactly; for the residual rule an approximation). Both rows come out of one call: the fill
placed in lattice order, each position queried once given the tokens before it (q) and once
given the tokens before its round (p).

The directed test is the likelihood ratio: L = sum over the N x masked observations of
log r(x) / q(x). Under an exact sampler each term, given the tokens before it, has the mean and
variance its row q gives, so the centred sum over its standard deviation is a martingale tending
to N(0, 1) whatever the rule's law is; a sampler that follows r makes it large. This is the most
powerful test against that contrast (Neyman-Pearson), and it stays a valid test of exactness.
Each term is clipped to [-CLIP, CLIP] (a predictable function of the row, so the mean and variance
stay exact): a token the contrast almost never draws would otherwise give one huge term.

Its own module because the contrasts' laws must match engine/exactness/wrong_samplers.py and are
read by the check, the power estimate and their tests; nothing here runs a sampler."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import norm

from engine.api import make_oracle
from engine.exactness.pit import rank_intervals
from engine.loading.loaded_model import LoadedModel
from engine.samplers.acceptance import tempered_probs
from engine.samplers.base import DensityOracle

CLIP = 4.0  # log-ratios are clipped to [-CLIP, CLIP]: bounded terms keep the normal law honest at small N
CONTRASTS = ("wrong-assd-residual-from-q", "wrong-assd-accept-all")


def contrast_rows(name: str, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The wrong rule's output law at a position, from its draft row p and target row q."""
    if name == "wrong-assd-accept-all":
        return p
    if name == "wrong-assd-residual-from-q":
        both = torch.minimum(p, q)
        return both + (1.0 - both.sum(dim=-1, keepdim=True)) * q
    raise KeyError(name)


@dataclass
class FillRecord:
    """What one drawn fill contributes: its transform intervals per masked position, and per
    contrast and position the log-ratio at the drawn token with the mean and variance an exact
    sampler gives it."""

    lo: np.ndarray
    hi: np.ndarray
    log_prob: float  # the fill's exact log-probability under the chain (the product of its q rows)
    ell: dict[str, np.ndarray] = field(default_factory=dict)  # per masked position
    mu: dict[str, np.ndarray] = field(default_factory=dict)
    var: dict[str, np.ndarray] = field(default_factory=dict)


def round_starts(m: int, k: int) -> list[int]:
    """The index (in lattice order) where each masked position's round starts: blocks of k."""
    k = max(1, int(k))
    return [(i // k) * k for i in range(m)]


def fill_record(lm: LoadedModel, mi, fill: tuple[int, ...], temperature: float, k: int,
                contrasts: tuple[str, ...] = CONTRASTS) -> FillRecord:
    """One density call over `fill` on the model's own oracle (see record_from_oracle)."""
    return record_from_oracle(make_oracle(lm, mi, use_cache=False), mi, fill, temperature, k, contrasts)


def record_from_oracle(oracle: DensityOracle, mi, fill: tuple[int, ...], temperature: float, k: int,
                       contrasts: tuple[str, ...] = CONTRASTS) -> FillRecord:
    """One density call over `fill` on a fresh oracle (nothing committed): the target rows (every
    position given the tokens before it) and the draft rows (given the tokens before its round),
    tempered and under the input's rules as every sampler reads them (the oracle applies them);
    the transform intervals and each contrast's log-ratio terms."""
    drafts = list(zip(mi.masked, fill))
    m = len(drafts)
    starts = round_starts(m, k)
    own = [i for i in range(m) if starts[i] != i]  # positions whose draft row differs from the target's
    queries = [(pos, i) for i, (pos, _) in enumerate(drafts)] + [(drafts[i][0], starts[i]) for i in own]
    rows = tempered_probs(oracle.call(drafts, queries), temperature)
    q = rows[:m]
    p = q.clone()
    for j, i in enumerate(own):
        p[i] = rows[m + j]
    lo, hi = rank_intervals(q, list(fill))
    tok = torch.tensor(fill, dtype=torch.long)[:, None]
    rec = FillRecord(lo, hi, float(torch.log(q.gather(1, tok)).sum()))
    for name in contrasts:
        r = contrast_rows(name, p, q)
        live = q > 0
        ratio = (torch.log(r.clamp_min(1e-300)) - torch.log(q.clamp_min(1e-300))).clamp(-CLIP, CLIP)
        ratio = torch.where(live, ratio, torch.zeros_like(ratio))
        mean = (q * ratio).sum(dim=1)
        second = (q * ratio * ratio).sum(dim=1)
        rec.ell[name] = ratio.gather(1, tok)[:, 0].numpy()
        rec.mu[name] = mean.numpy()
        rec.var[name] = (second - mean * mean).clamp_min(0.0).numpy()
    return rec


def lr_p(ell: float, mu: float, var: float) -> float:
    """One-sided p-value of the likelihood-ratio sum against its exact-sampling law (normal)."""
    if var <= 0:
        return 1.0 if ell <= mu + 1e-12 else 0.0
    return float(norm.sf((ell - mu) / np.sqrt(var)))
