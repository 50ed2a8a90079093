"""One process that times AS-ARM calls for `bench calls`, importing `engine` from whichever source
tree is first on PYTHONPATH: the checkout being measured, or an old one (`--baseline-tree`).

Why a separate process and a standalone file: two versions of `engine` cannot live in one Python
process, and an old checkout does not have this file. The parent (lab/bench_calls.py) runs
this file by path with PYTHONPATH set to a tree, once per tree, and drives the processes in turn
(one repetition each, interleaved), so machine load drifts over both alike. It only uses what
every checkout has: engine.loading.registry.load and engine.models.asarm_core.KVCache.

Protocol: prints one JSON line `{"ready": ..., "precision": ...}` once loaded (the CPU precision its
model computes in: INFILL_PRECISION, engine/loading/precision.py); then for every line read from stdin
measures each shape once (the call, then its floor) and prints one JSON line of times. With
`--profile`, instead prints torch.profiler tables of a one-token call and a k = 5 verify call.
"""

from __future__ import annotations

import json
import sys
import time

if __name__ == "__main__" and sys.path and sys.path[0].endswith("lab"):
    sys.path.pop(0)  # run by path: import `engine` from PYTHONPATH, not this folder's siblings

import torch


def floor_mats(m) -> tuple[list[list[torch.Tensor]], torch.Tensor]:
    """The model's own weight matrices, transposed once ([in, out]), per layer: q, k, v, o, fc1, fc2."""
    layers = []
    for b in m.blocks:
        layers.append([w.detach().t().contiguous() for w in
                       (b.q.weight, b.k.weight, b.v.weight, b.o.weight, b.mlp[0].weight, b.mlp[2].weight)])
    return layers, m.head.weight.detach().t().contiguous()


def floor(layers: list[list[torch.Tensor]], head: torch.Tensor, x: torch.Tensor, nq: int) -> torch.Tensor:
    """The arithmetic floor of a call with x's rows (content + query): every row through every
    matrix of every layer, the head on the query rows. No norms, masks, attention or cache."""
    for wq, wk, wv, wo, w1, w2 in layers:
        torch.mm(x, wq)
        torch.mm(x, wk)
        torch.mm(x, wv)
        a = torch.mm(x, wo)
        x = torch.mm(torch.mm(a, w1), w2)
    return torch.mm(x[-nq:], head)


def setup(model: str, context: int):
    """The loaded model, a cache holding `context` rows, and the random source of the call ids."""
    from engine.loading.registry import load
    from engine.models.asarm_core import KVCache

    m = load(model).model
    g = torch.Generator().manual_seed(0)
    cache = KVCache()
    dev = next(m.parameters()).device  # ids are drawn on the host (the same on every device), then moved
    pos = torch.arange(context, device=dev)[None]
    with torch.inference_mode():
        m(torch.randint(4, m.config.vocab_size, (1, context), generator=g).to(dev), pos, torch.zeros_like(pos),
          pos[:, :1], torch.ones(1, 1, dtype=torch.long, device=dev), cache=cache)
    return m, cache, g


def call_args(m, context: int, nc: int, nq: int, g: torch.Generator):
    """Inputs of a call with nc new content rows and nq query rows after the cached context."""
    top = m.config.max_positions
    ids = torch.randint(4, m.config.vocab_size, (1, nc), generator=g)
    cpos = (torch.arange(context, context + nc) % top)[None]
    crank = torch.arange(1, nc + 1)[None]
    qpos = (torch.arange(context, context + nq) % top)[None]
    qlim = torch.full((1, nq), 1 + nc)
    dev = next(m.parameters()).device
    return tuple(t.to(dev) for t in (ids, cpos, crank, qpos, qlim))


def serve(model: str, context: int, shapes: list[tuple[int, int]], threads: int) -> None:
    """Answer each stdin line with one repetition of every shape: call and floor, CPU and wall ms."""
    torch.set_num_threads(threads)
    m, cache, g = setup(model, context)
    layers, head = floor_mats(m)
    d = m.config.hidden_size
    sync = torch.cuda.synchronize if head.device.type == "cuda" else (lambda: None)  # kernels run async there
    print(json.dumps({"ready": True, "threads": torch.get_num_threads(), "precision": getattr(m, "cpu_precision", "fp32")}),
          flush=True)
    for _ in sys.stdin:
        out = []
        with torch.inference_mode():
            for nc, nq in shapes:
                cache.truncate(context)
                args = call_args(m, context, nc, nq, g)
                w0, c0 = time.perf_counter(), time.process_time()
                m(*args, cache=cache)
                sync()
                c1, w1 = time.process_time(), time.perf_counter()
                x = torch.randn(nc + nq, d, generator=g).to(head.device)
                w2, c2 = time.perf_counter(), time.process_time()
                floor(layers, head, x, nq)
                sync()
                c3, w3 = time.process_time(), time.perf_counter()
                out.append([1000 * (c1 - c0), 1000 * (w1 - w0), 1000 * (c3 - c2), 1000 * (w3 - w2)])
        print(json.dumps(out), flush=True)


def profile(model: str, context: int, threads: int, reps: int) -> None:
    """torch.profiler tables (self CPU time, top ops) of a one-token call and a k = 5 verify call."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    torch.set_num_threads(threads)
    m, cache, g = setup(model, context)
    for name, (nc, nq) in (("one-token call (1 content row, 1 query row)", (1, 1)),
                           ("k = 5 verify call (5 content rows, 5 query rows)", (5, 5))):
        with torch.inference_mode():
            for _ in range(5):  # warm-up
                cache.truncate(context)
                m(*call_args(m, context, nc, nq, g), cache=cache)
            args = [call_args(m, context, nc, nq, g) for _ in range(reps)]
            with prof(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
                for a in args:
                    cache.truncate(context)
                    m(*a, cache=cache)
        print(f"### {name}, {reps} calls after {context} cached rows, {threads} thread(s)\n")
        print("```")
        print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=40))
        print("```\n")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="text-asarm")
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shapes", default="1x1")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    if a.profile:
        profile(a.model, a.context, a.threads, a.reps)
    else:
        serve(a.model, a.context, [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")], a.threads)
