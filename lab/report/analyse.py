"""Analysing for the report: the statistics drawn from measured records (means, standard errors,
Welch and Fisher tests, acceptance by position, matched-quality call ratios, log-log slopes).
Nothing here formats text or draws figures; render.py and figures.py do."""

from __future__ import annotations

import math
import statistics
import warnings

from ..bench import mean_se
from ..bench_selfspec import calls_to_reach
from ..metrics import unigram_entropy
from .measure import Record
from .plan import ALPHA


def finite(x) -> bool:
    """A real, finite number (n/a cells and failed fits are NaN or None)."""
    return isinstance(x, (int, float)) and math.isfinite(x)


def welch(a: list[float], b: list[float]) -> float:
    """Welch two-sample t-test p-value (NaN below two values a side; 1 or 0 for constant samples)."""
    from scipy.stats import ttest_ind

    a = [x for x in a if finite(x)]
    b = [x for x in b if finite(x)]
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    if statistics.pvariance(a) == 0 and statistics.pvariance(b) == 0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(ttest_ind(a, b, equal_var=False).pvalue)


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x): how cost grows with the work (1 = linear)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if finite(x) and finite(y) and x > 0 and y > 0]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return float("nan")
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


# ------------------------------------------------------------------ 1. exact samplers


def exact_stats(recs: dict[str, list[Record]], have_judge: bool) -> dict[str, dict]:
    """Per sampler (with records): quality (judge NLL, entropy) and cost (calls, tokens per round
    and call, wall ratios against both baselines), and Welch p-values against sequential.
    `bad` lists what differs at p < ALPHA (None for sequential itself)."""
    seq = recs.get("sequential", [])
    seq_secs = {r.index: r.seconds for r in seq}
    cached_secs = {r.index: r.seconds for r in recs.get("sequential-cache", [])}
    seq_ent = [unigram_entropy(r.generated) for r in seq]
    stats: dict[str, dict] = {}
    for s, rs in recs.items():
        if not rs:
            continue
        nll = [r.judge_nll for r in rs]
        ent = [unigram_entropy(r.generated) for r in rs]
        p_nll = welch(nll, [r.judge_nll for r in seq]) if s != "sequential" and have_judge else float("nan")
        p_ent = welch(ent, seq_ent) if s != "sequential" else float("nan")
        bad = None if s == "sequential" else [
            what for what, pv in (("judge NLL", p_nll), ("entropy", p_ent)) if finite(pv) and pv < ALPHA]
        total = max(1e-12, sum(r.seconds for r in rs))
        stats[s] = {
            "n": len(rs), "nll": mean_se(nll) if have_judge else (float("nan"), float("nan")),
            "ent": mean_se(ent), "calls": mean_se([r.calls for r in rs]),
            "tpr": mean_se([r.masked / r.rounds for r in rs if r.rounds]),
            "tpc": mean_se([r.masked / r.calls for r in rs if r.calls]),
            "ratio": mean_se([seq_secs[r.index] / r.seconds for r in rs if r.index in seq_secs and r.seconds > 0]),
            "ratio_c": mean_se([cached_secs[r.index] / r.seconds for r in rs
                                if r.index in cached_secs and r.seconds > 0]),
            "ratio_c_total": sum(cached_secs.get(r.index, 0.0) for r in rs) / total,
            "ratio_total": sum(seq_secs.get(r.index, 0.0) for r in rs) / total,
            "p_nll": p_nll, "p_ent": p_ent, "bad": bad,
        }
    return stats


# ------------------------------------------------------------------ 2. acceptance


def acceptance_rates(rs: list[Record]) -> tuple[list[dict], int]:
    """Tested drafts grouped by position in the round: measured share accepted (± binomial SE),
    predicted rate (mean of min(1, q/p) ± SE) and z; plus the drafts accepted untested."""
    by: dict[int, list[tuple[bool, float]]] = {}
    for r in rs:
        for pos, acc, a in r.events:
            by.setdefault(pos, []).append((acc, a))
    out = []
    for pos in sorted(by):
        ev = by[pos]
        n = len(ev)
        m = sum(acc for acc, _ in ev) / n
        mse = math.sqrt(m * (1 - m) / n)
        pm, pse = mean_se([a for _, a in ev])
        out.append({"pos": pos, "n": n, "m": m, "mse": mse, "pm": pm, "pse": pse,
                    "z": (m - pm) / mse if mse > 0 else float("nan")})
    return out, sum(r.untested for r in rs)


# ------------------------------------------------------------------ 3. self-spec against MDM


def self_spec_analysis(rows: list[dict]) -> dict:
    """From run_bench rows: every (sampler, setting) with its calls and qualities, the metric to
    match on (judge NLL first, then spelling, then entropy), and for each self-speculative setting
    the MDM calls at matched quality over its own calls (kind: exact, upper or lower bound)."""
    metrics = list(dict.fromkeys(r["quality_metric"] for r in rows))
    settings: dict[tuple[str, str], dict] = {}
    for r in rows:
        d = settings.setdefault((r["sampler"], r["setting"]), {"calls": r["calls_best_mean"],
                                                               "raw": r["calls_mean"], "entropy": r["entropy"]})
        d[r["quality_metric"]] = r["quality"]
    primary = next((m for m in metrics if m.startswith("judge_nll")), None) or \
        next((m for m in metrics if m == "spelling_accuracy"), None) or (metrics[0] if metrics else "entropy")
    lower_better = primary.startswith("judge_nll")
    mdm = sorted(((d["calls"], d.get(primary, float("nan"))) for (s, _), d in settings.items() if s == "mdm"),
                 key=lambda t: t[0])
    ratios: dict[tuple[str, str], tuple[float, str] | None] = {}
    for (s, setting), d in settings.items():
        if s == "self-spec":
            matched, kind = calls_to_reach(mdm, d.get(primary, float("nan")), lower_better)
            ratios[(s, setting)] = (matched / d["calls"], kind) if matched is not None and d["calls"] > 0 else None
    return {"metrics": metrics, "settings": settings, "primary": primary, "lower_better": lower_better,
            "ratios": ratios}


# ------------------------------------------------------------------ 4. HumanEval


def fisher_p(a: tuple[int, int], b: tuple[int, int]) -> float:
    """Fisher exact test p-value of two (passed, tasks) counts."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]])[1])


# ------------------------------------------------------------------ 5. scaling


def scaling_curve(sweep: dict, keys: list[tuple[int, float]], label: str) -> dict:
    """One sampler's costs along one sweep: mean ± SE per point (None where it did not run), the
    means it was fitted on and the log-log slopes of calls, seconds and seconds per call."""
    cells, mx, cm, sm = [], [], [], []
    for k in keys:
        d = sweep.get(k, {}).get(label)
        if not d:
            cells.append(None)
            continue
        c, s = mean_se(d["calls"]), mean_se(d["seconds"])
        cells.append((c, s))
        mx.append(statistics.fmean(d["masked"]))
        cm.append(c[0])
        sm.append(s[0])
    return {"cells": cells, "calls": cm, "seconds": sm, "slope_calls": loglog_slope(mx, cm),
            "slope_seconds": loglog_slope(mx, sm),
            "slope_sec_per_call": loglog_slope(mx, [s / c if c else float("nan") for s, c in zip(sm, cm)]),
            "last": (mx[-1], cm[-1], sm[-1]) if mx else None}
