"""The ASSD paper's model size without the download: an XLNet-base sized XLNetLMHeadModel with random
weights (xlnet/xlnet-base-cased's shape: 12 layers, d_model 768, 12 heads, d_inner 3072, vocabulary
32,000), and what one call of it costs uncached and cached (`bench calls --xlnet-base-random`), or
what a run costs (`bench assd --xlnet-base-random`).

Calls are timed side by side: every repetition times each (thread count, oracle, shape) once, in
turn, so a change of machine load hits them alike; CPU time of the process beside wall time.
Random weights give the paper checkpoint's cost, not its fills. Never asserted in tests.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from engine.inputs.masking import MaskedInput
from engine.inputs.tokenization import Codec, char_tokenizer
from engine.loading.loaded_model import LoadedModel
from engine.samplers.oracle import XLNetOracle

VOCAB = 32000


def xlnet_base_random(seed: int = 0) -> LoadedModel:
    """A random XLNet-base as a loaded model: a character tokenizer of exactly VOCAB ids (ASCII,
    then CJK characters), so every id the model may sample decodes."""
    from transformers import XLNetConfig, XLNetLMHeadModel

    torch.manual_seed(seed)
    cfg = XLNetConfig(vocab_size=VOCAB, d_model=768, n_layer=12, n_head=12, d_inner=3072)  # xlnet-base-cased
    model = XLNetLMHeadModel(cfg).eval()
    ascii_ = [chr(c) for c in range(33, 127)]
    alphabet = "".join(ascii_ + [chr(0x4E00 + i) for i in range(VOCAB - 4 - len(ascii_))])
    codec = Codec(char_tokenizer(alphabet))
    assert codec.vocab_size == VOCAB
    return LoadedModel(name="random XLNet-base", path=Path("random-xlnet-base"), kind="asarm",
                       model_type="xlnet", domain="text", model=model, codec=codec, max_tokens=512)


def random_windows(lm: LoadedModel, length: int, mask_rate: float, samples: int, seed: int) -> list[MaskedInput]:
    """Windows of random ids with `mask_rate` of them masked at random (the ids do not matter to cost)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(samples):
        ids = torch.randint(100, VOCAB, (length,), generator=g).tolist()
        masked = sorted(torch.randperm(length, generator=g)[: max(1, round(mask_rate * length))].tolist())
        hidden = set(masked)
        ranges: list[tuple[int, int]] = []
        for i in masked:
            ranges[-1:] = [(ranges[-1][0], i + 1)] if ranges and ranges[-1][1] == i else ranges[-1:] + [(i, i + 1)]
        cuts = [0] + [x for a, b in ranges for x in (a, b)] + [length]
        pieces = [lm.codec.decode(ids[cuts[j]:cuts[j + 1]]) for j in range(0, len(cuts), 2)]
        out.append(MaskedInput(tokens=[lm.codec.mask_id if i in hidden else t for i, t in enumerate(ids)], masked=masked,
                               pieces=pieces, span_ranges=ranges, mask_id=lm.codec.mask_id))
    return out


def _states(lm: LoadedModel, mi: MaskedInput, k: int):
    """(name, make oracle, drafts, queries) of each timed call: the window with all but the last
    k + 1 masked tokens decided (a run near its end: about `length` kept rows); cached oracles are
    filled before the clock starts and then asked the call a sequential step or an ASSD verify asks."""
    ids = torch.randint(100, VOCAB, (len(mi.tokens),), generator=torch.Generator().manual_seed(1)).tolist()
    decided = [(p, ids[p]) for p in mi.masked[: -(k + 1)]]
    rest = mi.masked[-(k + 1):]
    one = ([], [(rest[0], 0)])
    verify = ([(p, ids[p]) for p in rest[:k]], [(p, e) for e, p in enumerate(rest[:k])])

    def make(cache: bool):
        def build():
            o = XLNetOracle(model=lm.model, mi=mi, codec=lm.codec, use_cache=cache)
            for p, t in decided[:-1]:
                o.commit(p, t)
            if cache:  # the kept rows, filled before the clock starts
                o.call([], [(decided[-1][0], 0)])
            o.commit(*decided[-1])  # decided since: a cached call computes its row
            return o
        return build

    return [("uncached", "one-token call", make(False), *one), ("cached", "one-token call", make(True), *one),
            ("uncached", f"verify k = {k}", make(False), *verify), ("cached", f"verify k = {k}", make(True), *verify)]


def measure_calls(length: int, reps: int, k: int = 5, threads: tuple[int, ...] = (1, 2),
                  mask_rate: float = 0.95) -> dict:
    """Median CPU and wall ms of each call, uncached and cached, per thread count, interleaved."""
    lm = xlnet_base_random()
    mi = random_windows(lm, length, mask_rate, 1, 0)[0]
    cells = _states(lm, mi, k)
    cpu: dict[tuple, list[float]] = {}
    wall: dict[tuple, list[float]] = {}
    shapes: dict[tuple, tuple[int, int]] = {}
    for rep in range(reps + 1):
        for n in threads:
            torch.set_num_threads(n)
            for oracle, call, build, drafts, queries in cells:
                o = build()
                w0, c0 = time.perf_counter(), time.process_time()
                o.call(drafts, queries)
                c, w = time.process_time() - c0, time.perf_counter() - w0
                key = (n, oracle, call)
                shapes[key] = o.shapes[-1]
                if rep >= 1:  # one warm-up round
                    cpu.setdefault(key, []).append(c)
                    wall.setdefault(key, []).append(w)
    rows = []
    for (n, oracle, call), ws in wall.items():
        base = statistics.median(wall[(n, "uncached", call)])
        rows.append({"threads": n, "oracle": oracle, "call": call, "rows": list(shapes[(n, oracle, call)]),
                     "cpu_ms_median": 1000 * statistics.median(cpu[(n, oracle, call)]),
                     "wall_ms_median": 1000 * statistics.median(ws), "wall_ms_min": 1000 * min(ws),
                     "uncached_over_this": base / statistics.median(ws)})
    return {"model": "random XLNet-base (xlnet-base-cased's shape)",
            "params": sum(p.numel() for p in lm.model.parameters()), "window_tokens": length,
            "masked": len(mi.masked), "kept_rows": len(mi.visible) + len(mi.masked) - k - 1, "reps": reps, "rows": rows}


def print_calls(res: dict) -> None:
    """measure_calls' result as the plain-text table `bench calls --xlnet-base-random` prints."""
    print(f"{res['model']}: {res['params'] / 1e6:.0f}M parameters, window {res['window_tokens']} tokens "
          f"({res['masked']} masked, {res['kept_rows']} rows kept by the cache), repetitions {res['reps']}")
    print(f"{'threads':>7}  {'call':<16}{'oracle':<10}{'rows (content, query)':>22}{'CPU ms':>10}{'wall ms':>10}"
          f"{'fastest':>9}{'uncached / this':>17}")
    for r in res["rows"]:
        print(f"{r['threads']:>7}  {r['call']:<16}{r['oracle']:<10}{str(tuple(r['rows'])):>22}"
              f"{r['cpu_ms_median']:>10.1f}{r['wall_ms_median']:>10.1f}{r['wall_ms_min']:>9.1f}"
              f"{r['uncached_over_this']:>16.1f}x")
    print("medians over the repetitions (wall); all cells interleaved in each repetition.")
