"""The lean call's deferred logits (issue 24 §2): a pipelined call computes the output head only
for the rows it verifies now; a proposal row's logits come later from its state
(`oracle.head_logits`). They must be the logits a full call gives for that row, with the same
special-token and word-start rules, or the next round would draft from something else."""

from __future__ import annotations

import copy

import pytest
import torch

from engine.loading.precision import bf16_available
from engine.samplers.oracle import AsArmOracle
from engine.trace import StepKind
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


def test_an_oracle_whose_extra_rows_are_free_returns_them_and_pipelined_assd_reads_them(tiny_asarm):
    """Where a call's extra rows cost nothing (bfloat16 on a CPU: `lean_calls` off) the oracle gives
    every row's logits whatever `logit_rows` asks, and pipelined ASSD takes its next rounds' rows
    from the call (`next_round_logits`) instead of a second output head: the same trace, draw for
    draw, and no late head at all (assd-ptp: tests/engine/samplers/test_ptp_rules.py). Over these
    seeds rounds stop at every kind of place, a rejection among them."""
    from engine.samplers.assd import assd_pipelined
    from tests.support.rounds_model import recorder

    kinds = set()
    for seed in range(4):
        runs = {}
        for lean in (True, False):
            o = _oracle(tiny_asarm, True)
            o.lean_calls = lean
            late: list[int] = []

            def counted(states, positions, real=o.head_logits, late=late):
                late.append(len(positions))
                return real(states, positions)

            o.head_logits = counted
            steps = list(assd_pipelined(o, o.mi, recorder(o), torch.Generator().manual_seed(seed), 1.0, 2))
            runs[lean] = ([(s.kind, s.positions, s.tokens, s.p, s.q) for s in steps], late, o.calls)
        (want, late_lean, calls), (got, late_full, calls_full) = runs[True], runs[False]
        assert late_lean and not late_full  # the lean oracle's rows came late; the other's never
        assert calls == calls_full
        for a, b in zip(want, got, strict=True):
            assert a[:3] == b[:3]
            assert a[3] == pytest.approx(b[3], abs=1e-12) and a[4] == pytest.approx(b[4], abs=1e-12)
        kinds |= {a[0] for a in want}
    assert {StepKind.REJECT, StepKind.RESAMPLE, StepKind.ACCEPT} <= kinds  # rounds stopped early and ran through


def test_lean_calls_follow_the_models_cpu_precision(tiny_asarm):
    """fp32 (and any device but a bf16 CPU): the lean call; bf16: every row, each row's logits the
    bits its late output head gives (on a CPU with oneDNN's bfloat16: a float32 copy of the model)."""
    assert _oracle(tiny_asarm, True).lean_calls is True
    m32 = copy.deepcopy(tiny_asarm.model).float()
    m32.set_cpu_precision("bf16")
    mi = masked_input(tiny_asarm.codec, {0: "a", 3: "b"}, 6)
    o = AsArmOracle(m32, mi, use_cache=True)
    assert o.lean_calls is False
    if bf16_available():  # the call itself needs oneDNN's bfloat16 kernels
        queries = [(1, 0), (2, 0), (4, 0), (5, 0)]
        rows, states = o.call([], queries, states=True, logit_rows=1)
        assert rows.shape[0] == len(queries)
        assert torch.equal(rows[1:], o.head_logits(states[1:], [p for p, _ in queries[1:]]))
