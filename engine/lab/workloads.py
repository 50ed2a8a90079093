"""Benchmark inputs: windows of held-out text with a random subset of positions masked.

Shared by `bench`, `eval` and `report`, so every number is measured on the same kind of input.
"""

from __future__ import annotations

import random

from ..masking import MaskedInput, from_token_positions
from ..tokenization import Codec


def separator_ids(domain: str, codec: Codec) -> list[int]:
    """What joins two documents of a domain in a token stream: a blank line for prose and code,
    a space for text8-style characters (no newline in its alphabet), nothing between proteins."""
    if domain == "protein":
        return []
    return codec.encode(" " if domain == "chars" else "\n\n")


def masked_windows(
    domain: str, codec: Codec, length: int, mask_rate: float, n: int, seed: int = 0, split: str = "test",
    max_tokens: int | None = None,
) -> list[MaskedInput]:
    """n inputs of `length` tokens from the split, each with round(mask_rate * length) positions
    masked uniformly at random (at least one). Proteins use whole sequences up to `length`."""
    from .data import load_split

    rng = random.Random(seed)
    docs = load_split(domain, split)
    rng.shuffle(docs)
    out: list[MaskedInput] = []
    stream: list[int] = []
    for doc in docs:
        ids = codec.encode(doc)
        if domain == "protein":
            if len(ids) < 16:
                continue
            windows = [ids[:length]]
        else:
            stream.extend(ids + separator_ids(domain, codec))
            windows = []
            while len(stream) >= length:
                windows.append(stream[:length])
                stream = stream[length:]
        for w in windows:
            m = max(1, round(mask_rate * len(w)))
            pos = sorted(rng.sample(range(len(w)), m))
            out.append(from_token_positions(w, pos, codec, max_tokens=max_tokens or len(w)))
            if len(out) == n:
                return out
    return out
