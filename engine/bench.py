"""`python -m engine bench assd|self-spec|fills`: samplers side by side on the same inputs and seeds.

Timings are only ever compared within one run (ratios), never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import torch

from .api import InfillRun
from .cli import add_device_arg
from .device import apply_device_flag
from .registry import default_model, load
from .workloads import masked_windows

ASSD_SAMPLERS = ["sequential", "assd", "assd-cache", "assd-pipelined", "assd-ngram"]


def mean_se(xs: list[float]) -> tuple[float, float]:
    if not xs:
        return float("nan"), float("nan")
    m = statistics.fmean(xs)
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
    return m, se


def run_assd_bench(model: str, length: int, mask_rate: float, k: int, samples: int, samplers: list[str],
                   seed: int = 0, temperature: float = 1.0) -> dict:
    lm = load(model)
    inputs = masked_windows(lm.domain, lm.codec, length, mask_rate, samples, seed=seed,
                            max_tokens=lm.max_tokens)
    per: dict[str, dict[str, list[float]]] = {s: {"calls": [], "rounds": [], "tokens": [], "seconds": []}
                                             for s in samplers}
    for i, mi in enumerate(inputs):
        for s in samplers:  # interleaved, so drift in machine load hits every sampler alike
            name, _, opt = s.partition("+")  # "sequential+cache": a sampler with its KV cache switched on
            run = InfillRun(masked_input=mi, model=model, sampler=name, k=k, seed=seed + i, temperature=temperature,
                            cache=True if opt == "cache" else None)
            t0 = time.perf_counter()
            for _ in run.stream():
                pass
            secs = time.perf_counter() - t0
            res = run.result(with_log_prob=False)
            per[s]["calls"].append(res.calls)
            per[s]["rounds"].append(res.rounds)
            per[s]["tokens"].append(res.masked_tokens)
            per[s]["seconds"].append(secs)
    base = sum(per["sequential"]["seconds"]) if "sequential" in per else float("nan")
    rows = []
    for s in samplers:
        d = per[s]
        cm, cse = mean_se(d["calls"])
        tok = sum(d["tokens"])
        rows.append({
            "sampler": s,
            "calls_mean": cm,
            "calls_se": cse,
            "tokens_per_round": tok / sum(d["rounds"]),
            "tokens_per_call": tok / sum(d["calls"]),
            "seconds_mean": statistics.fmean(d["seconds"]),
            "wall_ratio_vs_sequential": base / sum(d["seconds"]),
        })
    return {
        "model": lm.name, "length": length, "mask_rate": mask_rate, "k": k, "samples": len(inputs),
        "masked_tokens_mean": statistics.fmean(per[samplers[0]]["tokens"]), "torch_threads": torch.get_num_threads(),
        "device": lm.device, "rows": rows,
    }


def print_table(res: dict) -> None:
    print(f"model {res['model']}  length {res['length']}  mask rate {res['mask_rate']}  k {res['k']}  "
          f"inputs {res['samples']}  masked tokens/input {res['masked_tokens_mean']:.1f}  device {res.get('device')}")
    print(f"{'sampler':<16}{'calls':>16}{'tok/round':>11}{'tok/call':>10}{'s/input':>10}{'speed vs seq':>14}")
    for r in res["rows"]:
        print(f"{r['sampler']:<16}{r['calls_mean']:>9.1f} ± {r['calls_se']:<4.1f}{r['tokens_per_round']:>11.2f}"
              f"{r['tokens_per_call']:>10.2f}{r['seconds_mean']:>10.2f}{r['wall_ratio_vs_sequential']:>13.2f}x")


def cli(argv: list[str]) -> int:
    if argv and argv[0] == "self-spec":
        from .bench_selfspec import run

        return run(argv[1:])
    if argv and argv[0] == "fills":
        from .bench_fills import run as run_fills

        return run_fills(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m engine bench assd")
    ap.add_argument("which", choices=["assd"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--domain", default="text")
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--mask-rate", type=float, default=0.95)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samplers", default=",".join(ASSD_SAMPLERS))
    ap.add_argument("--json", action="store_true")
    add_device_arg(ap)
    a = ap.parse_args(argv)
    apply_device_flag(a.device)
    res = run_assd_bench(a.model or default_model(a.domain, "asarm"), a.length, a.mask_rate, a.k, a.samples,
                         a.samplers.split(","), a.seed)
    if a.json:
        print(json.dumps(res))
    else:
        print_table(res)
    return 0
