"""`python -m engine bench self-spec`: quality against network calls for the masked diffusion
baseline (several T) and the self-speculative sampler (several dtau and N), on the same
95%-masked windows of the test split and the same seeds.

Calls are in units of one full pass of the hybrid (docs/DESIGN.md §4): an MDM step or a non-causal pass
costs nc_blocks / all_blocks, a causal pass causal_blocks / all_blocks. `calls_best_mean` is the
best case (an MDM step that revealed nothing is free); for self-spec it equals `calls_mean`.
Quality: spelling accuracy for text (share of generated words found in the training split's
vocabulary), judge NLL where a judge model and `engine.lab.evaluate.judge_nll` exist, unigram entropy
(bits) of the generated tokens always (a collapse to repeated tokens shows up as low entropy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from ..api import InfillRun
from ..cli import add_device_arg
from ..device import apply_device_flag
from ..registry import available, default_model, load
from .metrics import judge_nll_tokens, spelling_accuracy, train_words, unigram_entropy
from .workloads import masked_windows

MDM_STEPS = [8, 16, 32, 64, 128]
SELF_SPEC = [(0.2, 1), (0.1, 1), (0.05, 1), (0.1, 2), (0.05, 2), (0.02, 2)]


def _judge(domain: str):
    """(name, fn(token sequences) -> mean NLL per token) when the domain has a judge, else None."""
    judges = [r["name"] for r in available() if r["kind"] == "judge" and r["domain"] == domain]
    if not judges:
        return None
    return judges[0], lambda seqs: judge_nll_tokens(seqs, model=judges[0])


def run_bench(model: str, samples: int, length: int, mask_rate: float = 0.95, seed: int = 0,
              mdm_steps: list[int] | None = None, self_spec: list[tuple[float, int]] | None = None,
              window: str = "cosine", progress=None) -> dict:
    """MDM at several step counts against self-spec at several (dtau, inner) settings on the same
    masked windows and seeds: calls (raw and best case) and quality per setting."""
    lm = load(model)
    inputs = masked_windows(lm.domain, lm.codec, length, mask_rate, samples, seed=seed, max_tokens=lm.max_tokens)
    settings = [("mdm", f"T={t}", {"steps": t}) for t in (mdm_steps or MDM_STEPS)]
    settings += [("self-spec", f"dtau={d:g},N={n}", {"dtau": d, "inner": n, "window": window})
                 for d, n in (self_spec or SELF_SPEC)]
    vocab = train_words(lm.domain) if lm.domain == "text" else None
    judge = _judge(lm.domain)
    rows = []
    for sampler, setting, kw in settings:
        calls, best, texts, seqs, ents, toks = [], [], [], [], [], 0
        for i, mi in enumerate(inputs):
            run = InfillRun(masked_input=mi, model=model, sampler=sampler, seed=seed + i, **kw)
            for _ in run.stream():
                pass
            res = run.result(with_log_prob=False)
            calls.append(res.calls)
            best.append(res.counts["calls_best"])
            texts.append(" ".join(s.text for s in res.spans))
            seqs.append(res.tokens)  # the whole completed window, as section 1 of the report scores it
            gen = [res.tokens[p] for p in mi.masked]
            toks += len(gen)
            ents.append(unigram_entropy(gen))
        row = {"sampler": sampler, "setting": setting, "calls_mean": statistics.fmean(calls),
               "calls_best_mean": statistics.fmean(best),
               "entropy": statistics.fmean(ents), "tokens_mean": toks / len(inputs)}
        if vocab is not None:
            rows.append({**row, "quality": spelling_accuracy(texts, vocab), "quality_metric": "spelling_accuracy"})
        if judge is not None:
            rows.append({**row, "quality": judge[1](seqs), "quality_metric": f"judge_nll:{judge[0]}"})
        if vocab is None and judge is None:
            rows.append({**row, "quality": row["entropy"], "quality_metric": "entropy"})
        if progress:
            progress(rows[-1])
    return {"model": model, "samples": len(inputs), "length": length, "mask_rate": mask_rate, "rows": rows}


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
    fig.update_layout(title=f"{result['model']}: {metric} vs network calls ({result['samples']} inputs of "
                            f"{result['length']} tokens, {result['mask_rate']:.0%} masked)",
                      xaxis_title="network calls (full-pass units, best case)", yaxis_title=metric, xaxis_type="log")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(str(path), include_plotlyjs=True)
    return path


def run(argv: list[str]) -> int:
    """`python -m engine bench self-spec`: the command line of the self-spec against MDM benchmark."""
    ap = argparse.ArgumentParser(prog="python -m engine bench self-spec")
    ap.add_argument("--model", default=None, help="hybrid model (default: <domain>-hybrid)")
    ap.add_argument("--domain", default="text", choices=["text", "code", "protein"])
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--length", type=int, default=128, help="tokens per input window")
    ap.add_argument("--mask-rate", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", default="cosine", choices=["cosine", "linear"])
    ap.add_argument("--html", default="runs/bench-self-spec.html")
    ap.add_argument("--json", action="store_true")
    add_device_arg(ap)
    a = ap.parse_args(argv)
    apply_device_flag(a.device)
    model = a.model or default_model(a.domain, "hybrid")
    def show(r: dict) -> None:  # progress on stderr, so --json stays clean
        print(f"  {r['sampler']:<9} {r['setting']:<14} calls {r['calls_mean']:7.2f} (best {r['calls_best_mean']:.2f})  "
              f"{r['quality_metric']} {r['quality']:.3f}  entropy {r['entropy']:.2f}", file=sys.stderr, flush=True)

    result = run_bench(model, a.samples, a.length, a.mask_rate, a.seed, window=a.window, progress=show)
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
        print(f"plot: {html}")
    return 0


cli = run
