"""ASSD with a Parallel Token Prediction drafter (`assd-ptp`): k dependent drafts per AS-ARM call.

Shape of a round (the pipelined sampler's, docs/DESIGN.md §3.4): the previous call returned, for the next
k masked positions in lattice order, the AS-ARM's parallel rows (logits + normed query states).
The PTP head (engine/models/ptp.py) turns them into dependent drafts left to right:
p_j = softmax(asarm_j + head_j(states, d_<j)) and d_j = F^-1_{p_j}(u_j), so each draft is a
function of the context and u_1..u_j only. A one-pass head (config.mode "onepass") draws
u_1..u_m first and computes every p_j in one pass from u_<j (`row_inputs` says what row j reads),
plus, with prev_rank, a low-rank logit term on d_{j-1}; then d_j = F^-1_{p_j}(u_j) row by row.
One AS-ARM call then gives the exact rows
q_j = p(. | decided, d_<j) for every draft, plus the parallel rows of every possible next round.
The drafts are verified left to right by the shared speculative rule (engine.samplers.acceptance), as
every speculative sampler here is.

Exactness, whatever the head computes (trained, untrained or random): the proposal p_j is fixed
by the context and the earlier drafts d_<j (i.e. by u_<j) before the acceptance randomness of
row j is drawn, and d_j ~ p_j given all that. Conditional on any accepted prefix, row j's
outcome (d_j accepted with probability min(1, q_j/p_j), otherwise a draw from the residual
norm(max(q_j - p_j, 0))) is distributed exactly as q_j, the AS-ARM's conditional given that
prefix; that is ASSD's Theorem 2 with a proposal that may depend on earlier drafts. The first
row of a round that follows a fully accepted round is the AS-ARM's exact row (nothing missing
from its context), so its draft is kept without a test, as in pipelined ASSD. A head that let
row j see u_j' for j' > j (or later drafts) would break this, which is why its attention is causal.

Calls: one AS-ARM call per round (the head's passes run on the host after the call and are not
counted as AS-ARM calls: k steps plus a window pass for a draft-mode head, one pass for a one-pass
head; `drafter_passes` counts them, and wall-clock ratios in `python -m engine bench assd` include them).
The AS-ARM's states come from the oracle (`call(..., states=True)`), not from a forward hook.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import (
    cdf_index,
    draw_host,
    host_row,
    sample_categorical,
    tempered_probs,
    tempered_weights,
    uniforms,
)

from ..errors import IncompatibleModelsError
from ..models.ptp_int8 import drafting_head
from ..trace import Step, StepKind
from .assd import commit_exact, next_round_logits, pipelined_queries, remember_decided, verify
from .base import Recorder
from .drafter_contract import SecondModel
from .spec import SamplerSpec


def _call(oracle, drafts, queries, logit_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One AS-ARM call that also returns the normed query states the head reads (the oracle offers
    them); with `logit_rows`, logits of the verified rows at least (the lean call: the next round's
    rows get theirs from `oracle.head_logits` once the stopping point is known, unless the oracle
    gave every row's because its extra rows cost nothing)."""
    return oracle.call(drafts, queries, states=True, logit_rows=logit_rows)


def draft_round(head, states: torch.Tensor, base: torch.Tensor, positions: list[int], prev: int, exact_first: bool,
                gen: torch.Generator, temperature: float, special: torch.Tensor,
                window: tuple[list[int], list[int]] | None = None,
                passes: list[int] | None = None) -> tuple[list[int], list[torch.Tensor]]:
    """Dependent drafts for `positions`: row j reads the window ((tokens, model positions) of the
    known tokens just left of the round, when the head has one), the parallel states of rows <= j and the drafts before it; its
    token is the inverse CDF of p_j at a fresh uniform u_j. `passes[0]` counts the head's forward
    passes (the window pass and one step per row: k + 1 a round today)."""
    with torch.no_grad():  # a block, not a decorator: mutmut mutates no decorated function
        m = len(positions)
        dev = states.device
        pos = torch.tensor([[p + 1 for p in positions]], device=dev)
        hid = states[None, :m].to(head.norm.weight.dtype)
        cache: list = []  # the head's K/V of the window and of rows < j (causal: they never change)
        if window:
            head.start(torch.tensor([window[0]], device=dev), torch.tensor([window[1]], device=dev), cache)
            if passes is not None:
                passes[0] += 1
        drafts: list[int] = []
        rows: list[torch.Tensor] = []
        for j in range(m):
            before = prev if j == 0 else drafts[-1]
            resid = head.step(hid[:, j : j + 1], torch.tensor([[before]], device=dev), pos[:, j : j + 1], cache)[0, 0]
            if passes is not None:
                passes[0] += 1
            if j == 0 and exact_first:
                row = base[0]  # the AS-ARM's exact row (the head still reads row 1 for the rows after it)
            else:
                row = (base[j] + resid.to(torch.float64)).masked_fill(special, float("-inf"))
            p = tempered_probs(row, temperature)  # p_j, fixed by the context and d_<j (i.e. by u_<j)
            tok = sample_categorical(p, gen)  # d_j = F^-1_{p_j}(u_j)
            drafts.append(tok)
            rows.append(p)
        return drafts, rows


def row_inputs(logits: np.ndarray, u: list[float], prev: int, temperature: float) -> tuple[list[int], list[float]]:
    """What each row of the one-pass head reads of the round's uniforms: row j gets u_{j-1} and
    e_{j-1} = F^-1 of the AS-ARM parallel row j-1 at u_{j-1} (a distribution fixed before the
    round, `logits` [>= m - 1, V] float64 NumPy; training's teacher_forced_uniforms draws the same);
    row 1 gets the last decided token and u = 0. Never u_j or later: that is the whole exactness
    argument (tests/engine/samplers/test_ptp.py replaces this function by one that leaks u_j and
    watches the enumeration test fail)."""
    e = [cdf_index(tempered_weights(logits[j], temperature), u[j])[0] for j in range(len(u) - 1)]
    return [prev, *e], [0.0, *u[:-1]]


def draft_round_onepass(head, states: torch.Tensor, base: torch.Tensor, positions: list[int], prev: int,
                        exact_first: bool, gen: torch.Generator, temperature: float, special: torch.Tensor,
                        window: tuple[list[int], list[int]] | None = None,
                        passes: list[int] | None = None) -> tuple[list[int], list[np.ndarray]]:
    """Drafts for `positions` from ONE pass of a one-pass head: u_1..u_m are drawn first, every
    row's proposal p_j comes from the same pass (plus, with prev_rank, a low-rank logit term on the
    real d_{j-1}: a lookup and a small matvec), and d_j = F^-1_{p_j}(u_j). `passes[0]` grows by 1.
    After the pass the rows are float64 NumPy numbers: each row's softmax and inverse CDF are a few
    NumPy calls instead of a few torch calls of 20-80 us each inside a run (docs/DESIGN.md §7.1).
    `special` is not read (it is draft_round's argument): `base` comes from the oracle with those ids at -inf."""
    with torch.no_grad():  # a block, not a decorator: mutmut mutates no decorated function
        m = len(positions)
        dev = states.device
        u = uniforms(gen, m)  # u_1..u_m, before anything reads them
        logits = host_row(base[:m])  # the AS-ARM's parallel rows (special ids at -inf: oracle_rows)
        e_prev, u_prev = row_inputs(logits, u, prev, temperature)
        pos = torch.tensor([[p + 1 for p in positions]], device=dev)
        win = None
        if window:
            win = (torch.tensor([window[0]], device=dev), torch.tensor([window[1]], device=dev))
        resid, gate = head.draft_pass(states[None, :m], torch.tensor([e_prev], device=dev),
                                      torch.tensor([u_prev], dtype=torch.float64, device=dev), pos, win)
        if passes is not None:
            passes[0] += 1
        # every row's logits but the low-rank term on d_{j-1}, in one batch: asarm_j + head_j (a head
        # without its output layer adds nothing here); a finite residual keeps the special ids at -inf
        rows_logits = logits if resid is None else logits + host_row(resid[0])
        gates = None if gate is None else gate[0]  # what the head's prev_term reads (torch or NumPy, its own)
        drafts: list[int] = []
        rows: list[np.ndarray] = []
        for j in range(m):
            if j == 0 and exact_first:
                x = logits[0]  # the AS-ARM's exact row
            else:
                x = rows_logits[j]
                if gates is not None:  # + the low-rank term on the real previous draft, known only now
                    x = x + host_row(head.prev_term(gates[j], prev if j == 0 else drafts[-1]))
            tok, p = draw_host(x, u[j], temperature)  # d_j = F^-1_{p_j}(u_j); p_j fixed by u_<j
            drafts.append(tok)
            rows.append(p)
        return drafts, rows


def known_window(mi: MaskedInput, known: list[int | None], model_positions: list[int], bos: int) -> list[int]:
    """The tokens at the window's model positions (the head's `window_at`; 0 is BOS): visible or
    decided, all known in lattice order."""
    out = []
    for model_pos in model_positions:
        i = model_pos - 1  # model position 0 is BOS
        tok = bos if i < 0 else (known[i] if known[i] is not None else mi.tokens[i])
        if tok == mi.mask_id:  # cannot happen in lattice order; drafting from [MASK] would be silent nonsense
            raise AssertionError(f"position {i} left of a round is not decided yet")
        out.append(tok)
    return out


def check_pair(lm, draft_lm) -> None:
    """The head reads the AS-ARM's states and adds to its logits: widths and vocabularies must match."""
    if draft_lm.kind != "ptp":
        raise IncompatibleModelsError(
            f"--draft-model {draft_lm.name} is a {draft_lm.kind} model; assd-ptp drafts with a PTP head "
            "(python -m engine train --kind ptp --teacher ...).")
    if lm.model_type != "asarm":
        raise IncompatibleModelsError(f"assd-ptp needs a native AS-ARM; {lm.name} is a {lm.model_type} model.")
    hc, tc = draft_lm.model.config, lm.model.config
    if hc.hidden_size != tc.hidden_size or lm.codec.vocab != draft_lm.codec.vocab:
        raise IncompatibleModelsError(
            f"PTP head {draft_lm.name} (width {hc.hidden_size}, {draft_lm.codec.vocab_size} tokens) does not fit "
            f"{lm.name} (width {tc.hidden_size}, {lm.codec.vocab_size} tokens); it was distilled from "
            f"{hc.teacher or 'another AS-ARM'}.")


def assd_ptp(
    oracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, k: int, head,
    teacher_note: str = "", passes: list[int] | None = None, seconds: list[float] | None = None,
) -> Iterator[Step]:
    """Pipelined ASSD whose k drafts come from the PTP head (dependent, one AS-ARM call per round),
    verified by the shared speculative test: exact whatever the head drafts (docs/DESIGN.md §7).
    `passes[0]` counts the head's forward passes, `seconds[0]` the wall seconds of its drafting."""
    order, n, rnd = mi.masked, 0, 0
    big_n = len(order)
    special = oracle.special
    known: list[int | None] = [None] * len(mi.tokens)
    positions = order[:k]
    base, states = _call(oracle, [], [(pos, 0) for pos in positions])
    yield rec(StepKind.DRAFT_PASS, rnd, note=f"parallel rows for {len(positions)} positions{teacher_note}")
    exact_first, prev = True, oracle.bos
    while positions:
        m = len(positions)
        window = None
        if head.config.window:
            wpos = head.window_at(positions[0] + 1)
            window = (known_window(mi, known, wpos, oracle.bos), wpos)
        draw = draft_round_onepass if getattr(head.config, "mode", "draft") == "onepass" else draft_round
        t0 = time.perf_counter()
        drafts, p_rows = draw(head, states, base, positions, prev, exact_first, gen, temperature, special,
                              window=window, passes=passes)
        if seconds is not None:
            seconds[0] += time.perf_counter() - t0
        how = "u_1..u_j-1 (one pass)" if draw is draft_round_onepass else "drafts 1..j-1"
        yield rec(StepKind.DRAFT, rnd, positions, drafts, [float(p_rows[i][d]) for i, d in enumerate(drafts)],
                  note=f"PTP head: draft j drawn by inverse CDF at u_j, conditioned on {how}")
        start = 0
        if exact_first:
            known[positions[0]] = drafts[0]
            yield commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(p_rows[0][drafts[0]]), "exact row")
            start = 1
            if n + 1 == big_n:
                break
        queries, next_rows = pipelined_queries(order, n, positions, start, k)
        out, out_states = _call(oracle, list(zip(positions, drafts))[start:], queries, logit_rows=m - start)
        yield rec(StepKind.DENSITY_PASS, rnd, note=f"verify {m - start} dependent drafts, parallel rows for next round")
        q_all = host_row(tempered_probs(out[: m - start], temperature))  # every verified row's q_j in one batch
        q_rows = {i: q_all[i - start] for i in range(start, m)}
        j = yield from remember_decided(verify(oracle, rec, rnd, positions, drafts, p_rows, q_rows, gen, start=start), known)
        prev = known[positions[j]] if j < m else drafts[-1]  # the last decided token in lattice order
        n += j + 1 if j < m else m
        positions, at = next_rows[j]
        states = out_states[at : at + len(positions)]
        base = next_round_logits(oracle, out, out_states, at, positions)
        exact_first = j == m
        rnd += 1


#: draft with the head's CpuDrafter on a CPU (int8 output and block layers, float32 input layer and low-rank
#: term, few operations; engine/models/ptp_int8.py): exact either way; bench assd on the same inputs decides
#: (set False to measure the float32 head beside it)
INT8_ON_CPU = True


def run_ptp(ctx, *, k: int, temperature: float) -> Iterator[Step]:
    """Catalogue entry: the AS-ARM of the run verifies, ctx.draft_lm (a PTP head) drafts (on a CPU with
    its CpuDrafter, INT8_ON_CPU)."""
    if ctx.draft_lm is None:
        raise IncompatibleModelsError("assd-ptp needs a PTP drafter (--draft-model).")
    check_pair(ctx.lm, ctx.draft_lm)
    teacher = ctx.draft_lm.model.config.teacher
    note = f"; PTP head {ctx.draft_lm.name}" + (f" (distilled from {teacher})" if teacher else "")
    if teacher and teacher != ctx.lm.name:
        note += f", verifying with {ctx.lm.name}: still exact, drafts may be accepted less often"
    head = drafting_head(ctx.draft_lm.model, int8=INT8_ON_CPU)
    return assd_ptp(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k, head, note,
                    ctx.drafter_passes, ctx.drafter_seconds)


#: the catalogue's entry (engine.samplers.SAMPLERS)
SPEC = SamplerSpec(
    name="assd-ptp", kind="asarm", cache=True,
    help="Parallel Token Prediction drafts: a small head distilled from the AS-ARM turns one call's "
    "parallel rows into k dependent drafts in one pass (draft j sees the uniforms, and so the "
    "drafts, before it); the next call verifies them and proposes the next round. Exact. Needs "
    "a PTP drafter (text-ptp1, code-ptp).",
    run=run_ptp, second=SecondModel("ptp", check_pair, "python -m engine train --kind ptp --teacher {model} ..."))
