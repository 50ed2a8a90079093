"""Quality measures shared by `bench`, `eval` and `report` (docs/DESIGN.md §4)."""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

WORD = re.compile(r"[A-Za-z]+")


@lru_cache(maxsize=4)
def train_words(domain: str) -> frozenset[str]:
    """Lower-cased words of the training split: the dictionary for spelling accuracy."""
    from .data import load_split

    words: set[str] = set()
    for doc in load_split(domain, "train"):
        words.update(w.lower() for w in WORD.findall(doc))
    return frozenset(words)


def spelling_accuracy(texts: list[str], vocab: frozenset[str]) -> float:
    """Share of the words in `texts` (the generated spans) found in the training vocabulary."""
    words = [w.lower() for t in texts for w in WORD.findall(t)]
    return sum(w in vocab for w in words) / len(words) if words else float("nan")


def unigram_entropy(tokens: list[int]) -> float:
    """Entropy (bits) of the token histogram: low values flag degenerate, repetitive samples."""
    c = Counter(tokens)
    n = sum(c.values())
    return -sum(v / n * math.log2(v / n) for v in c.values()) if n else float("nan")


def judge_nll_tokens(sequences: list[list[int]], model: str) -> float:
    """Mean per-token NLL of whole token sequences under a left-to-right judge model."""
    from engine.loading.registry import load

    lm = load(model)
    vals = [lm.model.token_nll(seq[: lm.max_tokens]) for seq in sequences if seq]
    return sum(vals) / len(vals) if vals else float("nan")


def judge_nll(texts: list[str], model: str) -> float:
    """judge_nll_tokens of texts tokenized with the judge's tokenizer."""
    from engine.loading.registry import load

    codec = load(model).codec
    return judge_nll_tokens([codec.encode(t) for t in texts], model)
