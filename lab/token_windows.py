"""Training windows: a corpus split as one token stream, and random BOS-led windows of it.

A leaf of lab: training (lab/train.py) and the PTP head's evaluation
(lab/train_ptp.py) read windows the same way without importing each other.
"""

from __future__ import annotations

import torch

from engine.inputs.tokenization import Codec

from .token_arrays import separator_ids


def token_stream(domain: str, split: str, codec: Codec, limit_chars: int | None = None) -> torch.Tensor:
    """All documents of a split, tokenized and concatenated (a blank line between prose or code
    documents; proteins are simply abutted). Special tokens never appear as targets. Read from the
    pre-tokenized arrays (`engine data tokenize`, token_arrays.py) when they were made with this
    codec, else tokenized here."""
    from .data import load_split
    from .token_arrays import load_stream

    stream = load_stream(domain, split, codec=codec, limit_chars=limit_chars)
    if stream is not None:
        return stream

    sep = separator_ids(domain, codec)
    ids: list[int] = []
    total = 0
    for doc in load_split(domain, split):
        ids.extend(codec.encode(doc))
        ids.extend(sep)
        total += len(doc)
        if limit_chars and total > limit_chars:
            break
    return torch.tensor(ids, dtype=torch.long)


def batches(stream: torch.Tensor, seq_len: int, batch: int, gen: torch.Generator, bos_id: int = 1):
    """Random windows of seq_len tokens, with BOS prepended at model position 0."""
    while True:
        starts = torch.randint(0, len(stream) - seq_len - 1, (batch,), generator=gen)
        x = torch.stack([stream[s : s + seq_len] for s in starts])
        bos = torch.full((batch, 1), bos_id, dtype=torch.long)
        yield torch.cat([bos, x], 1)
