"""A check's draws turned into reports: each sampler's test, its power and its verdict.

- AS-ARM samplers: every distinct drawn fill gets one density call (engine/exactness/contrast.py:
  transforms, the wrong rules' log-ratios, its exact probability), cached across samplers; the
  combined test and the simulated power come from engine/exactness/power.py, the words from
  judgement.py. Spans of at most `enumerate_max` tokens also get the enumerated law (law.py) and
  its chi-square (fit.py) for the table.
- Hybrid samplers: the Proposition 3.1 likelihood of every drawn fill, chi-square, and the
  smallest shift between the two likeliest fills it sees at power 0.8.

Its own module so the run loop (check.py) stays a run loop: this part only reads the counts."""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any

from engine.exactness.contrast import CONTRASTS, FillRecord, fill_record
from engine.exactness.fit import ALPHA, goodness_of_fit, pooled_cells, tv_noise
from engine.exactness.judgement import Judgement, advice, judge
from engine.exactness.law import Fill, asarm_cells, hybrid_prob
from engine.exactness.pit import Intervals, pit_fit
from engine.exactness.power import (
    STATISTIC,
    TARGET_POWER,
    Records,
    chain_fit,
    chi2_min_shift,
    ks_departure,
    n_for_power,
    position_p,
    power,
)
from engine.exactness.result import CheckResult, SamplerReport

ExactnessCheck = Any  # engine.exactness.check.ExactnessCheck, which imports this module
CHAIN_LAW = ("the AS-ARM's chain of conditionals in lattice order (what sequential decoding samples), read "
             "for every drawn fill from one density call")


def _records(chk: ExactnessCheck, counts: Counter) -> Records:
    """A sampler's draws as Records, one density call per distinct fill (cached on the check)."""
    cache: dict[Fill, FillRecord] = chk.__dict__.setdefault("_fill_records", {})
    out: list[FillRecord] = []
    for fill, c in sorted(counts.items()):
        if fill not in cache:
            cache[fill] = fill_record(chk.lm, chk.mi, fill, chk.knobs["temperature"], chk.knobs["k"])
        out += [cache[fill]] * c
    return Records.of(out, len(chk.mi.masked))


def contrast_records(chk: ExactnessCheck) -> dict[str, Records]:
    """Each wrong rule's draws (checked, or the pilot) as Records: what its power is simulated from."""
    return {c: _records(chk, chk.counts[c] if c in chk.counts else chk.pilot_counts.get(c, Counter()))
            for c in CONTRASTS}


def chain_reports(chk: ExactnessCheck, enumerate_max: int) -> CheckResult:
    """Every AS-ARM sampler's combined test, power against each wrong rule, verdict and advice."""
    n, m, temperature = chk.samples, len(chk.mi.masked), chk.knobs["temperature"]
    t0 = time.perf_counter()
    recs = {name: _records(chk, chk.counts[name]) for name in chk.names}
    crecs = contrast_records(chk)
    drawn = sum(chk.done.values()) + sum(sum(c.values()) for c in chk.pilot_counts.values())
    per_draw = (chk.compute_seconds + time.perf_counter() - t0) / max(1, drawn)
    pw = {c: power(r, n, ALPHA, own=c) for c, r in crecs.items()}
    need = {c: n_for_power(crecs[c], TARGET_POWER, ALPHA, 2 * n, 20_000, own=c) for c in CONTRASTS
            if pw[c] < TARGET_POWER}
    help_ = advice(pw, need, per_draw, len(chk.names), m)
    cache: dict[Fill, FillRecord] = chk.__dict__["_fill_records"]
    exact = {f: math.exp(r.log_prob) for f, r in cache.items()}
    enumerated = m <= enumerate_max
    if enumerated:
        exact.update(asarm_cells(chk.lm, chk.mi, 5.0 / n, temperature))
    reports = []
    for i, name in enumerate(chk.names):
        rec = recs[name]
        fit = chain_fit(rec, seed=chk.seed + i)
        pf = pit_fit(Intervals(rec.lo, rec.hi), seed=chk.seed + i)
        per = position_p(rec, seed=chk.seed + i)
        rep = SamplerReport(name=name, counts=dict(chk.counts[name]), calls_per_sample=chk.calls[name] / n,
                            seconds_per_sample=chk.seconds[name] / n)
        if enumerated:
            rep.fit = goodness_of_fit(rep.counts, exact, n)
        said = judge(fit.p_value, pw)
        worst = int(min(range(m), key=lambda j: per[j]))
        rep.judgement = Judgement(
            p_value=fit.p_value, statistic="KS + likelihood ratio (transforms)", verdict=said, power=dict(pw),
            departure=(f"a gap of {ks_departure(fit.observations, ALPHA):.3f} or more between the transforms' "
                       f"distribution and the uniform (over {fit.observations:,} transforms)"),
            worst_position=worst, position_p=per,
            advice=help_ if said != "not consistent with exact sampling at this N" else "",
            detail={"ks_p": fit.ks_p, "ks_distance": fit.ks_distance, "lr_p": fit.lr_p,
                    "mean_transform": pf.mean, "observations": fit.observations})
        reports.append(rep)
    law = CHAIN_LAW + ("; every fill with expected count >= 5 enumerated for the table" if enumerated else
                       f"; a span of {m} tokens is not enumerated: the table lists drawn fills only")
    texts = {f: chk.fill_text(f) for f in sorted(exact, key=lambda f: -exact[f])[:200]}
    res = CheckResult(model=chk.lm.name, kind=chk.kind, source=chk.mi.source, samples=n, seed=chk.seed,
                      params=dict(chk.params), masked_tokens=m, exact=exact if enumerated else _top(exact, 200),
                      texts=texts, samplers=reports, law=law, tv_noise=tv_noise(exact, n) if enumerated else 0.0)
    res.extra.update({"statistic": STATISTIC, "power": dict(pw), "pilot": {c: len(r) for c, r in crecs.items()},
                      "seconds_per_draw": per_draw, "enumerated": enumerated})
    return res


def _top(exact: dict[Fill, float], k: int) -> dict[Fill, float]:
    return dict(sorted(exact.items(), key=lambda kv: -kv[1])[:k])


def hybrid_reports(chk: ExactnessCheck) -> CheckResult:
    """Hybrid samplers: chi-square against the Proposition 3.1 likelihood, with the smallest shift
    between the two likeliest fills that it sees at power 0.8."""
    n = chk.samples
    drawn = set().union(*chk.counts.values())
    exact = {f: hybrid_prob(chk.lm, chk.mi, f, chk.knobs) for f in drawn}
    reports = []
    for name in chk.names:
        rep = SamplerReport(name=name, counts=dict(chk.counts[name]), calls_per_sample=chk.calls[name] / n,
                            seconds_per_sample=chk.seconds[name] / n)
        rep.fit = fit = goodness_of_fit(rep.counts, exact, n)
        cells = [exact[f] for f in pooled_cells(exact, n)]
        rest = 1.0 - sum(cells)
        shift = chi2_min_shift(cells + ([rest] if rest > 1e-12 else []), n, ALPHA)
        untestable = fit.dof < 1 and not fit.impossible
        said = judge(fit.p_value, {}, untestable=untestable)
        rep.judgement = Judgement(
            p_value=fit.p_value, statistic="chi-square (enumerated law)", verdict=said,
            departure=("" if shift is None else f"a shift of {shift:.3f} of probability between the two likeliest "
                       f"fills (power {TARGET_POWER:g})"),
            advice=fit.note, detail={"chi2": fit.statistic if math.isfinite(fit.statistic) else None, "dof": fit.dof})
        reports.append(rep)
    texts = {f: chk.fill_text(f) for f in exact}
    law = ("the self-speculative sampler's likelihood (Proposition 3.1) averaged over decode orders, "
           "for every drawn fill")
    res = CheckResult(model=chk.lm.name, kind=chk.kind, source=chk.mi.source, samples=n, seed=chk.seed,
                      params=dict(chk.params), masked_tokens=len(chk.mi.masked), exact=exact, texts=texts,
                      samplers=reports, law=law, tv_noise=tv_noise(exact, n))
    res.extra.update({"statistic": "chi-square on the enumerated cells (Pearson)"})
    return res


__all__ = ["chain_reports", "contrast_records", "hybrid_reports"]
