"""The exactness check's statistical test: Pearson's chi-square of a sampler's counts against the
exact law (engine/exactness/law.py) on the cells with expected count >= MIN_EXPECTED (N p >= 5),
every other fill pooled into "other" (merged with the smallest cells while its own expected count
is below 5); p-value from the chi-square law with cells - 1 degrees of freedom. A fill whose exact
probability is 0 is an impossible outcome: p = 0. Consistent means p >= ALPHA.

Its own module because the test needs no model: it is plain numbers in, a verdict out, checked
on its own (tests/engine/exactness/test_exactness.py against scipy's chisquare) and read by the app's table and
the CLI as well as the check."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from engine.exactness.law import Fill

MIN_EXPECTED = 5.0  # a cell of the chi-square test has an expected count of at least this
ALPHA = 0.01  # p below this: "not consistent"
CONSISTENT = "consistent with exact sampling at this N"
NOT_CONSISTENT = "not consistent with exact sampling at this N"
UNTESTABLE = "nothing to test at this N"


@dataclass(kw_only=True)
class Fit:
    """One sampler's counts against the exact law on the test's cells."""

    p_value: float
    statistic: float
    dof: int
    tv: float  # between frequencies and exact probabilities on the test's cells
    cells: int
    impossible: int  # draws of fills the exact law gives probability 0
    note: str = ""


def pooled_cells(exact: dict[Fill, float], n: int) -> list[Fill]:
    """The fills that get a cell of their own: expected count >= MIN_EXPECTED, and enough left over
    for "other" to reach it too (else its smallest cells join "other"). Most likely first."""
    kept = sorted((f for f, p in exact.items() if n * p >= MIN_EXPECTED), key=lambda f: (-exact[f], f))
    rest = 1.0 - sum(exact[f] for f in kept)
    while kept and n * rest < MIN_EXPECTED - 1e-9 and rest > 1e-12:
        rest += exact[kept.pop()]
    return kept


def goodness_of_fit(counts: dict[Fill, int], exact: dict[Fill, float], n: int) -> Fit:
    """Pearson's chi-square of `counts` (n draws) against `exact` on the pooled cells (pooled_cells);
    p-value from the chi-square law with cells - 1 degrees of freedom."""
    impossible = sum(c for f, c in counts.items() if f in exact and exact[f] <= 0.0)
    kept = pooled_cells(exact, n)
    obs = [counts.get(f, 0) for f in kept]
    probs = [exact[f] for f in kept]
    rest_p = max(0.0, 1.0 - sum(probs))
    if rest_p > 1e-12:
        obs.append(n - sum(obs))
        probs.append(rest_p)
    tv = 0.5 * sum(abs(o / n - p) for o, p in zip(obs, probs)) if n else 0.0
    if impossible:
        return Fit(p_value=0.0, statistic=math.inf, dof=len(obs) - 1, tv=tv, cells=len(obs), impossible=impossible,
                   note=f"{impossible} draw(s) of a fill the model gives probability 0")
    if len(obs) < 2:
        return Fit(p_value=1.0, statistic=0.0, dof=0, tv=tv, cells=len(obs), impossible=0, note=untestable_note(exact, n))
    stat = float(sum((o - n * p) ** 2 / (n * p) for o, p in zip(obs, probs)))
    dof = len(obs) - 1
    return Fit(p_value=float(chi2.sf(stat, dof)), statistic=stat, dof=dof, tv=tv, cells=len(obs), impossible=0)


def untestable_note(exact: dict[Fill, float], n: int) -> str:
    """Why the chi-square has no degrees of freedom, and the advice that fits the case: one fill
    holding nearly all the mass (a low temperature does this; a lower one would make it worse) is
    not the same case as a law spread too thin for any fill to expect 5 draws."""
    top = max(exact.values(), default=0.0)
    if n * top >= MIN_EXPECTED:
        rest = max(1e-12, 1.0 - top)
        need = math.ceil(MIN_EXPECTED / rest)
        return (f"one fill holds {top:.3f} of the exact law and every other fill together expects fewer than "
                f"{MIN_EXPECTED:g} draws at this N: the chi-square needs N >= {need:,} (or a higher temperature)")
    return (f"the exact law is spread thin: no fill has {MIN_EXPECTED:g} or more expected draws at this N: take a "
            "larger N or a lower temperature")


def verdict(fit: Fit, alpha: float = ALPHA) -> str:
    """The one plain sentence a visitor reads (UNTESTABLE when the test has no degrees of freedom)."""
    if fit.dof < 1 and not fit.impossible:
        return UNTESTABLE
    return CONSISTENT if fit.p_value >= alpha else NOT_CONSISTENT


def tv_noise(exact: dict[Fill, float], n: int, draws: int = 200, seed: int = 0) -> float:
    """The median TV (on the test's cells) that an exact sampler shows at this N: the yardstick a
    sampler's own TV is read against (sampling noise alone is never 0)."""
    kept = pooled_cells(exact, n)
    probs = [exact[f] for f in kept]
    rest = max(0.0, 1.0 - sum(probs))
    if rest > 1e-12:
        probs.append(rest)
    if not n or len(probs) < 2:
        return 0.0
    pv = np.array(probs) / sum(probs)
    sims = np.random.default_rng(seed).multinomial(n, pv, size=draws) / n
    return float(np.median(0.5 * np.abs(sims - pv).sum(axis=1)))
