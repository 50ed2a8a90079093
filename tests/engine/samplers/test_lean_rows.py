"""The lean call's deferred logits (issue 24 §2): a pipelined call computes the output head only
for the rows it verifies now; a proposal row's logits come later from its state
(`oracle.head_logits`). They must be the logits a full call gives for that row, with the same
special-token and word-start rules, or the next round would draft from something else."""

from __future__ import annotations

import torch

from engine.samplers.oracle import AsArmOracle
from tests.support.tiny import masked_input


def _oracle(lm, cache: bool) -> AsArmOracle:
    mi = masked_input(lm.codec, {0: "a", 3: "b"}, 6)
    return AsArmOracle(lm.model, mi, use_cache=cache)


def test_deferred_rows_equal_a_full_call(tiny_asarm):
    for cache in (False, True):
        full, lean = _oracle(tiny_asarm, cache), _oracle(tiny_asarm, cache)
        for o in (full, lean):
            o.commit(1, 5)  # 'b'
        drafts = [(2, 6), (4, 4)]
        queries = [(2, 0), (4, 1), (4, 0), (5, 0), (5, 1), (5, 2)]
        want = full.call(drafts, queries)
        now, states = lean.call(drafts, queries, states=True, logit_rows=2)
        assert now.shape[0] == 2 and states.shape[0] == len(queries)
        assert torch.allclose(now, want[:2], atol=1e-12)
        later = lean.head_logits(states[2:], [p for p, _ in queries[2:]])
        assert later.dtype == torch.float64
        assert torch.allclose(later, want[2:], atol=1e-12)
        assert torch.isneginf(later[:, full.special]).all(), "special tokens stay impossible in a deferred row"


def test_deferred_rows_keep_the_word_start_rule(tiny_asarm):
    o = _oracle(tiny_asarm, True)
    o.mi.word_starts = [5]
    o.mi.not_word_start = torch.zeros(o.special.shape[0], dtype=torch.bool)
    o.mi.not_word_start[6] = True
    _, states = o.call([], [(4, 0), (5, 0)], states=True, logit_rows=0)
    rows = o.head_logits(states, [4, 5])
    assert torch.isneginf(rows[1, 6]) and not torch.isneginf(rows[0, 6])
