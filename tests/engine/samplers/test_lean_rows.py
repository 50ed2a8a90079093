"""The lean call's deferred logits (issue 24 §2): a pipelined call computes the output head only
for the rows it verifies now; a proposal row's logits come later from its state
(`oracle.head_logits`). They must be the logits a full call gives for that row, with the same
special-token and word-start rules, or the next round would draft from something else."""

from __future__ import annotations

import pytest
import torch

from engine.loading.precision import bf16_available
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


def test_an_oracle_whose_extra_rows_are_free_returns_them_and_the_samplers_read_them(tiny_asarm):
    """Where a call's extra rows cost nothing (bfloat16 on a CPU: `lean_heads` off) the oracle gives
    every row's logits whatever `logit_rows` asks, and pipelined ASSD and assd-ptp take their next
    rounds' rows from the call (`proposal_logits`) instead of a second output head: the same trace,
    draw for draw, and no late head at all."""
    from engine.samplers.assd import assd_pipelined
    from tests.support.rounds_model import recorder

    runs = {}
    for lean in (True, False):
        o = _oracle(tiny_asarm, True)
        o.lean_heads = lean
        late: list[int] = []

        def counted(states, positions, real=o.head_logits, late=late):
            late.append(len(positions))
            return real(states, positions)

        o.head_logits = counted
        steps = list(assd_pipelined(o, o.mi, recorder(o), torch.Generator().manual_seed(3), 1.0, 2))
        runs[lean] = ([(s.kind, s.positions, s.tokens, s.p, s.q) for s in steps], late, o.calls)
    (want, late_lean, calls), (got, late_full, calls_full) = runs[True], runs[False]
    assert late_lean and not late_full  # the lean oracle's rows came late; the other's never
    assert calls == calls_full
    for a, b in zip(want, got, strict=True):
        assert a[:3] == b[:3]
        assert a[3] == pytest.approx(b[3], abs=1e-12) and a[4] == pytest.approx(b[4], abs=1e-12)


def test_lean_heads_follow_the_models_cpu_precision(tiny_asarm):
    """fp32 (and any device but a bf16 CPU): the lean call; bf16: every row (its head costs the same)."""
    m = tiny_asarm.model
    assert _oracle(tiny_asarm, True).lean_heads is True
    try:
        m.set_cpu_precision("bf16")
        o = _oracle(tiny_asarm, True)
        assert o.lean_heads is False
        if bf16_available():  # the call itself needs oneDNN's bfloat16 kernels
            assert o.call([], [(4, 0), (5, 0)], states=True, logit_rows=1)[0].shape[0] == 2
    finally:
        m.set_cpu_precision("fp32")
    assert m.cpu_precision == "fp32"
