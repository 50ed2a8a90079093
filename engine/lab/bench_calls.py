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


def measure_xlnet(length: int, reps: int, k: int = 5, mask_rate: float = 0.95) -> dict:
    """CPU and wall seconds of one XLNet call as the studio makes it (engine.models.xlnet_adapter:
    no KV cache, so every call is a full two-stream pass over the whole window), on an XLNet-base
    sized model with random weights (xlnet/xlnet-base-cased's shape: 12 layers, d_model 768, 12
    heads, d_inner 3072, vocabulary 32,000; the ASSD paper fine-tuned that model): a sequential
    step (1 query) and an ASSD density pass (k drafts, k queries). Nothing is downloaded."""
    from transformers import XLNetConfig, XLNetLMHeadModel

    from ..masking import MaskedInput
    from ..models.xlnet_adapter import XLNetOracle
    from ..tokenization import Codec, char_tokenizer

    torch.manual_seed(0)
    cfg = XLNetConfig(vocab_size=32000, d_model=768, n_layer=12, n_head=12, d_inner=3072)  # xlnet-base-cased
    model = XLNetLMHeadModel(cfg).eval()
    params = sum(p.numel() for p in model.parameters())
    codec = Codec(char_tokenizer("abc"))  # BOS and MASK ids only: the ids fed are random
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, cfg.vocab_size, (length,), generator=g).tolist()
    masked = sorted(torch.randperm(length, generator=g)[: max(k + 1, round(mask_rate * length))].tolist())
    hidden = set(masked)
    mi = MaskedInput([codec.mask_id if i in hidden else t for i, t in enumerate(ids)], masked, [""], [], codec.mask_id)
    shapes = {"sequential step (1 query)": ([], [(masked[0], 0)]),
              f"ASSD density pass ({k} drafts, {k} queries)": (
                  [(p, ids[p]) for p in masked[:k]], [(p, e) for e, p in enumerate(masked[:k])])}
    cpu: dict[str, list[float]] = {n: [] for n in shapes}
    wall: dict[str, list[float]] = {n: [] for n in shapes}
    for rep in range(reps + 1):
        for name, (drafts, queries) in shapes.items():
            oracle = XLNetOracle(model, mi, codec)
            w0, c0 = time.perf_counter(), time.process_time()
            oracle.call(drafts, queries)
            if rep >= 1:  # one warm-up round
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
    rows = [{"call": n, "cpu_ms_median": 1000 * statistics.median(cpu[n]),
             "wall_ms_median": 1000 * statistics.median(wall[n]), "wall_ms_min": 1000 * min(wall[n])} for n in shapes]
    return {"model": "random XLNet-base (xlnet-base-cased's shape)", "params": params, "window_tokens": length,
            "masked": len(masked), "reps": reps, "torch_threads": torch.get_num_threads(), "rows": rows}


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
                         "--context tokens (the ASSD paper's checkpoint size; no cache, no download)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    set_threads(a.threads)
    if a.xlnet_base_random:
        res = measure_xlnet(a.context, a.reps)
        if a.json:
            print(json.dumps(res))
            return 0
        print(f"{res['model']}: {res['params'] / 1e6:.0f}M parameters, window {res['window_tokens']} tokens "
              f"({res['masked']} masked), torch threads {res['torch_threads']}, repetitions {res['reps']}")
        for r in res["rows"]:
            print(f"  {r['call']:<42} CPU {r['cpu_ms_median']:8.1f} ms   wall {r['wall_ms_median']:8.1f} ms "
                  f"(median; fastest {r['wall_ms_min']:.1f})")
        return 0
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
