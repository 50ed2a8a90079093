"""`python -m engine bench assd|self-spec|fills`: samplers side by side on the same inputs and seeds.

Timings are only ever compared within one run (ratios), never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import torch

from engine.cli import add_device_arg, apply_device_args
from engine.errors import InfillError
from engine.loading.loaded_model import LoadedModel
from engine.loading.precision import PRECISIONS, resolve_precision
from engine.loading.registry import default_model, load
from engine.loading.threads import set_threads
from engine.params import read_knobs, refuse_unknown
from engine.samplers import SAMPLERS

from .bench_samplers import ASSD_BENCH
from .machine import describe, load_average
from .progress import add_quiet_arg, set_quiet
from .runs import drain
from .shard import is_main, shard_map, world
from .workloads import bench_inputs

ASSD_SAMPLERS = ASSD_BENCH  # lab/bench_samplers.py: read from the engine's catalogue
BASELINE = "sequential-cache"  # the strongest non-speculative baseline: every headline ratio is against it
UNCACHED = "sequential"  # kept as a labelled second column


def mean_se(xs: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (NaN for no values, SE 0 for one): every benchmark
    and report cell."""
    if not xs:
        return float("nan"), float("nan")
    m = statistics.fmean(xs)
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
    return m, se


def sampler_setting(s: str) -> tuple[str, str, dict[str, str], str | None]:
    """A --samplers entry as (sampler, option, knobs, precision): "sequential+cache" is a sampler with
    its KV cache switched on, "assd-ngram:confidence=0" one with a knob of its own (engine.params.KNOBS,
    read and checked by the run like any knob), "sequential-cache@fp32" one on the model loaded in
    another CPU precision (engine/loading/precision.py; None: the run's), so two settings of one
    sampler, or one sampler in two precisions, are measured side by side."""
    s, _, prec = s.partition("@")
    if prec and prec not in PRECISIONS:
        raise ValueError(f"precision {prec!r} in {s}@{prec}: use {' or '.join(PRECISIONS)}")
    base, *sets = s.split(":")
    name, _, opt = base.partition("+")
    knobs = {}
    for kv in sets:
        knob, eq, value = kv.partition("=")
        if not eq:
            raise ValueError(f"{kv!r} in {s!r} is not KNOB=VALUE")
        knobs[knob] = value
    return name, opt, knobs, prec or None


def _measure_one(lm: LoadedModel, mi, samplers: list[str], k: int, seed: int, temperature: float,
                 draft_model: str | None = None) -> dict:
    """Every sampler on one input, one right after the other (drift in machine load hits every
    sampler alike): per sampler calls, rounds, masked tokens, wall and CPU seconds, and the wall
    seconds inside the AS-ARM's calls and inside the drafter (the rest is the host's work)."""
    out = {}
    for s in samplers:
        name, opt, knobs, prec = sampler_setting(s)
        model = lm if prec is None or prec == lm.precision else load(str(lm.path), device=lm.device, precision=prec)
        d = drain(model, mi, name, seed, k=k, temperature=temperature, cache=True if opt == "cache" else None,
                  draft_model=draft_model if name == "assd-ptp" else None, **knobs)
        res = d.result
        out[s] = {"calls": res.calls, "rounds": res.rounds, "tokens": res.masked_tokens, "seconds": d.seconds,
                  "cpu": d.cpu, "drafter_passes": d.run.drafter_passes[0], "fills": [sp.text for sp in res.spans],
                  "rows": [nc + nq for nc, nq in d.run.call_shapes],
                  "call_seconds": list(d.run.call_seconds),
                  "asarm_seconds": d.run.asarm_seconds, "drafter_seconds": d.run.drafter_seconds[0]}
    return out


def assd_rows(measured: list[dict], samplers: list[str]) -> list[dict]:
    """The per-sampler rows of `bench assd` over the given inputs' measurements (all of them for
    the summary, one for a per-input row)."""
    keys = ("calls", "rounds", "tokens", "seconds", "cpu", "drafter_passes", "asarm_seconds", "drafter_seconds")
    per = {s: {key: [m[s].get(key, 0) for m in measured] for key in keys} for s in samplers}
    rows = []
    for s in samplers:
        d = per[s]
        cm, cse = mean_se(d["calls"])
        tok = sum(d["tokens"])
        row = {
            "sampler": s,
            "calls_mean": cm,
            "calls_se": cse,
            "rounds": sum(d["rounds"]),
            # forward passes of a drafting network (PTP head, diffusion drafter; 0 for the n-gram
            # and for the AS-ARM's own draft pass): one-pass drafting shows as <= 1 per round
            "drafter_passes": sum(d["drafter_passes"]),
            "drafter_passes_per_round": sum(d["drafter_passes"]) / max(1, sum(d["rounds"])),
            "tokens_per_round": tok / sum(d["rounds"]),
            "tokens_per_call": tok / sum(d["calls"]),
            "seconds_mean": statistics.fmean(d["seconds"]),
            "seconds_median": statistics.median(d["seconds"]),
            "cpu_seconds_mean": statistics.fmean(d["cpu"]),
            "tokens_per_second": tok / max(1e-12, sum(d["seconds"])),
        }
        row.update(round_shares(sum(d["seconds"]), sum(d["asarm_seconds"]), sum(d["drafter_seconds"]),
                                sum(d["rounds"])))
        for base, key in ((BASELINE, "sequential_cache"), (UNCACHED, "sequential")):
            if base not in per:
                continue
            # per-input ratios (same input, same seed, measured one right after the other): the
            # median and the spread say how much of a ratio is machine load; the total is sum/sum
            ratios = [b / x for b, x in zip(per[base]["seconds"], d["seconds"], strict=True) if x > 0]
            row[f"wall_ratio_vs_{key}"] = sum(per[base]["seconds"]) / sum(d["seconds"])
            row[f"wall_ratio_vs_{key}_median"] = statistics.median(ratios)
            row[f"wall_ratio_vs_{key}_min"] = min(ratios)
            row[f"wall_ratio_vs_{key}_max"] = max(ratios)
            row[f"cpu_ratio_vs_{key}"] = sum(per[base]["cpu"]) / max(1e-12, sum(d["cpu"]))
        rows.append(row)
    return rows


def round_shares(seconds: float, asarm: float, drafter: float, rounds: int) -> dict[str, float]:
    """Where a round's wall time goes, in ms per round: the AS-ARM's calls (draft and verify
    passes), the drafter outside the AS-ARM (PTP head, n-gram counts, diffusion steps) and the
    host's rest (acceptance, bookkeeping, trace). Inputs measured before these timers (a partial
    file of an older run) have neither and show the whole round as host work."""
    per = 1000 / max(1, rounds)
    return {"asarm_ms_per_round": asarm * per, "drafter_ms_per_round": drafter * per,
            "host_ms_per_round": max(0.0, seconds - asarm - drafter) * per}


def observed_costs(measured: list[dict]) -> dict[int, float]:
    """The cost model of the `limit` column, from the run itself: for every number of rows a call
    carried (content + query rows), the median wall ms of the AS-ARM calls of that size, pooled over
    every sampler and input of the run. Why not a separate timing of synthetic calls (before
    2026-11-28, night): on a noisy 2-core VM such a curve, measured after the samplers at one fixed
    context, priced calls up to 1.4x off what the same calls cost inside the runs (protein, Intel
    Xeon: assd-pipelined's limit read 3.70x where its calls alone allowed about 2.7x). A call of r
    rows costs what calls of r rows cost in this run, whichever sampler makes it (on the run's model:
    a `SAMPLER@PRECISION` entry runs another arithmetic, and its calls price nothing)."""
    by_rows: dict[int, list[float]] = {}
    for m in measured:
        for s, one in m.items():
            if sampler_setting(s)[3]:  # a sampler on the model in another precision: another cost curve
                continue
            secs = one.get("call_seconds")  # absent in a partial file written before 2026-11-28 (night)
            for r, sec in zip(one["rows"], secs, strict=True) if secs else ():
                by_rows.setdefault(r, []).append(1000 * sec)
    return {r: statistics.median(v) for r, v in sorted(by_rows.items())}


def call_cost(curve: dict[int, float], rows: int) -> float:
    """A call's cost from the curve, linear between grid points (beyond the grid: the last slope)."""
    xs = sorted(curve)
    lo = max([x for x in xs if x <= rows], default=xs[0])
    hi = min([x for x in xs if x >= rows], default=xs[-1])
    if hi == lo:
        if rows <= xs[-1]:
            return curve[lo]
        lo, hi = xs[-2], xs[-1]
    return curve[lo] + (curve[hi] - curve[lo]) * (rows - lo) / (hi - lo)


def add_limits(rows: list[dict], measured: list[dict], curve: dict[int, float]) -> None:
    """Each row's `limit`: the ratio against cached sequential that the sampler would reach if its
    AS-ARM calls were all it cost (drafting network, host work and Python free): the baseline's
    calls priced by the curve over the sampler's calls priced by the curve, totals over inputs."""
    price = {s: sum(call_cost(curve, r) for m in measured for r in m[s].get("rows", [])) for s in measured[0]}
    if BASELINE not in price:
        return
    for row in rows:
        p = price.get(row["sampler"], 0.0)
        if p > 0:
            row["limit_vs_sequential_cache"] = price[BASELINE] / p
            if "wall_ratio_vs_sequential_cache" in row:  # how much of the call-cost prediction the clock kept
                row["measured_over_limit"] = row["wall_ratio_vs_sequential_cache"] / row["limit_vs_sequential_cache"]


def run_assd_bench(model: str | LoadedModel, length: int, mask_rate: float, k: int, samples: int,
                   samplers: list[str], seed: int = 0, temperature: float = 1.0, inputs_file: str | None = None,
                   draft_model: str | None = None, windows: list | None = None,
                   partial: str | None = None) -> dict:
    """ASSD variants against the sequential baselines on the same masked windows (or the inputs of
    `inputs_file`) and seeds, interleaved; per-sampler calls, rounds, tokens and seconds, and wall
    ratios within the run. Input i runs with seed + i, in whichever process (lab.shard)
    takes it. From a file: also every row per input ("per_input", with each sampler's fills: the
    span texts it wrote) and the lines left out. Each row gets its `limit` (add_limits), every call
    priced at what calls of its size cost in this run (observed_costs). A model already
    loaded and its `windows` (bench assd --xlnet-base-random) are taken as given."""
    lm = model if isinstance(model, LoadedModel) else load(model)
    load_before = load_average()
    inputs, src = (windows, None) if windows is not None else bench_inputs(lm, inputs_file, length, mask_rate,
                                                                          samples, seed)

    def measure(i: int, mi) -> dict:
        one = _measure_one(lm, mi, samplers, k, seed + i, temperature, draft_model)
        if partial:  # each input's measurement the moment it exists: a run cut short keeps what it measured
            with open(partial, "a") as f:
                f.write(json.dumps({"input": i, "k": k, "seed": seed + i, "measured": one}) + "\n")
        return one

    measured = shard_map(measure, inputs,
                         desc=f"bench assd {lm.name}: {len(samplers)} samplers per input")
    out = {
        "model": lm.name, "length": length, "mask_rate": mask_rate, "k": k, "samples": len(inputs),
        "masked_tokens_mean": statistics.fmean(m[samplers[0]]["tokens"] for m in measured),
        "torch_threads": torch.get_num_threads(), "device": lm.device, "precision": lm.precision,
        "baseline": BASELINE, "processes": world()[1], "machine": describe(),
        "load_average": {"before": load_before, "after": load_average()}, "rows": assd_rows(measured, samplers),
    }
    curve = observed_costs(measured)
    if curve:
        out["call_cost_ms"] = curve
        add_limits(out["rows"], measured, curve)
    if src is not None:
        per_input = []
        for n, m in zip(src.lines, measured, strict=True):
            rows = assd_rows([m], samplers)
            if curve:
                add_limits(rows, [m], curve)
            per_input.append({"line": n, "masked_tokens": m[samplers[0]]["tokens"], "rows": rows,
                              "fills": {s: m[s]["fills"] for s in samplers}})
        out.update(inputs=str(inputs_file), length=None, mask_rate=None, skipped=src.errors, per_input=per_input)
    return out


def print_table(res: dict) -> None:
    """The `bench assd` result as a plain-text table."""
    what = f"file {res['inputs']}" if res.get("inputs") else f"length {res['length']}  mask rate {res['mask_rate']}"
    print(f"model {res['model']}  {what}  k {res['k']}  "
          f"inputs {res['samples']}  masked tokens/input {res['masked_tokens_mean']:.1f}  "
          f"torch threads {res['torch_threads']}  device {res.get('device')}  precision {res.get('precision', 'fp32')}")
    if res.get("machine"):
        load = res.get("load_average") or {}
        print(f"machine {res['machine']}  load average (1 min) {load.get('before')} before, {load.get('after')} after")
    print(f"{'sampler':<18}{'calls':>16}{'rounds':>8}{'drafter passes':>16}{'tok/round':>11}{'tok/call':>10}{'s/input':>9}"
          f"{'tok/s':>8}{'vs seq-cache (median [min-max])':>34}{'limit':>7}{'meas/lim':>9}"
          f"{'ms/round: AS-ARM drafter host':>31}{'CPU vs seq-cache':>18}{'vs uncached seq':>17}")
    for r in res["rows"]:
        vc = "n/a"
        if "wall_ratio_vs_sequential_cache" in r:
            vc = (f"{r['wall_ratio_vs_sequential_cache']:.2f}x ({r['wall_ratio_vs_sequential_cache_median']:.2f} "
                  f"[{r['wall_ratio_vs_sequential_cache_min']:.2f}-{r['wall_ratio_vs_sequential_cache_max']:.2f}])")
        vu = f"{r['wall_ratio_vs_sequential']:.2f}x" if "wall_ratio_vs_sequential" in r else "n/a"
        cc = f"{r['cpu_ratio_vs_sequential_cache']:.2f}x" if "cpu_ratio_vs_sequential_cache" in r else "n/a"
        lim = f"{r['limit_vs_sequential_cache']:.2f}x" if "limit_vs_sequential_cache" in r else "n/a"
        mol = f"{r['measured_over_limit']:.2f}" if "measured_over_limit" in r else "n/a"
        ms = (f"{r.get('asarm_ms_per_round', 0):.1f} {r.get('drafter_ms_per_round', 0):.1f} "
              f"{r.get('host_ms_per_round', 0):.1f}")
        print(f"{r['sampler']:<18}{r['calls_mean']:>9.1f} ± {r['calls_se']:<4.1f}{r['rounds']:>8}"
              f"{r['drafter_passes']:>16}{r['tokens_per_round']:>11.2f}"
              f"{r['tokens_per_call']:>10.2f}{r['seconds_median']:>9.2f}{r.get('tokens_per_second', 0):>8.0f}"
              f"{vc:>34}{lim:>7}{mol:>9}{ms:>31}{cc:>18}{vu:>17}")
    print("ratios: baseline seconds / sampler seconds, total over inputs; median, min and max of the per-input "
          "ratios in brackets (samplers interleaved per input); CPU: the same with process CPU time. rounds, "
          "drafter passes: totals over inputs (drafter passes: forward passes of a drafting network, PTP head or "
          "diffusion drafter). tok/s: masked tokens filled per wall second. limit: the ratio if the AS-ARM calls "
          "were all a sampler cost (each call priced at the median wall ms of this run's AS-ARM calls of its "
          "size, every sampler's; drafting network and host work free); meas/lim: the measured ratio over the "
          "limit. ms/round: wall ms per round inside the AS-ARM's calls (draft and verify passes), inside the "
          "drafter outside the AS-ARM (PTP head, n-gram counts, diffusion steps) and the rest (host: acceptance, "
          "bookkeeping, trace).")
    for one in res.get("per_input", []):
        cells = "  ".join(f"{r['sampler']} {r['calls_mean']:g} calls {r['tokens_per_call']:.2f} tok/call"
                          for r in one["rows"])
        print(f"line {one['line']} ({one['masked_tokens']} masked): {cells}")


def cli(argv: list[str]) -> int:
    """`python -m engine bench assd|self-spec|fills|calls`: dispatches to the benchmark asked for."""
    if argv and argv[0] == "self-spec":
        from .bench_selfspec import run

        return run(argv[1:])
    if argv and argv[0] == "fills":
        from .bench_fills import run as run_fills

        return run_fills(argv[1:])
    if argv and argv[0] == "calls":
        from .bench_calls import cli as calls_cli

        return calls_cli(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m engine bench assd",
        epilog="Other benchmarks: `python -m engine bench self-spec|fills|calls --help`.")
    ap.add_argument("which", choices=["assd"], help="assd: every AS-ARM sampler against cached sequential")
    ap.add_argument("--model", default=None)
    ap.add_argument("--domain", default="text")
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--mask-rate", type=float, default=0.95)
    ap.add_argument("--k", default="5", help="draft length; a comma list (3,5,8) runs each and names the best k")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--inputs", default=None, metavar="FILE.jsonl",
                    help='your own inputs, one JSON object a line: {"text": "... [MASK:4] ..."} or '
                         '{"text": "...", "mask_rate": 0.5} (instead of --length/--mask-rate/--samples windows)')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samplers", default=",".join(ASSD_SAMPLERS))
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: the engine's)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--xlnet-base-random", action="store_true",
                    help="an XLNet-base sized model with random weights (the ASSD paper's size, no download) "
                         "over --samples random windows of --length tokens (keep it short: e.g. 64)")
    ap.add_argument("--draft-model", default=None,
                    help="assd-ptp's PTP head (folder or bundled name; default: the domain's bundled one)")
    ap.add_argument("--partial", default=None, metavar="FILE.jsonl",
                    help="append each input's raw measurement to this file as it is measured")
    ap.add_argument("--from-partial", default=None, metavar="FILE.jsonl",
                    help="no run: the table of the inputs a --partial file holds (a run cut short keeps its table)")
    add_device_arg(ap)
    add_quiet_arg(ap)
    a = ap.parse_args(argv)
    set_quiet(a.quiet)
    if a.from_partial:
        res = table_from_partial(a.from_partial)
        print(json.dumps(res)) if a.json else print_table(res)
        return 0
    is_main()  # several processes (torchrun / accelerate launch): join them now, one GPU each
    apply_device_args(a)
    if a.threads:
        set_threads(a.threads)
    try:
        ks = [int(x) for x in a.k.split(",")]
    except ValueError:
        ap.error(f"--k: expected whole numbers separated by commas, got {a.k!r}")
    if any(not 1 <= k <= 64 for k in ks):
        ap.error("--k: each draft length must be between 1 and 64")
    for entry in a.samplers.split(","):  # refused before any model loads: a typo costs no run
        try:
            name, _, knobs, prec = sampler_setting(entry)
            if prec:
                resolve_precision(prec)  # bf16 where oneDNN has none: refused now
        except (ValueError, InfillError) as e:
            ap.error(f"--samplers: {e}")
        if name not in SAMPLERS:
            ap.error(f"--samplers: unknown sampler {name!r} in {entry!r}; known: {', '.join(sorted(SAMPLERS))}")
        try:
            refuse_unknown(knobs, "bench assd --samplers")
            read_knobs(knobs)
        except InfillError as e:
            ap.error(f"--samplers {entry!r}: {e}")
    model, windows = a.model or default_model(a.domain, "asarm"), None
    if a.xlnet_base_random:
        from .bench_xlnet import random_windows, xlnet_base_random

        model = xlnet_base_random()
        windows = random_windows(model, a.length, a.mask_rate, a.samples, a.seed)
    results = [run_assd_bench(model, a.length, a.mask_rate, k, a.samples, a.samplers.split(","), a.seed,
                              inputs_file=a.inputs, draft_model=a.draft_model, windows=windows,
                              partial=a.partial) for k in ks]
    if not is_main():
        return 0  # the main process prints what every process measured
    res = results[0] if len(results) == 1 else {"sweep": results, "best_k": best_k(results)}
    if a.json:
        print(json.dumps(res))
        return 0
    for one in results:
        print_table(one)
    if len(results) > 1:
        print("best k (highest wall ratio vs cached sequential): " +
              ", ".join(f"{s} k={k} ({r:.2f}x)" for s, (k, r) in res["best_k"].items()))
    return 0


def table_from_partial(path: str) -> dict:
    """The `bench assd` summary of the inputs a --partial file holds (one k; no call-cost curve)."""
    lines = [json.loads(x) for x in open(path) if x.strip()]
    if not lines:
        raise SystemExit(f"bench assd --from-partial {path}: no measured input in the file")
    measured = [x["measured"] for x in lines]
    samplers = [s for s in measured[0] if all(s in m for m in measured)]
    return {"model": None, "length": None, "mask_rate": None, "k": lines[0]["k"], "samples": len(measured),
            "masked_tokens_mean": statistics.fmean(m[samplers[0]]["tokens"] for m in measured),
            "torch_threads": None, "device": None, "baseline": BASELINE, "from_partial": str(path),
            "inputs_measured": [x["input"] for x in lines], "rows": assd_rows(measured, samplers)}


def best_k(results: list[dict]) -> dict[str, tuple[int, float]]:
    """Per sampler, the k of the sweep with the highest wall ratio against cached sequential."""
    best: dict[str, tuple[int, float]] = {}
    for res in results:
        for r in res["rows"]:
            ratio = r.get("wall_ratio_vs_sequential_cache")
            if ratio is not None and r["sampler"] != BASELINE and ratio > best.get(r["sampler"], (0, -1.0))[1]:
                best[r["sampler"]] = (res["k"], ratio)
    return best
