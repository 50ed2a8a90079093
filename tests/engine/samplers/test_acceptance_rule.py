"""The acceptance routine checked number by number, against references written out here (not
computed by the code under test): every uniform is known before the call (a twin generator draws
the same stream), so each verdict, each residual draw and each refusal is predicted exactly.
Fast and deterministic: `make mutation` runs it for engine/samplers/acceptance.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from engine.errors import DistributionError
from engine.samplers import acceptance
from engine.samplers.acceptance import sample_categorical, speculative_accept, tempered_probs, uniform

F64 = torch.float64


def twins(seed: int) -> tuple[torch.Generator, torch.Generator]:
    return torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)


def next_u(twin: torch.Generator) -> float:
    return float(torch.rand((), generator=twin, dtype=F64))


def inverse_cdf(probs: list[float], u: float) -> int:
    """The reference draw: the first index whose cumulative mass exceeds u * total."""
    total, acc = sum(probs), 0.0
    for i, p in enumerate(probs):
        acc += p
        if p > 0 and u * total < acc:
            return i
    return max(i for i, p in enumerate(probs) if p > 0)


def test_tempered_probs_values():
    logits = torch.tensor([0.0, math.log(2.0), math.log(4.0), -math.inf], dtype=torch.float32)
    out = tempered_probs(logits, 1.0)
    assert out.dtype == F64
    assert torch.allclose(out, torch.tensor([1 / 7, 2 / 7, 4 / 7, 0.0], dtype=F64), atol=1e-7)
    assert float(out[3]) == 0.0
    half = tempered_probs(logits, 0.5)  # T = 0.5 squares the odds
    assert torch.allclose(half, torch.tensor([1 / 21, 4 / 21, 16 / 21, 0.0], dtype=F64), atol=1e-7)
    double = tempered_probs(logits, 2.0)  # T = 2 takes their square root
    assert torch.allclose(double, torch.tensor([1, 2**0.5, 2, 0.0], dtype=F64) / (3 + 2**0.5), atol=1e-7)
    # float64 all the way: a difference below float32's resolution survives
    tiny = tempered_probs(torch.tensor([0.0, 1e-12], dtype=F64), 1.0)
    assert float(tiny[1] - tiny[0]) > 0
    # rows are normalised along the last dimension
    rows = tempered_probs(torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], dtype=F64), 1.0)
    assert torch.allclose(rows, torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=F64))


def test_uniform_is_float64_from_the_run_generator():
    gen, twin = twins(7)
    torch.manual_seed(123)  # the global stream must not be the one used
    us = [uniform(gen) for _ in range(5)]
    ref = [float(torch.rand((), generator=twin, dtype=F64)) for _ in range(5)]
    assert us == ref
    assert len(set(us)) == 5 and all(0.0 <= u < 1.0 for u in us)
    # float64: not representable in float32
    assert any(float(torch.tensor(u, dtype=torch.float32)) != u for u in us)


@pytest.mark.parametrize("probs", [[0.2, 0.0, 0.5, 0.3], [0.0, 1.0, 0.0], [3.0, 1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
def test_sample_categorical_is_the_inverse_cdf(probs):
    gen, twin = twins(3)
    for _ in range(60):
        tok = sample_categorical(torch.tensor(probs, dtype=torch.float32), gen)
        assert tok == inverse_cdf(probs, next_u(twin))
        assert probs[tok] > 0


@pytest.mark.parametrize("u,expected", [(0.0, 1), (0.25 - 1e-12, 1), (0.25, 3), (0.5, 3), (0.999999, 3), (1.0, 3)])
def test_sample_categorical_edges(monkeypatch, u, expected):
    """u on a cumulative boundary goes right; zero-mass entries are never drawn, at either end."""
    monkeypatch.setattr(acceptance, "uniform", lambda gen: u)
    assert sample_categorical(torch.tensor([0.0, 1.0, 0.0, 3.0, 0.0], dtype=F64), torch.Generator()) == expected


def test_sample_categorical_right_edge_of_zero_tail(monkeypatch):
    """searchsorted past the end (u * total == total) lands on the last entry with mass."""
    monkeypatch.setattr(acceptance, "uniform", lambda gen: 1.0)
    assert sample_categorical(torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=F64), torch.Generator()) == 1
    assert sample_categorical(torch.tensor([1.0, 0.0], dtype=F64), torch.Generator()) == 0


@pytest.mark.parametrize("row", [[0.0, 0.0], [float("nan"), 1.0], [float("inf"), 1.0], [-0.5, 1.0, 0.5], [0.5, -0.1, 0.0]])
def test_sample_categorical_refuses_bad_rows(row):
    with pytest.raises(DistributionError, match="Cannot sample"):
        sample_categorical(torch.tensor(row, dtype=F64), torch.Generator())


P = [0.5, 0.3, 0.2, 0.0]
Q = [0.2, 0.3, 0.1, 0.4]  # residual max(q - p, 0) = [0, 0, 0, 0.4]: a rejection always gives token 3
Q2 = [0.1, 0.5, 0.0, 0.4]  # residual [0, 0.2, 0, 0.4]: tokens 1 and 3, 1 : 2


@pytest.mark.parametrize("q", [Q, Q2])
def test_speculative_accept_predicted_exactly(q):
    p_t, q_t = torch.tensor(P, dtype=F64), torch.tensor(q, dtype=F64)
    residual = [max(b - a, 0.0) for a, b in zip(P, q)]
    gen, twin = twins(11)
    seen = {True: 0, False: 0}
    for n in range(300):
        draft = n % 3  # drafts with p > 0
        a = min(1.0, q[draft] / P[draft])
        v = speculative_accept(draft, p_t, q_t, gen)
        u = next_u(twin)
        assert v.accept_prob == pytest.approx(a, abs=1e-15)
        assert v.p_draft == P[draft] and v.q_draft == q[draft]
        if u < a:
            assert v.accepted is True and v.token == draft and v.q_token == q[draft]
        else:
            tok = inverse_cdf(residual, next_u(twin))
            assert v.accepted is False and v.token == tok and v.q_token == q[tok]
            assert residual[tok] > 0
        seen[v.accepted] += 1
    assert seen[True] > 20 and seen[False] > 20


def test_acceptance_threshold_is_strict(monkeypatch):
    """Accept iff u < min(1, q/p): u equal to the ratio rejects, just below accepts."""
    p_t, q_t = torch.tensor([0.5, 0.5], dtype=F64), torch.tensor([0.25, 0.75], dtype=F64)
    for u, accepted in ((0.5 - 1e-9, True), (0.5, False), (0.0, True), (0.999, False)):
        monkeypatch.setattr(acceptance, "uniform", lambda gen, u=u: u)
        v = speculative_accept(0, p_t, q_t, torch.Generator())
        assert v.accepted is accepted
        assert v.token == (0 if accepted else 1)
        assert v.accept_prob == 0.5
    # q/p above 1: always accepted, ratio capped at 1
    monkeypatch.setattr(acceptance, "uniform", lambda gen: 0.999999)
    v = speculative_accept(1, p_t, q_t, torch.Generator())
    assert v.accepted is True and v.accept_prob == 1.0 and v.q_token == 0.75


def test_output_law_is_q_whatever_p():
    """Summed over draft ~ p, the acceptance and the residual give exactly q (the rule itself)."""
    for p, q in ((P, Q), (P, Q2), ([0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1])):
        law = [0.0] * len(q)
        res = [max(b - a, 0.0) for a, b in zip(p, q)]
        for d, pd in enumerate(p):
            if pd == 0:
                continue
            a = min(1.0, q[d] / pd)
            law[d] += pd * a
            for t, r in enumerate(res):
                law[t] += pd * (1 - a) * r / sum(res)
        assert law == pytest.approx(q, abs=1e-12)


def test_equal_rows_never_reject_and_residual_falls_back_to_q(monkeypatch):
    q = torch.tensor([0.25, 0.75], dtype=F64)
    gen = torch.Generator().manual_seed(0)
    assert all(speculative_accept(d, q, q, gen).accepted for d in (0, 1) * 20)
    # rejection against a zero residual (only reachable through rounding): draw from q, not fail
    p = torch.tensor([0.25, 0.75], dtype=F64)
    q_low = torch.tensor([0.25, 0.75 - 2.0**-50], dtype=F64)  # q <= p everywhere: the residual is all zero
    for second, tok in ((0.1, 0), (0.8, 1)):
        draws = iter([1 - 2.0**-53, second])
        monkeypatch.setattr(acceptance, "uniform", lambda gen, draws=draws: next(draws))
        v = speculative_accept(1, p, q_low, torch.Generator())
        assert v.accepted is False and v.token == tok and v.q_token == float(q_low[tok])


@pytest.mark.parametrize(
    "draft,p,q,match",
    [
        (0, [0.0, 1.0], [0.5, 0.5], "proposal gives its own draft"),
        (0, [float("nan"), 1.0], [0.5, 0.5], "proposal gives its own draft"),
        (0, [float("inf"), 1.0], [0.5, 0.5], "proposal gives its own draft"),
        (0, [-0.5, 1.0], [0.5, 0.5], "proposal gives its own draft"),
        (0, [0.5, 0.5], [float("nan"), 0.5], "target row"),
        (0, [0.5, 0.5], [-0.1, 0.5], "target row"),
        (0, [0.5, 0.5], [float("inf"), 0.5], "target row"),
        (0, [0.5, 0.5], [0.5, float("inf")], "target row"),
    ],
)
def test_speculative_accept_refuses_broken_rows(draft, p, q, match):
    gen, twin = twins(0)
    with pytest.raises(DistributionError, match=match):
        speculative_accept(draft, torch.tensor(p, dtype=F64), torch.tensor(q, dtype=F64), gen)
    assert float(torch.rand((), generator=gen, dtype=F64)) == next_u(twin)  # refused before any draw


def test_speculative_accept_takes_float32_rows_in_float64():
    """float32 inputs are promoted: the ratio is computed in float64 from the promoted values."""
    p = torch.tensor([0.3, 0.7], dtype=torch.float32)
    q = torch.tensor([0.1, 0.9], dtype=torch.float32)
    v = speculative_accept(0, p, q, torch.Generator().manual_seed(1))
    assert v.p_draft == float(p.to(F64)[0]) and v.accept_prob == float(q.to(F64)[0]) / float(p.to(F64)[0])


def test_float32_rows_are_promoted_before_the_cdf(monkeypatch):
    """The cumulative sums are taken in float64: in float32 the 1e-9 entry vanishes from the cdf
    (1 + 1e-9 rounds to 1) and a u just inside it would land on the next entry."""
    probs = torch.tensor([1.0, 1e-9, 1.0], dtype=torch.float32)
    tiny = float(probs.to(F64)[1])
    monkeypatch.setattr(acceptance, "uniform", lambda gen: (1 + tiny / 2) / (2 + tiny))
    assert sample_categorical(probs, torch.Generator()) == 1


def test_residual_is_taken_in_float64(monkeypatch):
    """max(q - p, 0) in float64: 1 - 1e-9 is not 1 (float32 would round it and move the residual's cdf)."""
    p = torch.tensor([1.0, 1e-9, 0.0], dtype=torch.float32)
    q = torch.tensor([0.0, 1.0, 3.0], dtype=torch.float32)
    draws = iter([0.5, 0.2499999999])  # reject (q/p = 0), then u just above the float64 boundary
    monkeypatch.setattr(acceptance, "uniform", lambda gen: next(draws))
    v = speculative_accept(0, p, q, torch.Generator())
    assert v.accepted is False and v.token == 2


def test_uniforms_are_the_stream_of_single_uniforms():
    """One draw of n uniforms gives the numbers n calls of `uniform` give, in order, and moves the
    generator as far (a run that draws its round's uniforms at once replays as before)."""
    a, b = twins(11)
    got = acceptance.uniforms(a, 5)
    assert got == [next_u(b) for _ in range(5)]
    assert uniform(a) == next_u(b)
    assert acceptance.uniforms(a, 0) == []


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_draw_host_draws_from_the_tempered_softmax_with_zero_for_minus_infinity(temperature):
    logits = [0.0, math.log(2.0), math.log(4.0), -math.inf, 1.5]
    z = [x / temperature for x in logits]
    top = max(z)
    e = [math.exp(x - top) if x > -math.inf else 0.0 for x in z]
    want = [x / sum(e) for x in e]
    assert acceptance.tempered_weights(np.array(logits), temperature).tolist() == pytest.approx(e, rel=1e-12, abs=0)
    for u in (0.0, 0.1, 0.3, 0.5, 0.7, 0.95, 0.999999):
        tok, got = acceptance.draw_host(np.array(logits), u, temperature)
        assert got.dtype == np.float64
        assert got.tolist() == pytest.approx(want, rel=1e-12, abs=0)
        assert got[3] == 0.0
        assert tok == inverse_cdf(want, u)  # the token is the inverse CDF of the row returned


@pytest.mark.parametrize("row", [[-math.inf, -math.inf], [0.0, math.inf], [0.0, math.nan]])
def test_a_host_row_without_a_finite_largest_logit_is_refused(row):
    with pytest.raises(DistributionError, match="largest logit"):
        acceptance.draw_host(np.array(row), 0.5, 1.0)


def test_inverse_cdf_host_is_the_reference_draw():
    probs = [0.0, 0.25, 0.0, 0.5, 0.25]
    for u in (0.0, 0.2499, 0.25, 0.6, 0.75, 0.9999):
        assert acceptance.inverse_cdf_host(np.array(probs), u) == inverse_cdf(probs, u)


def test_draw_host_shifts_by_the_largest_logit_so_large_logits_stay_finite():
    """exp(x - max): logits of a thousand give the same row as logits near zero, not inf / inf."""
    tok, got = acceptance.draw_host(np.array([1000.0, 1000.0 + math.log(3.0), -math.inf]), 0.3, 1.0)
    assert got.tolist() == pytest.approx([0.25, 0.75, 0.0], rel=1e-12, abs=0) and tok == 1


def _whole_block_row(blocks: int, seed: int) -> np.ndarray:
    """Small whole numbers (every sum exact in float64, in any order) with zero entries, zero runs
    across block edges, whole zero blocks (first, inside, last) and a zero tail."""
    rng = np.random.default_rng(seed)
    w = rng.integers(0, 4, blocks * acceptance.CDF_BLOCK).astype(np.float64)
    w[rng.random(w.size) < 0.3] = 0.0
    b = acceptance.CDF_BLOCK
    if blocks > 5:
        w[:b] = 0.0  # the first block empty
        w[3 * b - 5 : 4 * b + 7] = 0.0  # a zero run across two block edges, a whole block inside
    if blocks > 2:
        w[-b - 3 :] = 0.0  # the last block empty and a tail before it
    w[b - 2 : b + 2] = 0.0  # a zero run across the first block edge
    return w


@pytest.mark.parametrize("blocks,seed", [(2, 0), (5, 1), (64, 2), (64, 3)])
def test_cdf_index_searches_whole_blocks_as_the_reference_draw(blocks, seed):
    """A row of whole blocks is searched block sums first (cdf_index): the same token as the
    reference for every u, on every cumulative edge (u * total exactly at an entry's or a block's
    edge goes right), just off each edge, at 0 and at the right end (the last entry with mass)."""
    w = _whole_block_row(blocks, seed)
    total = float(w.sum())
    edges = np.cumsum(w)
    us = {0.0, 1.0, 1 - 1e-16} | {float(c) / total for c in edges[:-1]}
    us |= {(float(c) - 0.5) / total for c in edges if c >= 0.5} | {(float(c) + 0.5) / total for c in edges[:-1]}
    ref = list(w)
    for u in sorted(x for x in us if 0.0 <= x <= 1.0):
        idx, got_total = acceptance.cdf_index(w, u)
        assert got_total == total
        assert idx == inverse_cdf(ref, u), u


@pytest.mark.parametrize("n", [acceptance.CDF_BLOCK, 3 * acceptance.CDF_BLOCK + 1, 7])
def test_cdf_index_of_other_lengths_is_the_reference_draw(n):
    """One block or a length that is not whole blocks: the plain cumulative sums, the same draws."""
    rng = np.random.default_rng(n)
    w = rng.integers(0, 3, n).astype(np.float64)
    w[0] = 1.0
    edges = np.cumsum(w)
    for u in [0.0, 0.999999, *(float(c) / edges[-1] for c in edges[:-1])]:
        assert acceptance.cdf_index(w, u) == (inverse_cdf(list(w), u), float(edges[-1]))


@pytest.mark.parametrize("row", [[0.0] * 128, [math.nan] + [1.0] * 127, [math.inf] + [1.0] * 127])
def test_cdf_index_refuses_rows_without_a_proper_total(row):
    with pytest.raises(DistributionError, match="total mass"):
        acceptance.cdf_index(np.array(row), 0.5)


@pytest.mark.parametrize("n,want", [(4096, [64, 64]), (128, [2, 64]), (64, [64]), (193, [193]), (7, [7])])
def test_only_a_row_of_two_or_more_whole_blocks_is_searched_block_by_block(monkeypatch, n, want):
    """The point of the blocks is not summing a long row one entry after another: a row of whole blocks
    cumsums its block sums and the one block u falls in; one block, or a length that is not whole blocks,
    the row itself (the draws are the same either way: the tests above)."""
    lengths = []
    real = np.cumsum

    def counted(a, *args, **kw):
        lengths.append(np.asarray(a).size)
        return real(a, *args, **kw)

    monkeypatch.setattr(acceptance.np, "cumsum", counted)
    acceptance.cdf_index(np.ones(n), 0.3)
    assert lengths == want


def test_a_float64_row_reaches_the_host_without_a_copy():
    """host_row of a float64 NumPy row is that row (assd-ptp's proposal rows go through it every test);
    a float32 row is promoted, as a tensor is."""
    row = np.array([0.25, 0.75])
    assert acceptance.host_row(row) is row
    low = np.array([0.25, 0.75], dtype=np.float32)
    assert acceptance.host_row(low).dtype == np.float64 and acceptance.host_row(low).tolist() == [0.25, 0.75]
