"""The n-gram drafter's corpus prior: which tokens follow each token (and each pair) in the training text.

Why: a window that is 95% masked shows the context bigram drafter a dozen tokens, so its counts
are mostly empty and its fallback, the context's unigram, is seldom right (the first draft of a
round matched the AS-ARM's row 16% of the time on text windows: sum(min(p, q)) over the 972
positions of 4 test windows). The training text's bigrams, for the same token before, match it
twice as often (31%); its trigrams, for the same two tokens before, more often still (36%; and
half the positions then get a row whose top probability is 0.3 or more, against a quarter with
the unigram). The prior takes the unigram's place in the drafter's mix; the context's own bigrams,
where it has them, still lead (docs/DESIGN.md §3.5).

What is stored, as `bigram.safetensors` in the AS-ARM's folder beside the tokenizer whose ids it
counts (`python -m engine data bigram DOMAIN` writes it): for each token, its `TOP` most frequent
followers and their shares of all its followers; and for the `CONTEXTS` most frequent pairs of
tokens, their `TOP3` most frequent followers and shares. Special ids are never counted. The share
the stored followers leave is spread as the next shorter row (pair -> token -> the drafter's own
fallback). A model folder without the file drafts as before; exactness never depends on it (a
proposal only has to be a distribution fixed before its draft is tested).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

FILE = "bigram.safetensors"
TOP = 64  # followers kept per token: 75% of the text corpus's bigram mass, 80% of code's
CONTEXTS = 80_000  # pairs kept (the most frequent): 81% of text's training positions, 89% of code's (4.5 MB files)
TOP3 = 8  # followers kept per pair


class CorpusBigram:
    """Row lookups of the stored followers: `row(prev, rest)` and `row(prev, rest, before)` are
    distributions over the vocabulary."""

    def __init__(self, ids: torch.Tensor, probs: torch.Tensor, pairs: dict[str, torch.Tensor] | None = None):
        # NumPy arrays, what `row` reads: a few microseconds a row, not a dozen torch calls
        self.ids = ids.long().numpy()  # [V, top] follower ids, most frequent first
        self.probs = probs.double().numpy()  # [V, top] their shares of all the token's followers
        self.mass = self.probs.sum(1)  # [V] what the stored followers hold
        # the pairs' keys (before * V + prev, ascending) [C], their followers and shares [C, TOP3]; None: no pairs
        self.pairs = None if not pairs else (pairs["pair_keys"].long().numpy(), pairs["pair_ids"].long().numpy(),
                                             pairs["pair_probs"].double().numpy())

    @property
    def vocab_size(self) -> int:
        """The vocabulary it was counted over (one row of followers per token id)."""
        return self.ids.shape[0]

    def row(self, prev: int, rest: np.ndarray, before: int | None = None) -> np.ndarray:
        """[V] float64: the followers of the pair (`before`, `prev`) when it is stored, else of `prev`,
        with their corpus shares, plus the share they leave spread as the shorter row (`prev`'s,
        then `rest`: a distribution, the drafter's unigram row). A token never seen in the corpus
        (no followers stored) gives `rest` itself. Normalised once at the end: stored shares are
        rounded (float32, float16), and a proposal must sum to 1."""
        out = rest * max(0.0, 1.0 - float(self.mass[prev]))
        np.add.at(out, self.ids[prev], self.probs[prev])
        if before is not None and self.pairs is not None:
            keys, ids, shares = self.pairs
            key = before * self.vocab_size + prev
            at = int(np.searchsorted(keys, key))
            if at < len(keys) and int(keys[at]) == key:
                out = out / out.sum() * max(0.0, 1.0 - float(shares[at].sum()))
                np.add.at(out, ids[at], shares[at])
        return out / out.sum()


def int_dtype(limit: int) -> torch.dtype:
    """The integer dtype the file stores values below `limit` in (ids below V, pair keys below V * V):
    int16 up to 2**15, int32 up to 2**31, else int64."""
    return torch.int16 if limit <= 2**15 else torch.int32 if limit <= 2**31 else torch.int64


def _banned(vocab_size: int, special_ids: list[int]) -> torch.Tensor:
    """[V] bool, True at the special ids: no pair or triple through one is counted."""
    banned = torch.zeros(vocab_size, dtype=torch.bool)
    banned[special_ids] = True
    return banned


def count(stream: torch.Tensor, vocab_size: int, special_ids: list[int], top: int = TOP) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, probs) [V, top] of a token stream: each token's `top` most frequent followers and their
    shares of its followers, pairs with a special id on either side not counted (a token with no
    followers keeps zero shares)."""
    a, b = stream[:-1].long(), stream[1:].long()
    banned = _banned(vocab_size, special_ids)
    keep = ~(banned[a] | banned[b])
    counts = torch.bincount(a[keep] * vocab_size + b[keep], minlength=vocab_size * vocab_size)
    counts = counts.view(vocab_size, vocab_size).double()
    n, ids = counts.topk(min(top, vocab_size))
    probs = n / counts.sum(1, keepdim=True).clamp(min=1)
    return ids.to(int_dtype(vocab_size)), probs.float()


def count_pairs(stream: torch.Tensor, vocab_size: int, special_ids: list[int], contexts: int = CONTEXTS,
                top: int = TOP3) -> dict[str, torch.Tensor]:
    """The `contexts` most frequent pairs of a stream (no special id in the triple) and, for each, its
    `top` most frequent followers and their shares of all its followers: "pair_keys" [C] (before * V +
    prev, ascending), "pair_ids" [C, top], "pair_probs" [C, top] (a pair with fewer followers pads
    with share 0). Ties go to the lower key and the lower follower id."""
    s = stream.long()
    banned = _banned(vocab_size, special_ids)
    keep = ~(banned[s[:-2]] | banned[s[1:-1]] | banned[s[2:]])
    tri, n = torch.unique((s[:-2] * vocab_size + s[1:-1])[keep] * vocab_size + s[2:][keep], return_counts=True)
    keys, seg = torch.unique_consecutive(tri // vocab_size, return_inverse=True)  # pairs ascending, as tri is
    totals = torch.zeros(len(keys), dtype=torch.long).index_add_(0, seg, n)
    chosen = torch.zeros(len(keys), dtype=torch.bool)
    by_count = totals * len(keys) + torch.arange(len(keys) - 1, -1, -1)  # distinct: the lower key wins a tie
    chosen[by_count.argsort(descending=True)[:contexts]] = True  # the most frequent pairs
    row_of = torch.cumsum(chosen, 0) - 1  # a chosen pair's row, in key order
    # each pair's followers, most frequent first, then by id: by pair, then -count, then the triple
    # (whose order within a pair is its follower's)
    order = torch.from_numpy(np.lexsort((tri.numpy(), (-n).numpy(), seg.numpy())))
    seg_sorted = seg[order]
    rank = torch.arange(len(order)) - torch.searchsorted(seg_sorted, seg_sorted)  # place within its pair
    take = (rank < top) & chosen[seg_sorted]
    ids = torch.zeros(int(chosen.sum()), top, dtype=torch.long)
    probs = torch.zeros(int(chosen.sum()), top, dtype=torch.float64)
    rows, ranks, picked = row_of[seg_sorted[take]], rank[take], order[take]
    ids[rows, ranks] = tri[picked] % vocab_size
    probs[rows, ranks] = n[picked].double() / totals[seg[picked]].double()
    return {"pair_keys": keys[chosen].to(int_dtype(vocab_size * vocab_size)), "pair_ids": ids.to(int_dtype(vocab_size)),
            "pair_probs": probs.half()}


def save(folder: Path, ids: torch.Tensor, probs: torch.Tensor, meta: dict[str, str],
         pairs: dict[str, torch.Tensor] | None = None) -> Path:
    """Write the prior into a model folder (safetensors, `meta` in its header)."""
    path = Path(folder) / FILE
    tensors = {"ids": ids.contiguous(), "probs": probs.contiguous(), **{k: v.contiguous() for k, v in (pairs or {}).items()}}
    save_file(tensors, str(path), metadata=meta)
    return path


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> CorpusBigram:
    t = load_file(path)
    return CorpusBigram(t.pop("ids"), t.pop("probs"), t)


def load_prior(folder: Path | str | None, vocab_size: int) -> CorpusBigram | None:
    """The prior stored in a model folder, or None (no folder, no file, or one counted over another
    vocabulary size: then the drafter falls back to the context's unigram, as without a file)."""
    if folder is None:
        return None
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    prior = _load(str(path), path.stat().st_mtime)
    return prior if prior.vocab_size == vocab_size else None
