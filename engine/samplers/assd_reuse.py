"""Pipelined ASSD that proposes the next round from rows its call computes anyway (`assd-reuse`).

Why: pipelined ASSD (engine/samplers/assd.py) puts into each call, for every place the round could
stop, the k query rows of the next round: about (k + 1) k rows, of which k are ever read. Where a
call's extra rows are cheap (a CPU that streams the weights from memory, a GPU) that costs little;
where they are not (docs/RESULTS.md: on a 2-core AMX-class Xeon a 15-row call costs about twice a
one-token call) it eats the gain. This sampler's call carries the round's density rows and only
the k rows of the round that follows a full acceptance. When the round stops at a rejection, the
next round proposes from rows the call already holds: the density rows of the drafts after the
rejected one and the k rows beyond the round. Those rows saw the rejected draft (and the drafts after
it), so they are not the target's rows for the new context, only proposals; the next call tests them.

Exactness (ASSD's Theorem 2, as for every sampler here): each proposal row is fixed by earlier calls
before the round that drafts from it draws its acceptance coins, every draft is a fresh draw from its
row, and every test reads the target row of the round's own call (engine.samplers.acceptance). The
first row of the round after a full acceptance saw every decided token: it is the target, kept without
a test, as in pipelined ASSD.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.acceptance import sample_categorical, tempered_probs

from ..trace import Step, StepKind
from .assd import commit_exact, verify
from .base import DensityOracle, Recorder
from .spec import SamplerSpec


def reuse_queries(order: list[int], n: int, positions: list[int], start: int,
                  k: int) -> tuple[list[tuple[int, int]], list[int]]:
    """One call's queries: the density rows of drafts start..m-1 (row i sees the drafts before it),
    then the k positions after the round, seeing every draft. Returns (queries, those k positions)."""
    m = len(positions)
    beyond = order[n + m : n + m + k]
    queries = [(positions[i], i - start) for i in range(start, m)] + [(pos, m - start) for pos in beyond]
    return queries, beyond


def next_round(positions: list[int], beyond: list[int], rows: torch.Tensor, start: int, stopped: int,
               k: int) -> tuple[list[int], list[torch.Tensor]]:
    """The next round's positions and proposal rows after a round that stopped at `stopped` (len:
    every draft passed): the positions after it in order, up to k, each with the row the call
    computed for it (rows: one per query of `reuse_queries`, density rows first)."""
    first = min(stopped + 1, len(positions))  # the first draft after the rejected one (none: all passed)
    # its density row and the rest follow one another in `rows`, then the rows beyond
    return (positions[first:] + beyond)[:k], list(rows[first - start :][:k])


def assd_reuse(
    oracle: DensityOracle, mi: MaskedInput, rec: Recorder, gen: torch.Generator, temperature: float, k: int,
) -> Iterator[Step]:
    """One call a round of about 3k rows; each round proposes from the last call's rows (module docstring)."""
    order, n, rnd = mi.masked, 0, 0
    big_n = len(order)
    positions = order[:k]
    props = list(tempered_probs(oracle.call([], [(pos, 0) for pos in positions]), temperature))
    yield rec(StepKind.DRAFT_PASS, rnd, note=f"draft {len(positions)} positions in parallel")
    exact_first = True
    while positions:
        m = len(positions)
        drafts = [sample_categorical(props[i], gen) for i in range(m)]  # fresh draws from fixed rows
        yield rec(StepKind.DRAFT, rnd, positions, drafts, [float(props[i][d]) for i, d in enumerate(drafts)],
                  note="from the last call's rows" + ("" if exact_first else " (they saw a rejected draft)"))
        start = 0
        if exact_first:  # the row saw every decided token: the target itself
            yield commit_exact(oracle, rec, rnd, positions[0], drafts[0], float(props[0][drafts[0]]), "exact row")
            start = 1
            if n + 1 == big_n:
                break
        queries, beyond = reuse_queries(order, n, positions, start, k)
        rows = tempered_probs(oracle.call(list(zip(positions, drafts))[start:], queries), temperature)
        yield rec(StepKind.DENSITY_PASS, rnd, note=f"verify {m - start} drafts, rows for {len(beyond)} beyond")
        q_rows = {i: rows[i - start] for i in range(start, m)}
        j = yield from verify(oracle, rec, rnd, positions, drafts, props, q_rows, gen, start=start)
        n += j + 1 if j < m else m
        positions, props = next_round(positions, beyond, rows, start, j, k)
        exact_first = j == m  # only then did the first row beyond see every decided token
        rnd += 1


def _run(ctx, *, k: int, temperature: float) -> Iterator[Step]:
    return assd_reuse(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k)


#: the catalogue's entry (engine.samplers.SAMPLERS)
SPEC = SamplerSpec(
    name="assd-reuse", kind="asarm", cache=True,
    help="One network call per round, about 3k rows: the call checks the drafts and reads the k positions "
    "after them; after a rejection the next round drafts from rows the call already holds (they saw the "
    "rejected draft; the next call tests them). Exact.",
    run=_run)
