"""`bench calls --xlnet-base-random` times the calls it names: the cached oracle computes one content
row for a one-token call and the decided token plus k drafts for a verify, over a full cache, while
the uncached one recomputes the window (shapes only: timings are never asserted)."""

from __future__ import annotations

from lab.bench_xlnet import measure_calls, random_windows, xlnet_base_random


def test_the_timed_calls_have_the_shapes_they_are_named_for():
    res = measure_calls(length=12, reps=1, k=5, threads=(1,))
    rows = {(r["oracle"], r["call"]): tuple(r["rows"]) for r in res["rows"]}
    assert rows == {("uncached", "one-token call"): (12, 1), ("cached", "one-token call"): (1, 1),
                    ("uncached", "verify k = 5"): (12, 5), ("cached", "verify k = 5"): (6, 5)}
    assert res["kept_rows"] == 12 - 6 and res["params"] > 100e6, "XLNet-base's size, the cache nearly full"


def test_random_windows_decode_and_mask_what_they_say():
    lm = xlnet_base_random()
    (mi,) = random_windows(lm, 20, 0.5, 1, seed=3)
    assert len(mi.tokens) == 20 and len(mi.masked) == 10
    assert [i for a, b in mi.span_ranges for i in range(a, b)] == mi.masked
    text, spans = mi.fill(lm.codec, {p: lm.codec.encode("x")[0] for p in mi.masked})
    assert text.count("x") >= 10 and len(spans) == len(mi.span_ranges)
