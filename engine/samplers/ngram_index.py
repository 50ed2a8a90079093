"""The n-gram drafter's counts of the run's known text, kept up to date instead of recounted.

Why: recounting the whole window every round costs a Python loop over every known token, so the
drafter's time grew with the window and, on a 256-token window, was a fifth of a verify call.
The counts only ever grow: a token, once visible or decided, never changes, and ASSD decides
positions in lattice order (left to right among the masked). So the index counts the window once
when a run starts and then, each round, only the positions decided since the last round. Each
bigram is counted once, when the second of its two positions becomes known.

The counts are the same numbers a full recount would give, so the proposal rows are the same
(tests/engine/samplers/test_ngram_index.py compares them with a recount); exactness does not depend on
them anyway, only on the rows being fixed before the acceptance randomness is drawn.
The counts are NumPy rows: a count is one store, where a torch element update costs ~10 us on a
2-core CPU, and the drafter's rows are NumPy arithmetic too (engine/samplers/drafters.py).
"""

from __future__ import annotations

import numpy as np


class NgramIndex:
    """Unigram and bigram counts (float64 NumPy rows over the vocabulary) of the tokens of `known`, a
    run's position -> token (None while masked) list, brought up to date by `sync`."""

    def __init__(self, vocab_size: int):
        self.v = vocab_size
        self._rebuild([])  # no run's list yet: the first sync counts its window

    def sync(self, known: list[int | None]) -> None:
        """Count what became known since the last sync. Another list (a new run, or a caller that
        passes copies) or a counted position whose token changed starts the count again."""
        if known is not self.known or len(known) != len(self.counted) or not self._consistent(known):
            self._rebuild(known)
            return
        pending, n = self.pending, self.next
        while n < len(pending) and known[pending[n]] is not None:  # decided in lattice order: a prefix
            self._count(known, pending[n])
            n += 1
        self.next = n  # a position decided out of lattice order is counted when the prefix reaches it

    def _consistent(self, known: list[int | None]) -> bool:
        """The last counted position still holds the token counted there (a cheap guard against a
        caller that rewrote the list in place)."""
        if self.next == 0:
            return True
        last = self.pending[self.next - 1]
        return known[last] is not None and known[last] == self._tokens[last]

    def _rebuild(self, known: list[int | None]) -> None:
        """Count `known` from scratch (a run's first sync)."""
        self.known = known  # the list the counts were taken from
        self.counted = [False] * len(known)
        self._tokens: list[int | None] = [None] * len(known)
        self.uni = np.zeros(self.v)
        self.big: dict[int, np.ndarray] = {}
        self.pending = [i for i, t in enumerate(known) if t is None]  # unknown when counting began, ascending
        self.next = 0  # pending[:next] are counted
        for i, t in enumerate(known):
            if t is not None:
                self._count(known, i)
        self.changed = True  # counts moved since the caller last read them (an empty window too)

    def _count(self, known: list[int | None], i: int) -> None:
        """Count the token at i and the bigrams it closes with already counted neighbours."""
        t = known[i]
        self.counted[i] = True
        self._tokens[i] = t
        self.uni[t] += 1
        if i > 0 and self.counted[i - 1]:
            self._pair(known[i - 1], t)
        if i + 1 < len(known) and self.counted[i + 1]:
            self._pair(t, known[i + 1])
        self.changed = True

    def _pair(self, prev: int, tok: int) -> None:
        row = self.big.get(prev)
        if row is None:
            row = self.big[prev] = np.zeros(self.v)
        row[tok] += 1
