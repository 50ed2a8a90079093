"""Rendering for the report: numbers to markdown (cells, tables, the sentences written from
measured values) and figures to files (PNG through kaleido, HTML where that fails).
Every sentence with a number in it is written here from what analyse.py computed."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from .analyse import finite
from .plan import ALPHA, log

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def fmt(x, nd: int = 2) -> str:
    """A number with nd decimals, or n/a."""
    return f"{x:.{nd}f}" if finite(x) else "n/a"


def fmt_se(m, se, nd: int = 2) -> str:
    """A mean ± standard error cell."""
    if not finite(m):
        return "n/a"
    return f"{m:.{nd}f} ± {se:.{nd}f}" if finite(se) else f"{m:.{nd}f} ± n/a"


def fmt_p(p) -> str:
    """A p-value: scientific below 1e-3."""
    if not finite(p):
        return "n/a"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table, as lines, followed by a blank line."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def growth_words(b: float) -> str:
    """A fitted log-log slope in words: flat, linear, or ~n^b."""
    if not finite(b):
        return "not fitted"
    if abs(b) < 0.15:
        return f"flat (slope {b:.2f})"
    if 0.85 <= b <= 1.15:
        return f"linear (slope {b:.2f})"
    return f"~n^{b:.2f}" + (" (sublinear)" if b < 0.85 else " (superlinear)")


def caption(infos, seeds: str, machine: str, date: str) -> str:
    """The line under every table naming its models (with weight hashes), seeds, machine and date."""
    ms = ", ".join(f"{m.name} (sha256 {m.sha256[:12]})" for m in infos if m is not None)
    return f"_Models: {ms}; {seeds}; machine: {machine}; date {date}._"


# ------------------------------------------------------------------ 1. exact samplers


EXACT_HEADERS = ["sampler", "inputs", "judge NLL", "entropy (bits)", "calls", "tokens/round", "tokens/call",
                 "wall ratio vs cached sequential", "wall ratio vs uncached sequential", "p (judge NLL)",
                 "p (entropy)", "flag"]


def exact_table(domain: str, stats: dict[str, dict], have_judge: bool) -> tuple[list[str], list[str]]:
    """The exact-sampler table, the verdict on exactness and the pipelined line; (lines, headlines)."""
    rows, flagged = [], []
    for s, st in stats.items():
        bad = st["bad"]
        flag = "" if bad is None else (f"**differs ({', '.join(bad)})**" if bad else "ok")
        if bad:
            flagged.append(f"{s} ({', '.join(bad)})")
        rows.append([s, str(st["n"]), fmt_se(*st["nll"], 3) if have_judge else "n/a", fmt_se(*st["ent"], 3),
                     fmt_se(*st["calls"], 1), fmt_se(*st["tpr"]), fmt_se(*st["tpc"]), fmt_se(*st["ratio_c"]),
                     fmt_se(*st["ratio"]), fmt_p(st["p_nll"]), fmt_p(st["p_ent"]), flag])
    out = md_table(EXACT_HEADERS, rows)
    tested = [s for s in stats if s != "sequential"]
    n_seq = stats["sequential"]["n"] if "sequential" in stats else 0
    if flagged:
        out.append(f"**Flagged:** {'; '.join(flagged)} differ from sequential at p < {ALPHA} "
                   f"({len(tested)} samplers tested). Exact samplers should not: this is a bug to investigate.")
    elif tested and n_seq >= 2:
        out.append(f"No exact sampler differs from sequential in judge NLL or entropy at p < {ALPHA} "
                   f"({len(tested)} samplers, {n_seq} inputs each).")
    elif tested:
        out.append("Too few inputs for a two-sample test (need at least 2 per sampler).")
    out.append("")
    headlines = []
    pip = stats.get("assd-pipelined")
    if pip:
        line = (f"{domain}: pipelined ASSD {pip['tpc'][0]:.2f} ± {pip['tpc'][1]:.2f} tokens per call, wall-clock "
                f"{pip['ratio_c'][0]:.2f} ± {pip['ratio_c'][1]:.2f}x cached sequential per input "
                f"({pip['ratio_c_total']:.2f}x on total seconds; {pip['ratio'][0]:.2f} ± {pip['ratio'][1]:.2f}x "
                "uncached sequential)")
        out += [line + ".", ""]
        headlines.append(line)
    headlines.append(f"{domain}: exact samplers flagged against sequential at p < {ALPHA}: "
                     + ("; ".join(flagged) if flagged else "none") + f" ({n_seq} inputs)")
    return out, headlines


# ------------------------------------------------------------------ 2. acceptance


def acceptance_rows(sampler: str, rates: list[dict], untested: int) -> list[list[str]]:
    """Table rows of one sampler's acceptance by position (untested count on its first row)."""
    if not rates:
        return [[sampler, "-", "0", "n/a", "n/a", "n/a", str(untested)]]
    return [[sampler, str(r["pos"]), str(r["n"]), fmt_se(r["m"], r["mse"], 3), fmt_se(r["pm"], r["pse"], 3),
             fmt(r["z"], 2), str(untested) if i == 0 else ""] for i, r in enumerate(rates)]


def acceptance_overall(events: list[tuple[int, bool, float]]) -> list[str]:
    """ASSD's acceptance over all positions against its proposal/target prediction."""
    if not events:
        return []
    m = sum(a for _, a, _ in events) / len(events)
    pm = statistics.fmean(x for _, _, x in events)
    return [f"Over all positions, ASSD accepted {m:.3f} of {len(events)} tested drafts; "
            f"the proposal/target prediction is {pm:.3f}.", ""]


# ------------------------------------------------------------------ 3. self-spec against MDM


def self_spec_table(an: dict) -> tuple[list[str], list[tuple[float, str, str]]]:
    """Table of every setting with the matched-quality ratio; also the ratios as (ratio, kind, setting)."""
    shown = [m for m in an["metrics"] if m != "entropy"]  # entropy has its own column
    table, ratios = [], []
    for (s, setting), d in an["settings"].items():
        ratio_txt = ""
        if s == "self-spec":
            got = an["ratios"][(s, setting)]
            ratio_txt = "n/a"
            if got is not None:
                r, kind = got
                ratio_txt = {"exact": f"{r:.2f}", "upper": f"≤ {r:.2f}", "lower": f"≥ {r:.2f}"}[kind]
                ratios.append((r, kind, setting))
        table.append([s, setting, fmt(d["calls"], 2), fmt(d["raw"], 2)]
                     + [fmt(d.get(m, float("nan")), 3) for m in shown] + [fmt(d["entropy"], 3), ratio_txt])
    return md_table(["sampler", "setting", "calls (best case)", "calls (raw)", *shown, "entropy (bits)",
                     "MDM/self-spec calls at matched quality"], table), ratios


def self_spec_sentences(domain: str, an: dict, ratios: list[tuple[float, str, str]]) -> tuple[list[str], str]:
    """Which metric was matched and the best ratio; (lines, headline or "")."""
    primary = an["primary"]
    out = [f"Quality metric matched: `{primary}` ({'lower' if an['lower_better'] else 'higher'} is better)."]
    if not any(m.startswith("judge_nll") for m in an["metrics"]):
        out.append("No judge NLL rows came back from run_bench for this domain, so the match uses "
                   f"`{primary}`.")
    if not ratios:
        return out, ""
    best = max(ratios, key=lambda t: t[0])
    exact = [t for t in ratios if t[1] == "exact"]
    line = (f"{domain}: self-speculative calls ratio at matched {primary}: best "
            f"{'≤ ' if best[1] == 'upper' else '≥ ' if best[1] == 'lower' else ''}{best[0]:.2f}x "
            f"({best[2]})")
    if exact:
        line += "; interpolated ratios " + ", ".join(f"{t[0]:.2f}x ({t[2]})" for t in exact)
    out.append(line + ".")
    return out, line


# ------------------------------------------------------------------ 5. scaling


def scaling_tables(title: str, heads: list[str], masked_row: list[str],
                   curves: dict[str, dict]) -> list[str]:
    """Calls and seconds per input at every point of one sweep, with the fitted slopes."""
    calls_rows, sec_rows = [], []
    for lab, cur in curves.items():
        cr = [fmt_se(*c[0], 1) if c else "n/a" for c in cur["cells"]]
        sr = [fmt_se(*c[1], 3) if c else "n/a" for c in cur["cells"]]
        calls_rows.append([lab] + cr + [fmt(cur["slope_calls"], 2)])
        sec_rows.append([lab] + sr + [fmt(cur["slope_seconds"], 2)])
    out = [f"Calls per input against {title}:", ""]
    out += md_table(["sampler"] + heads + ["slope"], [masked_row + [""]] + calls_rows)
    out += [f"Seconds per input against {title}:", ""]
    return out + md_table(["sampler"] + heads + ["slope"], sec_rows)


def scaling_sentences(slopes: dict[str, dict[str, float]]) -> list[str]:
    """How calls and wall time grow with the masked tokens, and what caching changes."""
    if not slopes:
        return []
    lines = ["Growth with the number of masked tokens n (length sweep): " + "; ".join(
        f"{lab}: calls {growth_words(d.get('L_calls', float('nan')))}, wall time "
        f"{growth_words(d.get('L_seconds', float('nan')))}" for lab, d in slopes.items()) + "."]
    linear = [lab for lab, d in slopes.items() if finite(d.get("L_calls")) and 0.85 <= d["L_calls"] <= 1.15]
    if linear:
        lines.append(f"Calls grow linearly with the work for: {', '.join(linear)}.")
    a, c = slopes.get("assd"), slopes.get("assd-cache")
    if a and c and finite(a.get("L_seconds")) and finite(c.get("L_seconds")):
        lines.append(_caching_sentence(a, c))
    return lines + [""]


def _caching_sentence(a: dict, c: dict) -> str:
    la, lc = a.get("L_last"), c.get("L_last")
    same_calls = la and lc and abs(la[1] - lc[1]) <= 0.01 * max(la[1], 1e-9)
    s = (f"Caching (assd-cache against assd, same samples): the wall-time slope is {c['L_seconds']:.2f} "
         f"with the cache and {a['L_seconds']:.2f} without; seconds per call grow with slope "
         f"{fmt(c.get('L_sec_per_call'))} with it and {fmt(a.get('L_sec_per_call'))} without")
    if la and lc:
        s += (f"; at {la[0]:.0f} masked tokens assd takes {la[2]:.3f} s and assd-cache {lc[2]:.3f} s per input "
              f"({la[2] / lc[2]:.2f}x)" if lc[2] > 0 else "")
    return s + ". " + ("Calls are identical with and without the cache: it changes the cost per call, not the "
                       "number of calls." if same_calls else "Calls differ between the two runs.")


# ------------------------------------------------------------------ figures to files


def export_figures(figs: dict[str, object], fig_dir: Path) -> tuple[dict[str, Path], str]:
    """PNG through kaleido (system Chromium); HTML where that fails. Returns paths and how."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    if not figs:
        return {}, "no figures"
    if not os.environ.get("BROWSER_PATH") and Path("/usr/bin/chromium").exists():
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"
    names = list(figs)
    paths = {n: fig_dir / f"{n}.png" for n in names}
    err = ""
    try:
        import plotly.io as pio

        pio.write_images([figs[n] for n in names], [str(paths[n]) for n in names],
                         width=[figs[n].layout.width or 1000 for n in names],
                         height=[figs[n].layout.height or 560 for n in names])
        if all(paths[n].is_file() and paths[n].stat().st_size > 0 for n in names):
            return paths, "PNG via plotly + kaleido (system Chromium)"
        err = "kaleido wrote no file"
    except Exception as e:  # noqa: BLE001
        err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    log(f"static figure export failed ({err}); writing HTML instead")
    out = {}
    for n in names:
        p = fig_dir / f"{n}.html"
        figs[n].write_html(str(p), include_plotlyjs=True)
        out[n] = p
    return out, f"HTML (static PNG export failed: {err})"
