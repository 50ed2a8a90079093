"""Proposals that do not come from the AS-ARM itself.

A drafter returns, for the next positions of a round, draft tokens and the full proposal rows they
were drawn from; ASSD then verifies them against the AS-ARM with the shared acceptance routine.
Exactness needs only that the proposal is fixed before the acceptance randomness is drawn.
"""

from __future__ import annotations

import torch

from ..acceptance import sample_categorical


class NgramDrafter:
    """Context bigram drafter (the ASSD paper's n-gram variant): counts token pairs in the visible
    and decided text, drafts left to right (each draft conditions on the previous draft), and mixes
    in a smoothed context unigram so that unseen contexts still propose something sensible."""

    name = "ngram"
    passes = 0  # no network: no forward passes (bench assd's drafter_passes)

    def __init__(self, vocab_size: int, special_ids: list[int], mix: float = 0.8, alpha: float = 0.1):
        self.v = vocab_size
        self.allowed = torch.ones(vocab_size, dtype=torch.float64)
        self.allowed[special_ids] = 0.0
        self.mix, self.alpha = mix, alpha

    def propose(
        self, known: list[int | None], positions: list[int], gen: torch.Generator, temperature: float = 1.0
    ) -> tuple[list[int], list[torch.Tensor], float]:
        """known[i] is the token at position i or None. Returns drafts, proposal rows, calls spent."""
        uni = torch.zeros(self.v, dtype=torch.float64)
        big: dict[int, torch.Tensor] = {}
        for i, t in enumerate(known):
            if t is None:
                continue
            uni[t] += 1
            prev = known[i - 1] if i > 0 else None
            if prev is not None:
                big.setdefault(prev, torch.zeros(self.v, dtype=torch.float64))[t] += 1
        uni = (uni + self.alpha) * self.allowed
        uni /= uni.sum()
        work = list(known)
        drafts, rows = [], []
        for pos in positions:
            prev = work[pos - 1] if pos > 0 else None
            row = uni
            if prev is not None and prev in big:
                b = big[prev] * self.allowed
                if float(b.sum()) > 0:  # a context seen only before special tokens has no bigram row
                    row = self.mix * b / b.sum() + (1 - self.mix) * uni
            tok = sample_categorical(row, gen)
            work[pos] = tok
            drafts.append(tok)
            rows.append(row)
        return drafts, rows, 0.0
