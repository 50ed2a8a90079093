"""assd-reuse's bookkeeping (engine/samplers/assd_reuse.py): which rows a call asks for, and which row
each position of the next round drafts from. Exactness itself is enumerated with every AS-ARM sampler
(test_assd_exactness.py); any row would keep the law, so only these tests see a row given to the wrong
position (a proposal that is not that position's would draft worse and still pass the G-test)."""

from __future__ import annotations

import torch

from engine.samplers.assd_reuse import next_round, reuse_queries

ORDER = list(range(10, 20))  # the masked positions in decode order


def _rows(n: int) -> torch.Tensor:
    """Rows that say their own index: row r is r everywhere."""
    return torch.arange(n, dtype=torch.float64)[:, None].expand(n, 4)


def test_a_call_asks_for_the_drafts_rows_then_k_positions_beyond_seeing_every_draft():
    queries, beyond = reuse_queries(ORDER, 2, [12, 13, 14], start=1, k=3)
    assert queries == [(13, 0), (14, 1), (15, 2), (16, 2), (17, 2)]
    assert beyond == [15, 16, 17]
    queries, beyond = reuse_queries(ORDER, 0, [10, 11], start=0, k=2)
    assert queries == [(10, 0), (11, 1), (12, 2), (13, 2)] and beyond == [12, 13]


def test_near_the_end_there_is_less_beyond():
    queries, beyond = reuse_queries(ORDER, 6, [16, 17, 18], start=0, k=3)
    assert beyond == [19] and queries[-1] == (19, 3)
    assert reuse_queries(ORDER, 7, [17, 18, 19], start=0, k=3)[1] == []


def test_after_a_full_acceptance_the_next_round_is_the_rows_beyond():
    positions, props = next_round([12, 13, 14], [15, 16, 17], _rows(5), start=1, stopped=3, k=3)
    assert positions == [15, 16, 17]
    assert [int(p[0]) for p in props] == [2, 3, 4]


def test_after_a_rejection_the_drafts_after_it_keep_their_own_density_rows():
    # rejected at index 1 (position 13): 14's density row (query 1), then 15 and 16 from beyond
    positions, props = next_round([12, 13, 14], [15, 16, 17], _rows(5), start=1, stopped=1, k=3)
    assert positions == [14, 15, 16]
    assert [int(p[0]) for p in props] == [1, 2, 3]
    # rejected at the first tested draft of a round that tested from 0: rows 1 and 2 follow
    positions, props = next_round([10, 11, 12], [13, 14], _rows(5), start=0, stopped=0, k=3)
    assert positions == [11, 12, 13] and [int(p[0]) for p in props] == [1, 2, 3]


def test_after_a_rejection_at_the_last_draft_only_the_rows_beyond_are_left():
    positions, props = next_round([12, 13, 14], [15, 16], _rows(4), start=1, stopped=2, k=3)
    assert positions == [15, 16] and [int(p[0]) for p in props] == [2, 3]
    assert next_round([17, 18, 19], [], _rows(3), start=0, stopped=2, k=3) == ([], [])
