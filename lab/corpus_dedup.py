"""Paragraph de-duplication of split prose: no held-out paragraph in training, and each paragraph
of the added (documentation) sources once.

Why paragraphs: manuals repeat boilerplate (licence notes, "See also" lines, page chrome) and
quote each other; documents are split first (by document, each source on its own, as today), and
only then are paragraphs removed, so the valid and test splits of the sources that were already
in the corpus stay exactly as they were (the bundled models' numbers reproduce).

Near-duplicates: two paragraphs are the same when they differ only in case, punctuation, digits
or spacing (`paragraph_key`). Kept in full: sources marked `keep` (today's narrative and news),
except that a training paragraph of at least HELD_OUT_MIN_CHARS equal to a valid or test paragraph
leaves them too; in the added sources every training paragraph equal to a held-out one leaves.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

HELD_OUT_MIN_CHARS = 40  # shorter paragraphs ("Amen.", "Yes, my lord.") recur by nature, not by copying
_NOT_WORD = re.compile(r"[^a-z0 ]+")
_DIGITS = re.compile(r"\d+")


def paragraph_key(paragraph: str) -> bytes:
    """A 12-byte digest that equal and near-equal paragraphs share: lower-cased, digit runs as 0,
    punctuation dropped, spacing collapsed."""
    norm = _DIGITS.sub("0", paragraph.lower())
    norm = " ".join(_NOT_WORD.sub(" ", norm).split())
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=12).digest()


@dataclass
class DedupCounts:
    """What de-duplication removed, per source: paragraphs and characters."""

    held_out: dict[str, int] = field(default_factory=dict)  # training paragraphs equal to a valid/test one
    repeated: dict[str, int] = field(default_factory=dict)  # repeats (within the added sources' splits)
    chars_removed: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, source: str, chars: int) -> None:
        """Count one removed paragraph of `source`."""
        table = self.held_out if kind == "held_out" else self.repeated
        table[source] = table.get(source, 0) + 1
        self.chars_removed[source] = self.chars_removed.get(source, 0) + chars


Docs = list[tuple[str, str]]


def dedup_split_sources(
    per_source: Sequence[tuple[str, bool, dict[str, Docs]]],
) -> tuple[list[tuple[str, dict[str, Docs]]], DedupCounts]:
    """(source name, keep, {split: docs}) in source order -> the same with paragraphs removed.

    1. Every paragraph of every valid and test split is held out: a training paragraph with its
       key is dropped (in a kept source only when it has >= HELD_OUT_MIN_CHARS characters).
    2. In sources not marked `keep`, a paragraph whose key was already seen in the same split
       (in any earlier source, kept sources included, or earlier in this one) is dropped.
    Documents left empty are dropped; paragraph order inside a document is kept.
    """
    counts = DedupCounts()
    held: set[bytes] = set()
    for _, _, splits in per_source:
        for split in ("valid", "test"):
            for _, text in splits.get(split, []):
                held.update(paragraph_key(p) for p in text.split("\n"))
    seen: dict[str, set[bytes]] = {}
    out: list[tuple[str, dict[str, Docs]]] = []
    for name, keep, splits in per_source:
        new_splits: dict[str, Docs] = {}
        for split, docs in splits.items():
            seen_here = seen.setdefault(split, set())
            kept_docs: Docs = []
            for doc_name, text in docs:
                paras = []
                for p in text.split("\n"):
                    key = paragraph_key(p)
                    if split == "train" and key in held and (not keep or len(p) >= HELD_OUT_MIN_CHARS):
                        counts.add("held_out", name, len(p))
                    elif not keep and key in seen_here:
                        counts.add("repeated", name, len(p))
                    else:
                        seen_here.add(key)
                        paras.append(p)
                if paras:
                    kept_docs.append((doc_name, "\n".join(paras)))
            new_splits[split] = kept_docs
        out.append((name, new_splits))
    return out, counts
