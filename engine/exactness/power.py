"""The chain test's p-value and its power: what the check could have seen at this N.

A sampler's draws become FillRecords (engine/exactness/contrast.py). The test combines, by
Bonferroni, the omnibus Kolmogorov-Smirnov test of the probability-ordered transforms
(engine/exactness/pit.py) with one likelihood-ratio test per deliberately wrong contrast: the
smallest of the 1 + contrasts p-values, times their number.

Power is estimated by simulating the contrast: a contrast's own draws (the wrong sampler's draws
in this check, or a pilot of them) are resampled N at a time, each resample tested like a real
check; the share flagged at the level is the power. The likelihood ratios are not resampled as
drawn: given the tokens before it, each term's conditional mean and the covariance of the
contrasts' terms under the rule whose draws these are are known (FillRecord.drift, cov), so a
resample's centred sums are their summed drifts plus one joint normal draw of their summed
covariance (the martingale CLT under the rule; Rao-Blackwell). Reusing the drawn terms' own noise
in every resample states, from a pilot whose noise happened to push the statistic up (or down), a
power and an N for a target that fresh checks do not reach; and simulating one ratio apart from
the other loses their correlation (0.8 on the table model), which overstates the Bonferroni
combination. Only the KS part is resampled as drawn. A "consistent" is only worth its power, so every verdict carries it,
and `n_for_power` says which N would reach a target.

Its own module because these are plain numbers (arrays in, probabilities out), read by the check,
the CLI, the app and their tests alike."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2, ncx2

from engine.exactness.contrast import CONTRASTS, FillRecord, lr_p
from engine.exactness.pit import Intervals, ks_critical, ks_distance, ks_p, transforms

STATISTIC = ("Kolmogorov-Smirnov test of the randomised probability integral transforms (vocabulary "
             "ordered by the conditional's probabilities), combined by Bonferroni with a likelihood-ratio "
             "test against each deliberately wrong rule")
POWER_REPS = 200  # resampled checks behind one power estimate
TARGET_POWER = 0.8  # below it a "consistent" reads "cannot tell at this N"
AUTO_POWER = 0.9  # what --samples auto aims for


@dataclass(kw_only=True)
class Records:
    """A sampler's draws as arrays: transform intervals [draws, masked], and the log-ratio terms,
    their exact-sampling means and variances [draws, contrasts, masked]; under each contrast's law,
    every contrast's drift [draws, law, contrasts, masked] and covariance [draws, law, contrasts,
    contrasts, masked]."""

    lo: np.ndarray
    hi: np.ndarray
    ell: np.ndarray
    mu: np.ndarray
    var: np.ndarray
    drift: np.ndarray
    cov: np.ndarray

    @classmethod
    def of(cls, recs: list[FillRecord], masked: int) -> Records:
        """The fills' records as arrays (one row a fill), so resampling for power is indexing."""
        if not recs:
            z = np.zeros((0, masked))
            c = np.zeros((0, len(CONTRASTS), masked))
            n = len(CONTRASTS)
            return cls(lo=z, hi=z.copy(), ell=c, mu=c.copy(), var=c.copy(), drift=np.zeros((0, n, n, masked)),
                       cov=np.zeros((0, n, n, n, masked)))
        arr = lambda key: np.array([[getattr(r, key)[c] for c in CONTRASTS] for r in recs])  # noqa: E731
        return cls(lo=np.array([r.lo for r in recs]), hi=np.array([r.hi for r in recs]), ell=arr("ell"), mu=arr("mu"),
                   var=arr("var"), drift=arr("drift"), cov=arr("cov"))

    def __len__(self) -> int:
        return int(self.lo.shape[0])

    def take(self, rows: np.ndarray) -> Records:
        """The records of the given rows: one bootstrap resample of the fills."""
        return Records(lo=self.lo[rows], hi=self.hi[rows], ell=self.ell[rows], mu=self.mu[rows], var=self.var[rows],
                       drift=self.drift[rows], cov=self.cov[rows])


@dataclass(kw_only=True)
class ChainFit:
    """The combined test on one sampler's draws."""

    p_value: float
    ks_p: float
    ks_distance: float
    lr_p: dict[str, float]
    observations: int


def chain_fit(rec: Records, seed: int = 0, centred: dict[str, float] | None = None) -> ChainFit:
    """The combined p-value: Bonferroni over the KS test and each contrast's likelihood ratio.
    `centred` (power's simulation only): a contrast's centred sum given, in place of the drawn one."""
    u = transforms(Intervals(rec.lo, rec.hi), np.random.default_rng(seed))
    d = ks_distance(u)
    pk = ks_p(d, u.size)
    centred = centred or {}
    lr = {c: lr_p(centred.get(c, float(rec.ell[:, j].sum() - rec.mu[:, j].sum())), 0.0, float(rec.var[:, j].sum()))
          for j, c in enumerate(CONTRASTS)}
    tests = 1 + len(lr)
    return ChainFit(p_value=min(1.0, tests * min([pk, *lr.values()])), ks_p=pk, ks_distance=d, lr_p=lr, observations=int(u.size))


def position_p(rec: Records, seed: int = 0) -> list[float]:
    """Each masked position's own combined p-value (KS of its transforms, each contrast's likelihood
    ratio over its terms; Bonferroni within the position): where the sampler departs most."""
    u = transforms(Intervals(rec.lo, rec.hi), np.random.default_rng(seed))
    out = []
    for i in range(u.shape[1]):
        parts = [ks_p(ks_distance(u[:, i]), u.shape[0])]
        parts += [lr_p(float(rec.ell[:, j, i].sum()), float(rec.mu[:, j, i].sum()), float(rec.var[:, j, i].sum()))
                  for j in range(len(CONTRASTS))]
        out.append(min(1.0, len(parts) * min(parts)))
    return out


def power(rec: Records, n: int, alpha: float, reps: int = POWER_REPS, seed: int = 0, own: str | None = None) -> float:
    """The share of `reps` simulated checks of n draws (resampled from `rec`, draws of the contrast
    `own`) whose combined p-value is below alpha. Every contrast's likelihood ratio is simulated
    from the terms' drifts and covariances under `own`'s law (see the module's note); with `own`
    None every part is resampled as drawn."""
    if len(rec) == 0 or n < 1:
        return 0.0
    rng = np.random.default_rng(seed)
    j = CONTRASTS.index(own) if own is not None else None
    hits = 0
    for i in range(reps):
        part = rec.take(rng.integers(0, len(rec), n))
        centred = None
        if j is not None:
            shift = part.drift[:, j].sum(axis=(0, 2))
            cov = part.cov[:, j].sum(axis=(0, 3))
            noise = rng.multivariate_normal(np.zeros(len(shift)), cov, method="eigh")
            centred = {c: float(x) for c, x in zip(CONTRASTS, shift + noise)}
        hits += chain_fit(part, seed=seed + 1 + i, centred=centred).p_value < alpha
    return hits / reps


def n_for_power(rec: Records, target: float, alpha: float, start: int, cap: int, reps: int = 60,
                own: str | None = None) -> int | None:
    """The smallest N above start // 2 on a doubling grid from `start` (at most `cap`) whose power
    reaches `target`, refined by bisection to about 10%; None if even `cap` does not. `reps` simulated checks per
    point: enough to place N, not to state a power (power() states it)."""
    lo, n = max(0, start // 2), max(1, start)  # below start // 2 is not asked: the caller knows it falls short
    while power(rec, n, alpha, reps=reps, own=own) < target:
        if n >= cap:
            return None
        lo, n = n, min(cap, 2 * n)
    while n - lo > max(10, n // 10):
        mid = (lo + n) // 2
        lo, n = (lo, mid) if power(rec, mid, alpha, reps=reps, own=own) >= target else (mid, n)
    # the bisection's few simulated checks place N within their noise, which lands on either side of
    # the target: confirm with five times as many, and step up by a tenth until it holds
    while power(rec, n, alpha, reps=5 * reps, own=own) < target:
        if n >= cap:
            return None
        n = min(cap, n + max(10, n // 10))
    return n


def ks_departure(observations: int, alpha: float) -> float:
    """The smallest departure the omnibus test sees: the KS distance (largest gap between the
    transforms' CDF and the uniform's) that is significant at alpha over this many observations."""
    return ks_critical(observations, alpha / (1 + len(CONTRASTS)))


def chi2_min_shift(probs: list[float], n: int, alpha: float, target: float = TARGET_POWER) -> float | None:
    """For the enumeration (chi-square) test: the smallest probability moved between the two likeliest
    cells that it flags with power `target` at n draws (noncentral chi-square); None if untestable."""
    cells = sorted(probs, reverse=True)
    dof = len(cells) - 1
    if dof < 1 or n < 1:
        return None
    crit = float(chi2.isf(alpha, dof))
    lo, hi = 0.0, 1e6
    for _ in range(80):  # the noncentrality that gives `target` power
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(ncx2.sf(crit, dof, mid)) < target else (lo, mid)
    a, b = cells[0], cells[1]
    return float(np.sqrt(hi / (n * (1 / a + 1 / b))))
