"""The n-gram drafter's kept-up-to-date counts give the rows a full recount of the window gives,
round after round, as tokens are decided in lattice order; a new list starts the count again."""

from __future__ import annotations

import random

import torch

from engine.samplers.drafters import NgramDrafter
from engine.samplers.ngram_index import NgramIndex

V, SPECIAL = 9, [0, 1]


def recount_rows(known, positions, drafts, mix=0.8, alpha=0.1):
    """The drafter's rows from a full recount of `known` (what it computed every round before the
    index), given the drafts it made: the reference the kept counts must match."""
    allowed = torch.ones(V, dtype=torch.float64)
    allowed[SPECIAL] = 0.0
    uni = torch.zeros(V, dtype=torch.float64)
    big: dict[int, torch.Tensor] = {}
    for i, t in enumerate(known):
        if t is None:
            continue
        uni[t] += 1
        prev = known[i - 1] if i > 0 else None
        if prev is not None:
            big.setdefault(prev, torch.zeros(V, dtype=torch.float64))[t] += 1
    uni = (uni + alpha) * allowed
    uni /= uni.sum()
    work, rows = list(known), []
    for pos, tok in zip(positions, drafts):
        prev = work[pos - 1] if pos > 0 else None
        row = uni
        if prev is not None and prev in big and float((big[prev] * allowed).sum()) > 0:
            b = big[prev] * allowed
            row = mix * b / b.sum() + (1 - mix) * uni
        work[pos] = tok
        rows.append(row)
    return rows


def test_kept_counts_give_the_recounted_rows_round_after_round():
    rng = random.Random(5)
    for trial in range(20):
        n = rng.randint(4, 40)
        truth = [rng.randrange(2, V) for _ in range(n)]
        masked = sorted(rng.sample(range(n), rng.randint(1, n)))
        known = [None if i in masked else truth[i] for i in range(n)]
        drafter = NgramDrafter(vocab_size=V, special_ids=SPECIAL)
        gen = torch.Generator().manual_seed(trial)
        at = 0
        while at < len(masked):
            positions = masked[at : at + rng.randint(1, 4)]
            drafts, rows, spent = drafter.propose(known, positions, gen)
            assert spent == 0.0
            want = recount_rows(known, positions, drafts)
            for got, ref in zip(rows, want, strict=True):
                assert torch.allclose(got, ref, rtol=0, atol=1e-15)
            decided = rng.randint(1, len(positions))  # some accepted, the next resampled or left
            for pos in positions[:decided]:
                known[pos] = rng.randrange(2, V)
            at += decided


def test_a_new_list_or_a_rewritten_position_starts_the_count_again():
    index = NgramIndex(V)
    a = [2, 3, None, None]
    index.sync(a)
    assert float(index.uni.sum()) == 2 and float(index.big[2][3]) == 1
    a[2] = 3
    index.sync(a)
    assert float(index.uni.sum()) == 3 and float(index.big[3][3]) == 1
    b = [4, None, 4, 4]  # another run's list
    index.sync(b)
    assert float(index.uni.sum()) == 3 and float(index.uni[4]) == 3 and 2 not in index.big
    assert float(index.big[4][4]) == 1, "only the adjacent known pair (2, 3) is a bigram"
    b[1] = 5
    index.sync(b)
    assert float(index.big[4][5]) == 1 and float(index.big[5][4]) == 1, "both pairs closed by position 1"
    b[1] = 6  # a counted position rewritten in place: counted again from scratch, 5 forgotten
    index.sync(b)
    assert float(index.uni[5]) == 0 and float(index.uni[6]) == 1 and float(index.big[4][6]) == 1
    c = list(b)  # another list of the same length, the same token where the last count was taken
    c[0] = 7
    index.sync(c)
    assert float(index.uni[7]) == 1 and float(index.uni[4]) == 2, "a new list is counted afresh"


def test_the_pair_with_the_last_position_is_counted():
    index = NgramIndex(V)
    known = [4, 4, None, 5]
    index.sync(known)
    known[2] = 6
    index.sync(known)
    assert float(index.big[4][6]) == 1 and float(index.big[6][5]) == 1
    assert float(sum(row.sum() for row in index.big.values())) == 3


def test_sync_reads_only_the_newly_decided_positions():
    """Once counted, a round reads the positions decided since the last sync, not the window."""

    class Counting(list):
        reads = 0

        def __getitem__(self, i):
            Counting.reads += 1
            return super().__getitem__(i)

    known = Counting([2] * 200 + [None] * 10)
    index = NgramIndex(V)
    index.sync(known)
    for pos in (200, 201, 202):  # round after round, each read only what is new
        Counting.reads = 0
        known[pos] = 3
        index.sync(known)
        assert Counting.reads < 12, (pos, Counting.reads)
    assert float(index.uni[3]) == 3 and float(index.big[3][3]) == 2


def test_a_new_list_with_nothing_known_forgets_the_last_runs_counts():
    drafter = NgramDrafter(vocab_size=V, special_ids=SPECIAL)
    gen = torch.Generator().manual_seed(0)
    drafter.propose([2, 2, 2, None], [3], gen)
    _, rows, _ = drafter.propose([None, None, None], [0], gen)  # another run, everything masked
    want = torch.tensor([0.0, 0.0] + [1.0] * (V - 2), dtype=torch.float64) / (V - 2)
    assert torch.allclose(rows[0], want, rtol=0, atol=1e-15)


def test_the_unigram_row_is_recomputed_only_when_the_counts_moved():
    """A round that decided nothing new reuses the smoothed unigram row (the drafter's cost stays off the
    window's length); a newly decided token gives a new row."""
    d = NgramDrafter(vocab_size=V, special_ids=SPECIAL)
    known = [2, 3, None, None, 4, None]
    gen = torch.Generator().manual_seed(0)
    d.propose(known, [2], gen)
    row = d.uni_row
    d.propose(known, [2, 3], gen)
    assert d.uni_row is row
    known[2] = 5
    d.propose(known, [3], gen)
    assert d.uni_row is not row and float(d.uni_row[5]) > float(row[5])
