"""`python -m engine bench calls`: what one AS-ARM call costs against the rows it carries.

Why speculation does or does not pay on a machine (issue 13): a speculative round replaces several
one-token calls by a call with k draft (content) rows and some query rows. It wins only when that
call costs less than the tokens it yields; the curve printed here is the cost side of that trade.
Cost is CPU time of the process (time.process_time), which other people's load on a shared
machine disturbs far less than wall time; wall medians are printed beside it. Shapes are
interleaved within each repetition. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from ..models.asarm_core import KVCache
from ..registry import default_model, load, set_threads

# (content rows, query rows): a sequential step, ASSD's draft and density passes at k = 5, the
# pipelined call at k = 5 (4-5 drafts, density rows + k proposal rows per stopping point), larger
SHAPES = [(1, 1), (1, 5), (4, 4), (5, 5), (5, 10), (5, 35), (10, 10), (16, 16), (32, 32), (64, 64), (128, 128)]


def measure(model_name: str, context: int, reps: int, shapes: list[tuple[int, int]]) -> dict:
    """CPU and wall seconds of single AS-ARM calls of each (content rows, query rows) shape after
    `context` cached rows: what one network call costs as a call grows."""
    m = load(model_name).model
    vmax = m.config.vocab_size
    top = m.config.max_positions
    g = torch.Generator().manual_seed(0)
    cpu: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    wall: dict[tuple[int, int], list[float]] = {s: [] for s in shapes}
    with torch.inference_mode():
        cache = KVCache()
        pos = torch.arange(context)[None]
        m(torch.randint(4, vmax, (1, context), generator=g), pos, torch.zeros_like(pos), pos[:, :1],
          torch.ones(1, 1, dtype=torch.long), cache=cache)
        for rep in range(reps + 2):
            for nc, nq in shapes:
                cache.truncate(context)
                ids = torch.randint(4, vmax, (1, nc), generator=g)
                cpos = (torch.arange(context, context + nc) % top)[None]
                crank = torch.arange(1, nc + 1)[None]
                qpos = (torch.arange(context, context + nq) % top)[None]
                qlim = torch.full((1, nq), 1 + nc)
                w0, c0 = time.perf_counter(), time.process_time()
                m(ids, cpos, crank, qpos, qlim, cache=cache)
                if rep >= 2:  # two warm-up rounds
                    cpu[(nc, nq)].append(time.process_time() - c0)
                    wall[(nc, nq)].append(time.perf_counter() - w0)
    base = statistics.median(cpu[shapes[0]])
    rows = []
    for s in shapes:
        q = statistics.quantiles(cpu[s], n=4)
        rows.append({"content_rows": s[0], "query_rows": s[1], "cpu_ms_median": 1000 * statistics.median(cpu[s]),
                     "cpu_ms_q1": 1000 * q[0], "cpu_ms_q3": 1000 * q[2],
                     "wall_ms_median": 1000 * statistics.median(wall[s]),
                     "cost_vs_one_token_call": statistics.median(cpu[s]) / base})
    return {"model": model_name, "context_rows": context, "reps": reps, "torch_threads": torch.get_num_threads(),
            "rows": rows}


def cli(argv: list[str]) -> int:
    """`python -m engine bench calls`: the per-call cost table."""
    ap = argparse.ArgumentParser(prog="python -m engine bench calls")
    ap.add_argument("--model", default=None)
    ap.add_argument("--domain", default="text")
    ap.add_argument("--context", type=int, default=200, help="cached rows before the measured call")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    set_threads(a.threads)
    res = measure(a.model or default_model(a.domain, "asarm"), a.context, a.reps, SHAPES)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"model {res['model']}  cached rows {res['context_rows']}  torch threads {res['torch_threads']}  "
          f"repetitions {res['reps']}")
    print(f"{'content':>8}{'query':>7}{'CPU ms (median, IQR)':>26}{'wall ms':>10}{'x one-token call':>18}")
    for r in res["rows"]:
        print(f"{r['content_rows']:>8}{r['query_rows']:>7}{r['cpu_ms_median']:>10.2f} ({r['cpu_ms_q1']:.2f}-"
              f"{r['cpu_ms_q3']:.2f}){r['wall_ms_median']:>10.1f}{r['cost_vs_one_token_call']:>17.2f}x")
    print("A speculative sampler beats cached sequential decoding only if its tokens per call exceed the cost "
          "of its calls in one-token calls (e.g. pipelined ASSD at k = 5: the 5 content / 35 query row call).")
    return 0
