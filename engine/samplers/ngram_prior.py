"""The n-gram drafter's corpus prior: which tokens follow each token in the domain's training text.

Why: a window that is 95% masked shows the context bigram drafter a dozen tokens, so its counts
are mostly empty and its fallback, the context's unigram, is seldom right (the first draft of a
round matched the AS-ARM's row 16% of the time on text windows: sum(min(p, q)) over the 972
positions of 4 test windows). The training text's own bigrams, for the same token before, match it
twice as often (31%). The prior takes the unigram's place in the drafter's mix; the context's own
bigrams, where it has them, still lead (docs/DESIGN.md §3.5).

What is stored: for each token, its `top` most frequent followers in the training split and their
shares of all its followers (special ids never counted), as `bigram.safetensors` in the AS-ARM's
folder, beside the tokenizer whose ids it counts (`python -m engine data bigram DOMAIN` writes it).
The share the top followers leave is spread as the drafter's own fallback row. A model folder
without the file drafts as before; exactness never depends on it (a proposal only has to be a
distribution fixed before its draft is tested).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

FILE = "bigram.safetensors"
TOP = 64  # followers kept per token: 75% of the text corpus's bigram mass, 80% of code's


class CorpusBigram:
    """Row lookups of the stored followers: `row(prev, rest)` is a distribution over the vocabulary."""

    def __init__(self, ids: torch.Tensor, probs: torch.Tensor):
        self.ids = ids.long()  # [V, top] follower ids, most frequent first
        self.probs = probs.to(torch.float64)  # [V, top] their shares of all the token's followers
        self.mass = self.probs.sum(1).clamp(max=1.0)  # [V] what the stored followers hold

    @property
    def vocab_size(self) -> int:
        """The vocabulary it was counted over (one row of followers per token id)."""
        return self.ids.shape[0]

    def row(self, prev: int, rest: torch.Tensor) -> torch.Tensor:
        """[V] float64: the followers of `prev` with their corpus shares, plus the share they leave
        spread as `rest` (a distribution; the drafter's unigram row). A token never seen in the
        corpus (no followers stored) gives `rest` itself."""
        out = rest * (1.0 - float(self.mass[prev]))
        out.index_add_(0, self.ids[prev], self.probs[prev])
        return out / out.sum()


def count(stream: torch.Tensor, vocab_size: int, special_ids: list[int], top: int = TOP) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, probs) [V, top] of a token stream: each token's `top` most frequent followers and their
    shares of its followers, pairs with a special id on either side not counted (a token with no
    followers keeps zero shares)."""
    a, b = stream[:-1].long(), stream[1:].long()
    banned = torch.zeros(vocab_size, dtype=torch.bool)
    banned[special_ids] = True
    keep = ~(banned[a] | banned[b])
    counts = torch.bincount(a[keep] * vocab_size + b[keep], minlength=vocab_size * vocab_size)
    counts = counts.view(vocab_size, vocab_size).to(torch.float64)
    top = min(top, vocab_size)
    n, ids = counts.topk(top, dim=1)
    total = counts.sum(1, keepdim=True)
    probs = torch.where(total > 0, n / total.clamp(min=1), 0.0)
    return ids.to(torch.int16 if vocab_size <= 32768 else torch.int32), probs.to(torch.float32)


def save(folder: Path, ids: torch.Tensor, probs: torch.Tensor, meta: dict[str, str]) -> Path:
    """Write the prior into a model folder (safetensors, `meta` in its header)."""
    path = Path(folder) / FILE
    save_file({"ids": ids.contiguous(), "probs": probs.contiguous()}, str(path), metadata=meta)
    return path


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> CorpusBigram:
    t = load_file(path)
    return CorpusBigram(t["ids"], t["probs"])


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
