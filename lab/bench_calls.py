"""`python -m engine bench calls`: what one AS-ARM call costs against the rows it carries.

Why speculation does or does not pay on a machine: a speculative round replaces several
one-token calls by a call with k draft (content) rows and some query rows. It wins only when that
call costs less than the tokens it yields; the curve printed here is the cost side of that trade.
Cost is CPU time of the process (time.process_time), which other people's load on a shared
machine disturbs far less than wall time; wall medians are printed beside it. Shapes are
interleaved within each repetition. Never asserted in tests.

Each row also carries its floor: the same rows through a plain stack of the model's own
weight matrices, no norms, masks, attention or cache, so the table says how far a call is above
what the hardware needs for its matmuls. `--baseline-tree PATH` measures an older checkout (a
`git worktree add --detach PATH COMMIT`) beside this one in the same run: the calls are timed in
worker processes (lab/calls_worker.py), one per source tree, taking turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from engine.loading.precision import resolve_precision
from engine.loading.registry import default_model
from engine.loading.threads import set_threads
from lab.machine import describe

# (content rows, query rows): a sequential step, ASSD's draft and density passes at k = 5, the
# pipelined call at k = 5 (4-5 drafts, density rows + k proposal rows per stopping point), larger
SHAPES = [(1, 1), (1, 5), (4, 4), (5, 5), (5, 10), (5, 35), (10, 10), (16, 16), (32, 32), (64, 64), (128, 128)]


WORKER = Path(__file__).with_name("calls_worker.py")
HERE = Path(__file__).resolve().parents[1]  # the source tree this file belongs to


def _start(tree: Path, model: str, context: int, shapes: list[tuple[int, int]], threads: int,
           precision: str | None = None) -> tuple[subprocess.Popen, str]:
    """A calls_worker process that imports `engine` from `tree`, loaded and ready, computing in
    `precision` (None: the environment's); with the precision its model reports."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(threads)}
    if precision is not None:
        env["INFILL_PRECISION"] = precision
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "--model", model, "--context", str(context), "--threads", str(threads),
         "--shapes", ",".join(f"{c}x{q}" for c, q in shapes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(tree))
    line = proc.stdout.readline()
    if not line.startswith("{"):
        proc.kill()
        raise RuntimeError(f"bench calls: the worker for {tree} did not start (run {WORKER} by hand to see why)")
    return proc, json.loads(line).get("precision", "fp32")


def _rows(times: list[list[list[float]]], shapes: list[tuple[int, int]]) -> list[dict]:
    """Per shape: medians and quartiles of the call's CPU ms, its wall ms, its floor, and the ratios."""
    rows = []
    base = statistics.median(t[0][0] for t in times)
    for i, (nc, nq) in enumerate(shapes):
        cpu = [t[i][0] for t in times]
        fl = statistics.median(t[i][2] for t in times)
        q = statistics.quantiles(cpu, n=4)
        med = statistics.median(cpu)
        rows.append({"content_rows": nc, "query_rows": nq, "cpu_ms_median": med, "cpu_ms_q1": q[0],
                     "cpu_ms_q3": q[2], "wall_ms_median": statistics.median(t[i][1] for t in times),
                     "cost_vs_one_token_call": med / base, "floor_cpu_ms_median": fl,
                     "floor_wall_ms_median": statistics.median(t[i][3] for t in times),
                     "cost_vs_floor": med / max(fl, 1e-9)})
    return rows


def _commit(tree: Path) -> str | None:
    """The tree's checked-out commit (None when it is not a git checkout)."""
    try:
        return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def measure(model_name: str, context: int, reps: int, shapes: list[tuple[int, int]], threads: int = 1,
            baseline_tree: Path | None = None, precisions: list[str] | None = None) -> dict:
    """CPU and wall seconds of single AS-ARM calls of each (content rows, query rows) shape after
    `context` cached rows, and of each shape's floor: the same rows through a plain stack of the
    model's own weight matrices (lab/calls_worker.py `floor`), i.e. what the arithmetic
    alone costs on this machine. With `baseline_tree` (e.g. a `git worktree` of an older commit),
    the same is measured for that checkout's model code in a second process; with `precisions`
    (e.g. fp32 and bf16: engine/loading/precision.py), this checkout once per precision, each in its
    own process. The processes take turns one repetition at a time, so all see the same machine load."""
    runs = [(f"current {p}" if p else "current", HERE, p) for p in (precisions or [None])]
    if baseline_tree:
        runs.append(("baseline", Path(baseline_tree).resolve(), precisions[0] if precisions else None))
    started = {name: _start(tree, model_name, context, shapes, threads, p) for name, tree, p in runs}
    procs = {name: proc for name, (proc, _) in started.items()}
    times: dict[str, list] = {name: [] for name in procs}
    try:
        for rep in range(reps + 2):
            for name, proc in procs.items():
                proc.stdin.write("\n")
                proc.stdin.flush()
                t = json.loads(proc.stdout.readline())
                if rep >= 2:  # two warm-up rounds
                    times[name].append(t)
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(timeout=60)
    first = runs[0][0]
    out = {"model": model_name, "context_rows": context, "reps": reps, "torch_threads": threads,
           "tree": str(HERE), "commit": _commit(HERE), "machine": describe(), "precision": started[first][1],
           "rows": _rows(times[first], shapes)}
    if precisions and len(precisions) > 1:  # as asked; what each model computed in (a float64 model: fp32)
        out["by_precision"] = {p: _rows(times[name], shapes) for name, _, p in runs if p}
        out["precision_used"] = {p: started[name][1] for name, _, p in runs if p}
    if baseline_tree:
        out["baseline"] = {"tree": str(runs[-1][1]), "commit": _commit(runs[-1][1]),
                           "rows": _rows(times["baseline"], shapes)}
    return out


def _print_rows(title: str, rows: list[dict]) -> None:
    """One checkout's table: each shape's cost, its multiple of a one-token call and of its floor."""
    print(title)
    print(f"{'content':>8}{'query':>7}{'CPU ms (median, IQR)':>26}{'wall ms':>10}{'x one-token':>13}"
          f"{'floor ms':>10}{'x floor':>9}")
    for r in rows:
        print(f"{r['content_rows']:>8}{r['query_rows']:>7}{r['cpu_ms_median']:>10.2f} ({r['cpu_ms_q1']:.2f}-"
              f"{r['cpu_ms_q3']:.2f}){r['wall_ms_median']:>10.1f}{r['cost_vs_one_token_call']:>12.2f}x"
              f"{r['floor_cpu_ms_median']:>10.2f}{r['cost_vs_floor']:>8.2f}x")


def cli(argv: list[str]) -> int:
    """`python -m engine bench calls`: the per-call cost table."""
    ap = argparse.ArgumentParser(prog="python -m engine bench calls")
    ap.add_argument("--model", default=None)
    ap.add_argument("--domain", default="text")
    ap.add_argument("--context", type=int, default=200, help="cached rows before the measured call")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--xlnet-base-random", action="store_true",
                    help="time one call of an XLNet-base sized model with random weights over a window of "
                         "--context tokens (the ASSD paper's checkpoint size; no download), uncached and "
                         "cached side by side, a one-token call and a k = 5 verify, at 1 and 2 threads "
                         "(lab/bench_xlnet.py)")
    ap.add_argument("--baseline-tree", default=None, metavar="PATH",
                    help="also time the model code of another checkout (e.g. `git worktree add --detach PATH "
                         "COMMIT`), interleaved with this one, for a before/after table from one run")
    ap.add_argument("--precision", default=None, metavar="LIST",
                    help="CPU precisions to time side by side, each in its own process, e.g. fp32,bf16 "
                         "(default: the environment's, $INFILL_PRECISION or auto)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    set_threads(a.threads)
    precisions = [p.strip() for p in a.precision.split(",") if p.strip()] if a.precision else None
    for p in precisions or []:
        resolve_precision(p)  # a bad name or an unsupported bf16: one line now, not a dead worker
    if a.xlnet_base_random:
        from .bench_xlnet import measure_calls, print_calls

        res = measure_calls(a.context, a.reps, threads=tuple(sorted({1, 2, a.threads})))
        if a.json:
            print(json.dumps(res))
        else:
            print_calls(res)
        return 0
    res = measure(a.model or default_model(a.domain, "asarm"), a.context, a.reps, SHAPES, a.threads,
                  a.baseline_tree, precisions)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"model {res['model']}  cached rows {res['context_rows']}  torch threads {res['torch_threads']}  "
          f"repetitions {res['reps']}")
    print(f"machine {res['machine']}")
    by = res.get("by_precision") or {res["precision"]: res["rows"]}
    used = res.get("precision_used") or {}
    for p, rows in by.items():
        note = f" (the model computed in {used[p]})" if used.get(p, p) != p else ""
        _print_rows(f"this checkout ({res['commit'] or res['tree']}), precision {p}{note}", rows)
    if len(by) > 1:
        (pa, ra), (pb, rb) = list(by.items())[:2]
        print(f"{pb} / {pa} CPU ms: " + "  ".join(
            f"{r['content_rows']}x{r['query_rows']} {r['cpu_ms_median'] / max(o['cpu_ms_median'], 1e-9):.2f}"
            for r, o in zip(rb, ra, strict=True)))
    if "baseline" in res:
        b = res["baseline"]
        _print_rows(f"baseline {b['commit'] or ''} ({b['tree']})", b["rows"])
        print("current / baseline CPU ms: " + "  ".join(
            f"{r['content_rows']}x{r['query_rows']} {r['cpu_ms_median'] / max(o['cpu_ms_median'], 1e-9):.2f}"
            for r, o in zip(res["rows"], b["rows"], strict=True)))
    print("floor: the same rows through a plain stack of the model's weight matrices (matmuls only).")
    print("A speculative sampler beats cached sequential decoding only if its tokens per call exceed the cost "
          "of its calls in one-token calls (e.g. pipelined ASSD at k = 5: the 5 content / 35 query row call).")
    return 0
