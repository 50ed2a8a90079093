"""Any-Subset Speculative Decoding (ASSD) and its variants.

Decode order sigma: the prompt first, then the masked positions left to right. All variants share
`verify`, which runs the speculative test of engine.samplers.acceptance along a round, so every variant is
exactly distributed as sequential decoding (the paper's Theorem 2) for any proposal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import Verdict, sample_categorical, speculative_accept, tempered_probs

from ..trace import DECIDING_KINDS, Step, StepKind
from .base import DensityOracle, Recorder
from .drafter_contract import Drafter
from .spec import SamplerSpec


def verify(
    oracle: DensityOracle,
    rec: Recorder,
    rnd: int,
    positions: list[int],
    drafts: list[int],
    p_rows: list[torch.Tensor],
    q_rows: dict[int, torch.Tensor],
    gen: torch.Generator,
    start: int = 0,
    accept: Callable[..., Verdict] | None = None,
) -> Generator[Step, None, int]:
    """Accept drafts[i] w.p. min(1, q_i/p_i) for i = start..; on the first rejection resample from
    the residual. Commits as it goes. Returns the index where the round stopped (len if none).
    `accept` replaces the test only for the deliberately wrong samplers of the exactness check
    (engine/exactness/wrong_samplers.py); None is speculative_accept, looked up when the round runs."""
    test = accept or speculative_accept
    for i in range(start, len(drafts)):
        v = test(drafts[i], p_rows[i], q_rows[i], gen)
        if v.accepted:
            oracle.commit(positions[i], drafts[i])
            yield rec(StepKind.ACCEPT, rnd, [positions[i]], [drafts[i]], [v.p_draft], [v.q_draft], tested=True)
            continue
        yield rec(
            StepKind.REJECT, rnd, [positions[i]], [drafts[i]], [v.p_draft], [v.q_draft],
            note=f"acceptance probability {v.accept_prob:.4f}", tested=True,
        )
        oracle.commit(positions[i], v.token)
        yield rec(StepKind.RESAMPLE, rnd, [positions[i]], [v.token], q=[v.q_token], note="residual max(q - p, 0)")
        return i
    return len(drafts)


def next_round_logits(oracle: DensityOracle, logits: torch.Tensor, states: torch.Tensor, at: int,
                    positions: list[int]) -> torch.Tensor:
    """The next round's parallel rows (pipelined ASSD's proposals, assd-ptp's AS-ARM rows), queries
    at..at+len(positions) of a call asked for `logit_rows`: from the call itself when the oracle gave
    those rows' logits too (its extra rows cost nothing), else their output head now, on those rows'
    states only."""
    if len(logits) >= at + len(positions):
        return logits[at : at + len(positions)]
    return oracle.head_logits(states[at : at + len(positions)], positions)


def commit_exact(
    oracle: DensityOracle, rec: Recorder, rnd: int, pos: int, tok: int, prob: float, why: str
) -> Step:
    """Commit a draft whose proposal row already saw every decided token: it *is* a target sample,
    so it is kept without a test (recorded as an untested ACCEPT, p = q). A round helper that every
    ASSD variant and assd-ptp share."""
    oracle.commit(pos, tok)
    return rec(StepKind.ACCEPT, rnd, [pos], [tok], [prob], [prob], note=why, tested=False)


def _bonus(oracle: DensityOracle, rec: Recorder, rnd: int, pos: int, q_row: torch.Tensor, gen: torch.Generator,
           exact_only: bool = False) -> Step:
    """Every draft passed: the density pass's extra row already saw them all, so it is the exact
    target of the next position, and sampling it gives one more token for free. With `exact_only`
    (a round without drafts) that row was the call's only one: a sequential step, a SAMPLE."""
    tok = sample_categorical(q_row, gen)
    oracle.commit(pos, tok)
    if exact_only:
        return rec(StepKind.SAMPLE, rnd, [pos], [tok], q=[float(q_row[tok])])
    return rec(StepKind.BONUS, rnd, [pos], [tok], q=[float(q_row[tok])], note="free exact row")


def assd(
    oracle: DensityOracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, k: int,
    bonus: bool = False, accept: Callable[..., Verdict] | None = None,
) -> Iterator[Step]:
    """The paper's Algorithm 1 (with `bonus`, the density pass also answers the next position;
    `accept`: see verify)."""
    order, n, rnd = mi.masked, 0, 0
    big_n = len(order)
    while n < big_n:
        t = min(n + k, big_n)
        positions = order[n:t]
        # 1. draft x~_i ~ p(. | decided) independently for the positions order[n..t-1]
        p = tempered_probs(oracle.call([], [(pos, 0) for pos in positions]), temperature)
        yield rec(StepKind.DRAFT_PASS, rnd, note=f"draft {len(positions)} positions in parallel")
        drafts = [sample_categorical(p[i], gen) for i in range(len(positions))]
        yield rec(StepKind.DRAFT, rnd, positions, drafts, [float(p[i][d]) for i, d in enumerate(drafts)])
        # the first draft saw the same context in both passes: always accepted
        yield commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(p[0][drafts[0]]), "first draft")
        n += 1
        if len(positions) == 1:  # 2. only one token in this round: its draft is final
            rnd += 1
            continue
        # 3. density pass on the drafted sequence: q_i = p(x~_i | decided, x~_n..x~_{i-1})
        queries = [(positions[i], i - 1) for i in range(1, len(positions))]
        if bonus and t < big_n:
            queries.append((order[t], len(positions) - 1))
        content = list(zip(positions[1:], drafts[1:]))
        q = tempered_probs(oracle.call(content, queries), temperature)
        yield rec(StepKind.DENSITY_PASS, rnd, note=f"verify {len(positions) - 1} drafts")
        # 4. accept with min(1, q_i / p_i); on the first rejection resample from the residual
        q_rows = {i: q[i - 1] for i in range(1, len(positions))}
        j = yield from verify(oracle, rec, rnd, positions, drafts, list(p), q_rows, gen, start=1, accept=accept)
        n += j - 1 + (1 if j < len(positions) else 0)
        if j == len(positions) and bonus and t < big_n:
            yield _bonus(oracle, rec, rnd, order[t], q[-1], gen)
            n += 1
        rnd += 1


def remember_decided(steps: Generator[Step, None, int], known: list[int | None]) -> Generator[Step, None, int]:
    """Pass a round's steps through, writing every decided token into `known` (a drafter's context:
    position -> token or None). A round helper shared by assd_drafted and assd-ptp."""
    while True:
        try:
            s = next(steps)
        except StopIteration as stop:
            return stop.value
        if s.kind in DECIDING_KINDS:
            for pos, tok in zip(s.positions, s.tokens):
                known[pos] = tok
        yield s


def assd_drafted(
    oracle: DensityOracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, k: int,
    drafter: Drafter, extra_calls: list[float], drafter_passes: list[int] | None = None,
    drafter_seconds: list[float] | None = None,
) -> Iterator[Step]:
    """ASSD with an outside drafter (n-gram, masked diffusion): one density pass per round checks
    every draft (none is exact), and its extra row gives a free token when all are accepted. A
    drafter may draft only a prefix of the round's positions, even none: the round then ends at its
    last draft, and with no draft the call's one row is the next position's exact row (a
    sequential step, recorded as a SAMPLE).
    `extra_calls[0]` accumulates the drafter's own network calls (a different network) and
    `drafter_passes[0]` its forward passes (the drafter's `passes` counter; 0 for an n-gram), and
    `drafter_seconds[0]` the wall seconds its proposals took (bench assd's drafter share of a round)."""
    order, n, rnd = mi.masked, 0, 0
    big_n = len(order)
    known: list[int | None] = [None] * len(mi.tokens)
    for i in mi.visible:
        known[i] = mi.tokens[i]
    while n < big_n:
        t = min(n + k, big_n)
        positions = order[n:t]
        before = getattr(drafter, "passes", 0)
        t0 = time.perf_counter()
        drafts, p_rows, spent = drafter.propose(known, positions, gen, temperature)
        positions, t = positions[: len(drafts)], n + len(drafts)  # the drafter may stop early
        if drafter_seconds is not None:
            drafter_seconds[0] += time.perf_counter() - t0
        extra_calls[0] += spent
        if drafter_passes is not None:
            drafter_passes[0] += getattr(drafter, "passes", 0) - before
        if spent:
            yield rec(StepKind.MDM_PASS, rnd, note=f"{drafter.name} drafter: {spent:g} calls")
        if drafts:
            yield rec(StepKind.DRAFT, rnd, positions, drafts, [float(p_rows[i][d]) for i, d in enumerate(drafts)],
                      note=f"{drafter.name} drafts" + (f" ({len(drafts)} of {k}: not sure enough of the next)"
                                                      if t < min(n + k, big_n) else ""))
        queries = [(pos, i) for i, pos in enumerate(positions)]
        if t < big_n:
            queries.append((order[t], len(positions)))
        q = tempered_probs(oracle.call(list(zip(positions, drafts)), queries), temperature)
        yield rec(StepKind.DENSITY_PASS, rnd, note=f"verify {len(positions)} drafts" if drafts
                  else f"{drafter.name} drafter not sure enough: query 1 position")
        j = yield from remember_decided(verify(oracle, rec, rnd, positions, drafts, p_rows, dict(enumerate(q)), gen), known)
        n += j + 1 if j < len(positions) else len(positions)
        if j == len(positions) and t < big_n:
            step = _bonus(oracle, rec, rnd, order[t], q[-1], gen, exact_only=not drafts)
            known[order[t]] = step.tokens[0]
            yield step
            n += 1
        rnd += 1


def next_first_is_exact(stopped: int, drafted: int) -> bool:
    """After a round of the pipelined sampler: is the next round's first proposal row already the
    exact target? Only when every draft was accepted (stopped == drafted): after a rejection at j the
    rows were computed before the resampled token existed, so they must be verified like any draft."""
    return stopped == drafted


def pipelined_queries(
    order: list[int], n: int, positions: list[int], start: int, k: int
) -> tuple[list[tuple[int, int]], dict[int, tuple[list[int], int]]]:
    """The queries of one pipelined call: density rows for drafts start..m-1, then for every place
    the round could stop (rejection at j, or j = m when all pass) the next round's proposal rows,
    seeing the drafts before j. next_rows[j] = (positions, index of their first row)."""
    m = len(positions)
    queries = [(positions[i], i - start) for i in range(start, m)]
    next_rows: dict[int, tuple[list[int], int]] = {}
    for j in range(start, m + 1):
        first = n + j + 1 if j < m else n + m  # rejection at j: j is resampled, not proposed
        nxt = order[first : first + k]
        next_rows[j] = (nxt, len(queries))
        queries += [(pos, j - start) for pos in nxt]
    return queries, next_rows


def assd_pipelined(
    oracle: DensityOracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, k: int,
) -> Iterator[Step]:
    """One network call per round (docs/DESIGN.md §3.4). Each density pass also carries, for every place
    the round could stop, the query rows that propose the next round given the drafts that would
    then be accepted. Proposals are fixed before the acceptance randomness, so the output stays
    exact; when a round accepts everything, the next round's first row is the exact target."""
    order, n, rnd = mi.masked, 0, 0
    big_n = len(order)
    positions = order[:k]
    props = tempered_probs(oracle.call([], [(pos, 0) for pos in positions]), temperature)
    yield rec(StepKind.DRAFT_PASS, rnd, note=f"draft {len(positions)} positions in parallel")
    exact_first = True
    while positions:
        m = len(positions)
        drafts = [sample_categorical(props[i], gen) for i in range(m)]
        p_rows = list(props)
        yield rec(StepKind.DRAFT, rnd, positions, drafts, [float(p_rows[i][d]) for i, d in enumerate(drafts)])
        start = 0
        if exact_first:
            yield commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(p_rows[0][drafts[0]]), "exact row")
            start = 1
            if n + 1 == big_n:
                break
        # one call: density rows for drafts start..m-1, proposal rows for each stopping point j
        queries, next_rows = pipelined_queries(order, n, positions, start, k)
        # logits of the density rows now; with a lean call (oracle.lean_calls: float32) the proposal
        # rows keep only their states until the stopping point is known, and the other stopping
        # points' rows never reach the output head
        logits, states = oracle.call(list(zip(positions, drafts))[start:], queries, states=True,
                                     logit_rows=m - start)
        yield rec(StepKind.DENSITY_PASS, rnd, note=f"verify {m - start} drafts, propose next round")
        q = tempered_probs(logits[: m - start], temperature)
        q_rows = {i: q[i - start] for i in range(start, m)}
        j = yield from verify(oracle, rec, rnd, positions, drafts, p_rows, q_rows, gen, start=start)
        n += j + 1 if j < m else m
        positions, at = next_rows[j]
        props = tempered_probs(next_round_logits(oracle, logits, states, at, positions), temperature)
        exact_first = next_first_is_exact(j, m)
        rnd += 1


#: the catalogue's entries (engine.samplers.SAMPLERS): ASSD and its variants on the run's AS-ARM
def _assd(ctx, *, k: int, temperature: float) -> Iterator[Step]:
    """assd and assd-cache (the run's oracle caches or not)."""
    return assd(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k)


def _assd_bonus(ctx, *, k: int, temperature: float) -> Iterator[Step]:
    return assd(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k, bonus=True)


def _assd_pipelined(ctx, *, k: int, temperature: float) -> Iterator[Step]:
    return assd_pipelined(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k)


SPECS = [
    SamplerSpec(name="assd", kind="asarm", cache=False,
                help="Any-Subset Speculative Decoding (paper's Algorithm 1): draft k tokens in parallel, "
                "verify them with one density pass. Exact.", run=_assd),
    SamplerSpec(name="assd-bonus", kind="asarm", cache=False,
                help="ASSD whose density pass also answers the next position: a free token when all drafts pass.",
                run=_assd_bonus),
    SamplerSpec(name="assd-cache", kind="asarm", cache=True,
                help="ASSD with a KV cache of decided tokens (rejected drafts rolled back): same samples, less compute.",
                run=_assd),
    SamplerSpec(name="assd-pipelined", kind="asarm", cache=True,
                help="One network call per round: each density pass also proposes the next round. Exact.",
                run=_assd_pipelined),
]
