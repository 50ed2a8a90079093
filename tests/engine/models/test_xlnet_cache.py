"""The cached XLNet forward (engine/models/xlnet_cache.py) gives the uncached call's probabilities to float
rounding, on tiny random XLNets of several depths, head counts and window lengths, through runs of calls
with accepted drafts (rows kept), rejected drafts (rows dropped) and a window with nothing visible; and a
question the uncached forward cannot ask (a drafted position asked again with fewer drafts seen, what
pipelined ASSD asks) equals the paper's conditioning (tests/support/xlnet_reference.py)."""

from __future__ import annotations

import pytest
import torch

from engine.models.xlnet_cache import XLNetKV
from engine.samplers.oracle import XLNetOracle
from tests.engine.models.test_xlnet_reference import random_xlnet
from tests.support.tiny import masked_input, tiny_codec
from tests.support.xlnet_reference import reference_rows


def run_pair(model, codec, mi, k: int, seed: int) -> tuple[float, list[tuple[int, int]]]:
    """Drive an uncached and a cached oracle through the same ASSD-like calls; the largest probability
    difference and the cached oracle's (content rows, query rows) per call."""
    plain = XLNetOracle(model=model, mi=mi, codec=codec)
    cached = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=True)
    gen = torch.Generator().manual_seed(seed)
    order, worst, rnd = list(mi.masked), 0.0, 0
    syms = codec.encode("abc")
    while order:
        drafts = [(p, syms[int(torch.randint(3, (1,), generator=gen))]) for p in order[:k]]
        queries = [(p, e) for e, (p, _) in enumerate(drafts)]
        for d, q in (([], [(p, 0) for p in order]), (drafts, queries)):
            a, b = torch.softmax(plain.call(d, q), -1), torch.softmax(cached.call(d, q), -1)
            worst = max(worst, float((a - b).abs().max()))
        accept = int(torch.randint(len(drafts) + 1, (1,), generator=gen))
        decided = drafts[:accept]
        if accept < len(drafts):  # a rejection: the next token is not the draft
            p, t = drafts[accept]
            decided.append((p, syms[(syms.index(t) + 1) % 3]))
        for p, t in decided:
            plain.commit(p, t)
            cached.commit(p, t)
            order.remove(p)
        rnd += 1
    return worst, cached.shapes


@pytest.mark.parametrize("n_layer,n_head,length", [(1, 1, 4), (2, 2, 7), (3, 4, 12), (4, 3, 20)])
def test_cached_equals_uncached_to_float_rounding(n_layer, n_head, length):
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=n_layer, n_layer=n_layer, n_head=n_head)
    for visible in ({0: "a", length - 1: "c"}, {length // 2: "b"}, {}):
        mi = masked_input(codec, visible, length)
        for k in (1, 3):
            worst, shapes = run_pair(model, codec, mi, k, seed=length + k)
            assert worst < 1e-5, (visible, k, worst)
            assert max(c for c, _ in shapes[1:]) <= 2 * k + 1, "a cached call computes only its new rows"


def test_kept_draft_rows_are_reused_and_rejected_ones_dropped():
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=2)
    mi = masked_input(codec, {0: "a"}, 6)
    a, b = codec.encode("ab")
    o = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=True)
    o.call([(1, a), (2, b)], [(1, 0), (2, 1)])
    assert o.cache.kept == 1  # the prompt; the two drafts sit after it
    o.commit(1, a)
    o.commit(2, a)  # the second draft rejected: its row must not be kept
    assert o.cache.kept == 2 and o.valid == 1
    o.call([], [(3, 0)])
    assert o.shapes[-1] == (1, 1) and o.cache.kept == 3, "only the decided token whose row was dropped"


def test_a_second_question_of_a_drafted_position_equals_the_papers_conditioning():
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=4, n_layer=3)
    mi = masked_input(codec, {0: "a", 6: "b"}, 7)
    syms = codec.encode("abc")
    o = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=True)
    o.commit(1, syms[2])
    drafts = [(2, syms[1]), (3, syms[0]), (4, syms[2])]
    queries = [(2, 0), (3, 1), (4, 2), (3, 0), (4, 0), (4, 1), (5, 1)]  # positions 3 and 4 asked twice
    got = torch.softmax(o.call(drafts, queries), -1)
    want = reference_rows(model, mi.tokens, mi.visible, codec.mask_id, codec.bos_id, [(1, syms[2])], drafts,
                          queries, set(codec.special_ids))
    assert float((got - want).abs().max()) < 1e-5
    assert float((got[1] - got[3]).abs().max()) > 1e-3, "the two questions of position 3 differ"


def test_the_cache_refuses_what_it_does_not_cover():
    from transformers import XLNetConfig, XLNetLMHeadModel

    from engine.errors import IncompatibleModelsError

    model = XLNetLMHeadModel(XLNetConfig(vocab_size=7, d_model=8, n_layer=1, n_head=2, d_inner=8, bi_data=True))
    with pytest.raises(IncompatibleModelsError, match="bi_data"):
        XLNetKV(model, 4, 4)
