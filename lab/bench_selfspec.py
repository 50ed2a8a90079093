"""`python -m engine bench self-spec`: quality against network calls for the masked diffusion
baseline (several T) and the self-speculative sampler (several dtau and N), on the same
95%-masked windows of the test split and the same seeds.

Calls are in units of one full pass of the hybrid (docs/DESIGN.md §4): an MDM step or a non-causal pass
costs nc_blocks / all_blocks, a causal pass causal_blocks / all_blocks. `calls_best_mean` is the
best case (an MDM step that revealed nothing is free); for self-spec it equals `calls_mean`.
Quality: spelling accuracy for text (share of generated words found in the training split's
vocabulary), judge NLL where a judge model and `lab.evaluate.judge_nll` exist, unigram entropy
(bits) of the generated tokens always (a collapse to repeated tokens shows up as low entropy).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path

from engine.cli import add_device_arg, apply_device_args
from engine.inputs.domains import DOMAINS
from engine.loading.loaded_model import LoadedModel
from engine.loading.registry import available, default_model, load

from .metrics import WORD, judge_nll_tokens, spelling_accuracy, train_words, unigram_entropy
from .progress import add_quiet_arg, set_quiet
from .runs import drain
from .shard import is_main, shard_map, world
from .workloads import bench_inputs

MDM_STEPS = [8, 16, 32, 64, 128]
SELF_SPEC = [(0.2, 1), (0.1, 1), (0.05, 1), (0.1, 2), (0.05, 2), (0.02, 2)]


def _judge(domain: str):
    """(name, fn(token sequences) -> mean NLL per token) when the domain has a judge, else None."""
    judges = [r["name"] for r in available() if r["kind"] == "judge" and r["domain"] == domain]
    if not judges:
        return None
    return judges[0], lambda seqs: judge_nll_tokens(seqs, model=judges[0])


def _spelled(text: str, vocab: frozenset[str], whole_window: bool) -> tuple[int, int]:
    """(words found in the training vocabulary, words) of one input. Character level scores the
    completed window (the mask cuts through words, so a span alone holds word fragments) without
    its first and last word, which the window's edges may cut."""
    words = [w.lower() for w in WORD.findall(text)]
    if whole_window:
        words = words[1:-1]
    return sum(w in vocab for w in words), len(words)


def calls_to_reach(curve: list[tuple[float, float]], target: float, lower_better: bool = False
                   ) -> tuple[float | None, str]:
    """Fewest calls at which a piecewise-linear quality-against-calls curve (sorted by calls)
    reaches `target`, as (calls, how): (c, "exact") interpolated; (c0, "upper") reached already at
    the cheapest point; (c_max, "lower") never reached (a ratio built on it is a lower bound)."""
    pts = [(c, q) for c, q in curve if math.isfinite(c) and math.isfinite(q)]
    if not pts or not math.isfinite(target):
        return None, ""

    def good(q: float) -> bool:
        return q <= target if lower_better else q >= target

    if good(pts[0][1]):
        return pts[0][0], "upper"
    for (c0, q0), (c1, q1) in zip(pts, pts[1:]):
        if good(q1):
            t = (target - q0) / (q1 - q0) if q1 != q0 else 1.0
            return c0 + t * (c1 - c0), "exact"
    return pts[-1][0], "lower"


def _curve(rows: list[dict], sampler: str, idx: list[int]) -> list[tuple[float, float]]:
    """(mean best-case calls, pooled spelling accuracy) per setting over the inputs `idx`."""
    pts = []
    for r in rows:
        if r["sampler"] == sampler and "per_input" in r:
            pi = r["per_input"]
            words = sum(pi["spelled"][i][1] for i in idx)
            pts.append((statistics.fmean(pi["calls_best"][i] for i in idx),
                        sum(pi["spelled"][i][0] for i in idx) / words if words else float("nan")))
    return sorted(pts)


def self_spec_at_mdm_best(rows: list[dict], n_inputs: int, boot: int = 1000, seed: int = 0) -> dict | None:
    """The issue's number: self-speculative calls needed to reach MDM's best spelling accuracy,
    over MDM's calls there (below 1: self-spec is cheaper), with a bootstrap over inputs."""
    def ratio(idx: list[int]) -> tuple[float | None, str, float, float]:
        mdm, ss = _curve(rows, "mdm", idx), _curve(rows, "self-spec", idx)
        if not mdm or not ss:
            return None, "", float("nan"), float("nan")
        c_mdm, q_best = max(mdm, key=lambda p: (p[1], -p[0]))
        c_ss, how = calls_to_reach(ss, q_best)
        return (c_ss / c_mdm if c_ss is not None else None), how, q_best, c_mdm

    r, how, q_best, c_mdm = ratio(list(range(n_inputs)))
    if r is None:
        return None
    rng = random.Random(seed)
    draws = [ratio([rng.randrange(n_inputs) for _ in range(n_inputs)]) for _ in range(boot)]
    # a resample in which self-spec never reaches MDM's best has no finite ratio: it counts as infinite
    vals = sorted(math.inf if d[1] == "lower" else d[0] for d in draws if d[0] is not None)
    return {"mdm_best_quality": q_best, "mdm_calls_at_best": c_mdm, "ratio": r, "how": how,
            "ratio_ci95": [_finite_or_none(vals[int(0.025 * len(vals))]),
                           _finite_or_none(vals[int(0.975 * len(vals)) - 1])] if vals else None,
            "never_reached_share": sum(d[1] == "lower" for d in draws) / boot, "bootstrap": boot}


def _bound(x: float | None) -> str:
    return "unbounded" if x is None else f"{x:.2f}x"


def _finite_or_none(x: float) -> float | None:
    """JSON has no infinity: an unbounded interval end is null ("unbounded" when printed)."""
    return x if math.isfinite(x) else None


def _run_settings(lm: LoadedModel, mi, settings: list[tuple[str, str, dict]], seed: int, domain: str,
                  vocab: frozenset[str] | None) -> list[dict]:
    """Every setting on one input (seed for all): what the rows are computed from."""
    out = []
    for sampler, _, kw in settings:
        res = drain(lm, mi, sampler, seed, **kw).result
        text = " ".join(s.text for s in res.spans)
        gen = [res.tokens[p] for p in mi.masked]
        out.append({"calls": res.calls, "best": res.counts["calls_best"], "text": text,
                    "spelled": (_spelled(res.text if domain == "chars" else text, vocab, domain == "chars")
                                if vocab is not None else None),
                    "seq": res.tokens,  # the whole completed window, as section 1 of the report scores it
                    "toks": len(gen), "entropy": unigram_entropy(gen)})
    return out


def _rows(settings: list[tuple[str, str, dict]], measured: list[list[dict]], domain: str,
          vocab: frozenset[str] | None, judge) -> list[dict]:
    """The rows of `bench self-spec` (one a setting and quality metric) over the given inputs'
    measurements: all of them for the summary, one for a per-input row."""
    rows = []
    for j, (sampler, setting, _) in enumerate(settings):
        ms = [m[j] for m in measured]
        calls, best = [m["calls"] for m in ms], [m["best"] for m in ms]
        row = {"sampler": sampler, "setting": setting, "calls_mean": statistics.fmean(calls),
               "calls_best_mean": statistics.fmean(best),
               "entropy": statistics.fmean(m["entropy"] for m in ms), "tokens_mean": sum(m["toks"] for m in ms) / len(ms)}
        if vocab is not None:
            spelled = [m["spelled"] for m in ms]
            hits, words = sum(h for h, _ in spelled), sum(n for _, n in spelled)
            quality = spelling_accuracy([m["text"] for m in ms], vocab) if domain != "chars" else hits / max(words, 1)
            rows.append({**row, "quality": quality, "quality_metric": "spelling_accuracy",
                         "per_input": {"calls_best": best, "spelled": spelled}})
        if judge is not None:
            rows.append({**row, "quality": judge[1]([m["seq"] for m in ms]), "quality_metric": f"judge_nll:{judge[0]}"})
        if vocab is None and judge is None:
            rows.append({**row, "quality": row["entropy"], "quality_metric": "entropy"})
    return rows


def run_bench(model: str, samples: int, length: int, mask_rate: float = 0.95, seed: int = 0,
              mdm_steps: list[int] | None = None, self_spec: list[tuple[float, int]] | None = None,
              window: str = "cosine", progress=None, inputs_file: str | None = None) -> dict:
    """MDM at several step counts against self-spec at several (dtau, inner) settings on the same
    masked windows (or the inputs of `inputs_file`) and seeds: calls (raw and best case) and
    quality per setting. Input i runs every setting with seed + i, in whichever process
    (lab.shard) takes it. From a file: also every row per input and the lines left out."""
    lm = load(model)
    inputs, src = bench_inputs(lm, inputs_file, length, mask_rate, samples, seed)
    settings = [("mdm", f"T={t}", {"steps": t}) for t in (mdm_steps or MDM_STEPS)]
    settings += [("self-spec", f"dtau={d:g},N={n}", {"dtau": d, "inner": n, "window": window})
                 for d, n in (self_spec or SELF_SPEC)]
    vocab = train_words(lm.domain) if lm.domain in ("text", "chars") else None
    judge = _judge(lm.domain)
    measured = shard_map(lambda i, mi: _run_settings(lm, mi, settings, seed + i, lm.domain, vocab), inputs,
                         desc=f"bench self-spec {lm.name}: {len(settings)} settings per input")
    rows = _rows(settings, measured, lm.domain, vocab, judge)
    if progress:
        for r in rows:
            progress(r)
    out = {"model": model, "samples": len(inputs), "length": length, "mask_rate": mask_rate, "rows": rows,
           "processes": world()[1]}
    if vocab is not None:
        out["self_spec_at_mdm_best"] = self_spec_at_mdm_best(rows, len(inputs))
    if src is not None:
        out.update(inputs=str(inputs_file), length=None, mask_rate=None, skipped=src.errors, per_input=[
            {"line": n, "masked_tokens": len(mi.masked),
             "rows": [{k: v for k, v in r.items() if k != "per_input"}
                      for r in _rows(settings, [m], lm.domain, vocab, judge)]}
            for n, mi, m in zip(src.lines, inputs, measured, strict=True)])
    return out


def write_html(result: dict, path: Path) -> Path:
    """Quality against calls for every setting, as an interactive HTML figure."""
    import plotly.graph_objects as go

    fig = go.Figure()
    metric = result["rows"][0]["quality_metric"] if result["rows"] else ""
    for sampler in dict.fromkeys(r["sampler"] for r in result["rows"]):
        rs = sorted((r for r in result["rows"] if r["sampler"] == sampler and r["quality_metric"] == metric),
                    key=lambda r: r["calls_best_mean"])
        fig.add_trace(go.Scatter(x=[r["calls_best_mean"] for r in rs], y=[r["quality"] for r in rs],
                                 mode="lines+markers+text", name=sampler, text=[r["setting"] for r in rs],
                                 textposition="top center"))
    what = (f"{result['samples']} inputs from {result['inputs']}" if result.get("inputs") else
            f"{result['samples']} inputs of {result['length']} tokens, {result['mask_rate']:.0%} masked")
    fig.update_layout(title=f"{result['model']}: {metric} vs network calls ({what})",
                      xaxis_title="network calls (full-pass units, best case)", yaxis_title=metric, xaxis_type="log")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(path), include_plotlyjs=True)
    return path


def run(argv: list[str]) -> int:
    """`python -m engine bench self-spec`: the command line of the self-spec against MDM benchmark."""
    ap = argparse.ArgumentParser(prog="python -m engine bench self-spec")
    ap.add_argument("--model", default=None, help="hybrid model (default: <domain>-hybrid)")
    ap.add_argument("--domain", default="text", choices=list(DOMAINS),
                    help="chars: the text8-style character-level experiment (assets/models/chars-hybrid)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--length", type=int, default=128, help="tokens per input window")
    ap.add_argument("--mask-rate", type=float, default=0.95)
    ap.add_argument("--inputs", default=None, metavar="FILE.jsonl",
                    help='your own inputs, one JSON object a line: {"text": "... [MASK:4] ..."} or '
                         '{"text": "...", "mask_rate": 0.5} (instead of --length/--mask-rate/--samples windows)')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", default="cosine", choices=["cosine", "linear"])
    ap.add_argument("--mdm-steps", default=",".join(map(str, MDM_STEPS)), help="MDM step counts T, comma-separated")
    ap.add_argument("--self-spec", default=";".join(f"{d:g},{n}" for d, n in SELF_SPEC),
                    help="self-speculative settings 'dtau,N' separated by ';'")
    ap.add_argument("--html", default="runs/bench-self-spec.html")
    ap.add_argument("--json", action="store_true")
    add_device_arg(ap)
    add_quiet_arg(ap)
    a = ap.parse_args(argv)
    set_quiet(a.quiet)
    is_main()  # several processes (torchrun / accelerate launch): join them now, one GPU each
    apply_device_args(a)
    model = a.model or default_model(a.domain, "hybrid")
    if a.samples < 1 or a.length < 8 or not 0 < a.mask_rate <= 1:
        ap.error("--samples must be at least 1, --length at least 8, --mask-rate in (0, 1]")
    try:
        steps = [int(t) for t in a.mdm_steps.split(",") if t.strip()]
        spec = [(float(d), int(n)) for d, n in (x.split(",") for x in a.self_spec.split(";") if x.strip())]
    except ValueError:
        ap.error("--mdm-steps takes integers like 8,32,128; --self-spec takes 'dtau,N' pairs like 0.1,1;0.05,2")
    result = run_bench(model, a.samples, a.length, a.mask_rate, a.seed, mdm_steps=steps, self_spec=spec,
                       window=a.window, inputs_file=a.inputs)
    if not is_main():
        return 0  # the main process prints and writes what every process measured
    html = write_html(result, Path(a.html))
    result["html"] = str(html)
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{'sampler':<10} {'setting':<14} {'calls':>8} {'best':>8} {'quality':>8} {'metric':<18} {'entropy':>7}")
        for r in result["rows"]:
            print(f"{r['sampler']:<10} {r['setting']:<14} {r['calls_mean']:8.2f} {r['calls_best_mean']:8.2f} "
                  f"{r['quality']:8.3f} "
                  f"{r['quality_metric']:<18} {r['entropy']:7.2f}")
        for one in result.get("per_input", []):
            cells = "  ".join(f"{r['setting']} {r['calls_mean']:.1f} calls {r['quality_metric'].split(':')[0]} "
                              f"{r['quality']:.3f}" for r in one["rows"])
            print(f"line {one['line']} ({one['masked_tokens']} masked): {cells}")
        m = result.get("self_spec_at_mdm_best")
        if m:
            ci = m["ratio_ci95"]
            print(f"self-spec calls at MDM's best spelling accuracy ({m['mdm_best_quality']:.3f}, "
                  f"{m['mdm_calls_at_best']:.1f} calls): {m['ratio']:.2f}x MDM's ({m['how']}; bootstrap 95% "
                  f"{_bound(ci[0])}-{_bound(ci[1])}; never reached in {m['never_reached_share']:.0%} of resamples)"
                  if ci else f"self-spec calls at MDM's best: {m['ratio']:.2f}x ({m['how']})")
        print(f"plot: {html}")
    return 0


cli = run
