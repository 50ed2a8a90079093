"""The deliberately wrong rules' laws, per position, from the same density call as the transforms.

A wrong ASSD rule (engine/exactness/wrong_samplers.py on engine/samplers/assd.py, no bonus token)
decides the masked positions in lattice order, in rounds. A round that starts at s drafts every
position j of it from p_j^s = P(x_j | tokens before s); the first (j = s) is the target row itself
and always kept; each later draft is kept w.p. min(1, q_j / p_j^s), q_j = P(x_j | tokens before j).
A rejection decides j (from the rule's r) and ends the round: the next starts at j + 1. k kept
tokens end it too: the next starts at s + k. So at position j, given the round start s:
  P(x_j = y, kept | s) = min(p_j^s, q_j)(y),   P(x_j = y, rejected | s) = (1 - sum min(p_j^s, q_j)) r_j(y),
- wrong-assd-residual-from-q: r = q (the exact rule's residual norm(max(q - p, 0)) gives exactly q);
- wrong-assd-accept-all: no rejection, so its rounds are the blocks of k and its law is p_j^s.
The round start is hidden (the fill does not show which tokens were rejected), so the residual
rule's law of a fill is a hidden-Markov chain over s: a forward pass gives its exact predictive
P_w(x_j | x_<j) = sum_s alpha_j(s) [min(p_j^s, q_j) + (1 - sum min(p_j^s, q_j)) q_j], alpha_j(s)
= P(round start s | x_<j) (`wrong_predictive`). Every start's draft row comes out of the same call
as the target rows: the fill placed in lattice order, each position j queried given the tokens
before it (q) and given the tokens before each start s in (j - k, j) (p^s): m + sum min(j, k - 1)
query rows (beyond MAX_ROWS draft rows, a long span at a large k, in further calls of the same fill:
DraftRows).

The directed test is the likelihood ratio: L = sum over the N x masked observations of
log P_w(x_j | x_<j) / q(x_j | x_<j). Under an exact sampler each term, given the tokens before it,
has the mean and variance its row q gives, so the centred sum over its standard deviation is a
martingale tending to N(0, 1) whatever the rule's law is; a sampler that follows P_w makes it large.
It is the rule's exact likelihood ratio, so the most powerful test against that rule
(Neyman-Pearson), and it stays a valid test of exactness. Each term is clipped to [-CLIP, CLIP]
(a predictable function of the row, so the mean and variance stay exact): a token the contrast
almost never draws would otherwise give one huge term. Under each rule's own law the terms'
conditional means and covariances (every contrast's term, given the tokens before it) are known
too (`drift`, `cov`: the own contrast's expected increment is E_w[log ratio] - E_q[log ratio],
about KL(P_w || q) + KL(q || P_w)); the power estimate reads them (engine/exactness/power.py).

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
    """The wrong rule's output law at a position given its round's start, from the draft row p and
    the target row q."""
    if name == "wrong-assd-accept-all":
        return p
    if name == "wrong-assd-residual-from-q":
        both, rejected = kept_and_rejected(p, q)
        return both + rejected * q
    raise KeyError(name)


def kept_and_rejected(p: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A drafted position's two parts: min(p, q), the law of a kept draft, and the mass of a
    rejection, 1 - sum min(p, q) (what the residual rule then draws from q)."""
    both = torch.minimum(p, q)
    return both, (1.0 - both.sum(dim=-1, keepdim=True)).clamp_min(0.0)


def round_starts(m: int, k: int) -> list[int]:
    """The index (in lattice order) where each masked position's round starts when no draft is
    rejected (accept-all's rounds): blocks of k."""
    k = max(1, int(k))
    return [(i // k) * k for i in range(m)]


def window(j: int, k: int) -> range:
    """The round starts s != j possible at position j: a round holds at most k positions."""
    return range(max(0, j - max(1, int(k)) + 1), j)


def wrong_predictive(q: torch.Tensor, draft: dict[tuple[int, int], torch.Tensor] | DraftRows, fill: tuple[int, ...],
                     k: int) -> tuple[torch.Tensor, list[dict[int, float]]]:
    """The residual rule's exact predictive rows P_w(. | x_<j) along `fill` (shape of q), by the
    forward pass over the round start s, and alpha_j (start -> probability given x_<j) per position.
    q[j]: the target row of position j; draft[(j, s)]: p_j^s for every s in window(j, k)."""
    k = max(1, int(k))
    m = len(fill)
    out = torch.empty_like(q)
    alphas: list[dict[int, float]] = []
    alpha = {0: 1.0}
    for j in range(m):
        alphas.append(dict(alpha))
        parts: dict[int, tuple[torch.Tensor, float]] = {}  # s -> (min(p, q), rejection mass)
        row = torch.zeros_like(q[j])
        for s, a in alpha.items():
            if s == j:
                parts[s] = (q[j], 0.0)
                row += a * q[j]
                continue
            both, rejected = kept_and_rejected(draft[(j, s)], q[j])
            rej = float(rejected)
            parts[s] = (both, rej)
            row += a * (both + rej * q[j])
        out[j] = row
        y = fill[j]
        nxt: dict[int, float] = {}
        for s, a in alpha.items():
            both, rej = parts[s]
            kept = a * float(both[y])
            end = j + 1 if j + 1 - s >= k else s  # k kept tokens end the round
            nxt[end] = nxt.get(end, 0.0) + kept
            nxt[j + 1] = nxt.get(j + 1, 0.0) + a * rej * float(q[j, y])  # a rejection ends it
        z = sum(nxt.values())
        alpha = {s: v / z for s, v in nxt.items() if v > 0} if z > 0 else {j + 1: 1.0}
    return out, alphas


@dataclass(kw_only=True)
class FillRecord:
    """What one drawn fill contributes: its transform intervals per masked position, and per
    contrast and position the log-ratio at the drawn token with the mean and variance an exact
    sampler gives it; per contrast's law, every contrast's term's mean shift from the exact mean
    (drift) and their covariances under that law, given the tokens before the position."""

    lo: np.ndarray
    hi: np.ndarray
    log_prob: float  # the fill's exact log-probability under the chain (the product of its q rows)
    ell: dict[str, np.ndarray] = field(default_factory=dict)  # per masked position
    mu: dict[str, np.ndarray] = field(default_factory=dict)
    var: dict[str, np.ndarray] = field(default_factory=dict)
    drift: dict[str, np.ndarray] = field(default_factory=dict)  # law -> [contrasts, masked]: E_w[term | x_<j] - mu
    cov: dict[str, np.ndarray] = field(default_factory=dict)  # law -> [contrasts, contrasts, masked] under w
    log_prob_w: dict[str, float] = field(default_factory=dict)  # the fill's log-probability under the contrast


def fill_record(lm: LoadedModel, mi, fill: tuple[int, ...], temperature: float, k: int,
                contrasts: tuple[str, ...] = CONTRASTS) -> FillRecord:
    """One density call over `fill` on the model's own oracle (see record_from_oracle)."""
    return record_from_oracle(make_oracle(lm, mi, use_cache=False), mi, fill, temperature, k, contrasts)


def contrast_law(name: str, q: torch.Tensor, draft: dict[tuple[int, int], torch.Tensor] | DraftRows, fill: tuple[int, ...],
                 k: int) -> torch.Tensor:
    """The contrast's predictive rows P_w(. | x_<j) along the fill: the forward pass for the
    residual rule, the blocks' draft rows for accept-all."""
    if name == "wrong-assd-residual-from-q":
        return wrong_predictive(q, draft, fill, k)[0]
    if name == "wrong-assd-accept-all":
        starts = round_starts(len(fill), k)
        return torch.stack([q[j] if s == j else draft[(j, s)] for j, s in enumerate(starts)])
    raise KeyError(name)


MAX_ROWS = 512  # draft rows held at once (each a vocabulary-long float64 row): long spans at large k go in parts


class DraftRows:
    """Every position's target row q_j and draft rows p_j^s (s in window(j, k)) along a fill, from
    the fill placed once in lattice order on a fresh oracle. Up to MAX_ROWS draft rows come out of
    one call with the target rows; more (a long span at a large k) are asked in calls of consecutive
    positions as the forward pass reaches them, only one part held at a time, so memory stays
    bounded whatever the span."""

    def __init__(self, *, oracle: DensityOracle, drafts: list[tuple[int, int]], k: int, temperature: float,
                 max_rows: int | None = None):
        self.oracle, self.drafts, self.temperature = oracle, drafts, temperature
        max_rows = max_rows or MAX_ROWS
        m = len(drafts)
        self.parts: list[list[tuple[int, int]]] = [[]]  # consecutive positions' (j, s) pairs, at most max_rows each
        for j in range(m):
            mine = [(j, s) for s in window(j, k)]
            if self.parts[-1] and len(self.parts[-1]) + len(mine) > max_rows:
                self.parts.append([])
            self.parts[-1] += mine
        self.part_of = {js: i for i, part in enumerate(self.parts) for js in part}
        targets = [(pos, i) for i, (pos, _) in enumerate(drafts)]
        first = self.parts[0] if len(self.parts) == 1 else []
        rows = self._ask(targets + [(drafts[j][0], s) for j, s in first])
        self.targets = rows[:m]
        self.held, self.rows = (0, dict(zip(first, rows[m:]))) if first else (-1, {})
        self.calls = 1

    def _ask(self, queries: list[tuple[int, int]]) -> torch.Tensor:
        return tempered_probs(self.oracle.call(self.drafts, queries), self.temperature)

    def __getitem__(self, js: tuple[int, int]) -> torch.Tensor:
        part = self.part_of[js]
        if part != self.held:
            pairs = self.parts[part]
            self.rows = dict(zip(pairs, self._ask([(self.drafts[j][0], s) for j, s in pairs])))
            self.held = part
            self.calls += 1
        return self.rows[js]


def record_from_oracle(oracle: DensityOracle, mi, fill: tuple[int, ...], temperature: float, k: int,
                       contrasts: tuple[str, ...] = CONTRASTS) -> FillRecord:
    """One density call over `fill` on a fresh oracle (nothing committed): the target rows (every
    position given the tokens before it) and the draft rows (given the tokens before each round
    start it may have), tempered and under the input's rules as every sampler reads them (the oracle
    applies them); the transform intervals and each contrast's log-ratio terms."""
    drafts = list(zip(mi.masked, fill))
    draft = DraftRows(oracle=oracle, drafts=drafts, k=k, temperature=temperature)
    q = draft.targets
    lo, hi = rank_intervals(q, list(fill))
    tok = torch.tensor(fill, dtype=torch.long)[:, None]
    rec = FillRecord(lo=lo, hi=hi, log_prob=float(torch.log(q.gather(1, tok)).sum()))
    live = q > 0
    laws, ratios = {}, {}
    for name in contrasts:
        w = laws[name] = contrast_law(name, q, draft, fill, k)
        ratio = (torch.log(w.clamp_min(1e-300)) - torch.log(q.clamp_min(1e-300))).clamp(-CLIP, CLIP)
        ratio = ratios[name] = torch.where(live, ratio, torch.zeros_like(ratio))
        mean = (q * ratio).sum(dim=1)
        second = (q * ratio * ratio).sum(dim=1)
        rec.ell[name] = ratio.gather(1, tok)[:, 0].numpy()
        rec.mu[name] = mean.numpy()
        rec.var[name] = (second - mean * mean).clamp_min(0.0).numpy()
        rec.log_prob_w[name] = float(torch.log(w.gather(1, tok).clamp_min(1e-300)).sum())
    for name, w in laws.items():  # every contrast's terms under this rule's law
        means = torch.stack([(w * ratios[c]).sum(dim=1) for c in contrasts])  # [contrasts, masked]
        rec.drift[name] = (means - torch.stack([torch.from_numpy(rec.mu[c]) for c in contrasts])).numpy()
        rec.cov[name] = torch.stack([torch.stack([(w * ratios[a] * ratios[b]).sum(dim=1) - means[i] * means[j]
                                                  for j, b in enumerate(contrasts)])
                                     for i, a in enumerate(contrasts)]).numpy()
    return rec


def lr_p(ell: float, mu: float, var: float) -> float:
    """One-sided p-value of the likelihood-ratio sum against its exact-sampling law (normal)."""
    if var <= 0:
        return 1.0 if ell <= mu + 1e-12 else 0.0
    return float(norm.sf((ell - mu) / np.sqrt(var)))
