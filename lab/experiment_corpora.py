"""Corpora for experiments, kept apart from the `text` domain the bundled models were measured on.

Adding documents to `text` would move its test split and its spelling dictionary, so the model
cards' numbers would no longer reproduce. Two experiments need other data instead:

* `modern`: the most recent English prose a registry ships, for the CPU fine-tuning measurement
  of the believable-infills issue: the reStructuredText sources of Python 3.11's documentation
  (Debian `python3.11-doc`, PSF licence, written 1990s-2023) plus the news (BBC, 2004-05) and
  Brown (1961) documents of the text domain's *training* split. Valid and test hold only Python
  docs, so nothing of the text test split is ever trained on.
* `chars`: text8-style character-level English (lower-case a-z and space, 27 symbols), the
  setting of the self-speculative masked diffusion paper, derived from the text domain's splits
  split for split, for the self-speculative against MDM measurement (docs/DESIGN.md §4).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.inputs.domains import DOMAINS

from .corpus_clean import chunk_paragraphs, clean_prose, decode_text
from .corpus_files import DomainBuild, SourceResult, corpus_dir, read_jsonl, write_domain
from .corpus_sources import FIRST_TEXT_SOURCES, PROSE_SEPARATOR, SPLITS, TEXT_FRACTIONS, Source, _gather, _report, split_gathered
from .package_fetch import SourceUnavailable

CHARS_ALPHABET = DOMAINS["chars"].alphabet  # the registry's (engine/inputs/domains.py)
#: text-domain training documents that are modern enough to join the `modern` fine-tuning mix
MODERN_FROM_TEXT = ("bbc", "brown/")

_NOT_LETTER = re.compile(r"[^a-z]+")
_SKIP_DIRECTIVES = {"code-block", "sourcecode", "literalinclude", "doctest", "testcode", "testoutput",
                    "testsetup", "productionlist", "highlight", "toctree", "index", "image", "figure",
                    "table", "csv-table", "list-table", "math", "raw", "include", "only", "moduleauthor",
                    "sectionauthor", "opcode", "c:macro", "tabularcolumns", "audit-event", "program"}
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::")
_FIELD = re.compile(r"^:[\w-]+:(\s|$)")  # ":synopsis: x", not a role like ":meth:`x`"
_HEADING_RULE = re.compile(r"^([=\-~^\"'*+#`.:_])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:+-]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_+")
_INLINE = re.compile(r"``([^`]+)``|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|`([^`]+)`_*")


def text8_normalise(text: str) -> str:
    """Lower-case, every run of non-letters one space (text8's 27 symbols). A non-ASCII letter is a
    non-letter here ("Zürich" -> "z rich"), as text8's own cleaning drops what is not a-z; the bundled
    chars-hybrid was trained and measured on exactly this."""
    return _NOT_LETTER.sub(" ", text.lower()).strip()


def _inline(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _ROLE.sub(r"\1", text)
    return _INLINE.sub(lambda m: next(g for g in m.groups() if g is not None), text)


def rst_prose(source: str) -> str:
    """The running prose of one reStructuredText file, one paragraph per line.

    Dropped: headings, code (literal blocks after `::`, code directives, doctest lines), comments,
    tables and directive options; kept: paragraphs, list items and the bodies of descriptive
    directives (function, class, note, ...) whose text is prose.
    """
    paragraphs: list[str] = []
    current: list[str] = []
    skip_deeper_than: int | None = None
    lines = source.splitlines()

    def flush() -> None:
        text = _inline(" ".join(current)).strip()
        current.clear()
        words = text.split()
        if len(words) >= 6 and sum(c.isalpha() for c in text) > 0.6 * len(text):
            paragraphs.append(" ".join(words))

    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not stripped:
            flush()
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _HEADING_RULE.match(stripped) or _HEADING_RULE.match(nxt.strip()):  # a title, or its rule
            flush()
            continue
        d = _DIRECTIVE.match(line)
        if d or stripped.startswith(".."):
            flush()
            if not d or d.group(2) in _SKIP_DIRECTIVES or stripped.startswith(".. _"):
                skip_deeper_than = indent
            continue
        if stripped == "::":  # a bare literal-block marker: the indented block after it is code
            flush()
            skip_deeper_than = indent
            continue
        if stripped.endswith("::"):  # a literal block follows: keep the sentence, skip the block
            current.append(stripped[:-1] if not stripped.endswith(" ::") else stripped[:-3])
            flush()
            skip_deeper_than = indent
            continue
        if _FIELD.match(stripped) or stripped.startswith((">>>", "...", "$ ", "+-", "|", "=")):
            flush()  # a directive option (":synopsis: ..."), a prompt or a table row
            continue
        current.append(stripped)
    flush()
    return "\n".join(paragraphs)


def extract_python_docs(root: Path) -> list[tuple[str, str]]:
    """Prose of every page of the Python documentation, in chunks of about 16k characters."""
    pages = sorted({p.resolve() for d in root.glob("usr/share/doc/python3*/html/_sources") for p in d.rglob("*.rst.txt")})
    if not pages:
        raise SourceUnavailable("no html/_sources/*.rst.txt pages in the package")
    docs = []
    for page in pages:
        prose = clean_prose(rst_prose(decode_text(page.read_bytes())).replace("\n", "\n\n"))
        rel = page.as_posix().rsplit("/_sources/", 1)[1]
        docs += [(f"python-docs/{rel}/{i}", chunk) for i, chunk in enumerate(chunk_paragraphs(prose)) if chunk]
    return docs


MODERN_SOURCES = (Source(name="python-docs", registry="debian", package="python3.11-doc", extract=extract_python_docs,
                         license="PSF-2.0 (the Python License; usr/share/doc/python3.11-doc/copyright)"),)


def _text_rows(root: Path, split: str) -> list[dict]:
    path = corpus_dir("text", root) / f"{split}.jsonl"
    if not path.exists():
        raise SourceUnavailable(f"no text corpus at {path}: fetch text first (`python -m engine data fetch text`)")
    return read_jsonl(path)


def fetch_modern(root: Path, work: Path, seed: int) -> bool:
    """Python docs prose (98/1/1 split) plus the text domain's training news and Brown documents."""
    gathered = _gather("modern", MODERN_SOURCES, work, root / "downloads")
    splits = split_gathered("modern", gathered, seed, TEXT_FRACTIONS)
    if splits is None:
        return False
    reused = [(row["source"], row["text"]) for row in _text_rows(root, "train")
              if row["source"].startswith(MODERN_FROM_TEXT)]
    splits["train"] += reused
    own = SourceResult(name="text-train-modern", registry="derived", package="data/corpora/text/train.jsonl", ok=True,
                       license="as each source in data/corpora/text/manifest.json",
                       documents=len(reused), bytes=sum(len(t.encode()) for _, t in reused),
                       notes="bbc-news and brown documents of the text domain's training split only")
    build = DomainBuild(
        domain="modern",
        key="source",
        splits=splits,
        separator=PROSE_SEPARATOR,
        fractions=dict(zip(SPLITS, TEXT_FRACTIONS)),
        notes="a fine-tuning corpus; valid and test are Python docs only",
    )
    _report(write_domain(corpus_dir("modern", root), build, [r for r, _ in gathered] + [own], seed))
    return True


def _first_sources_rows(root: Path, split: str) -> list[dict]:
    """The text split's documents of its first six sources (FIRST_TEXT_SOURCES), by the manifest's
    document ranges; every document where the manifest has no ranges (a text corpus of those six)."""
    rows = _text_rows(root, split)
    path = corpus_dir("text", root) / "manifest.json"
    ranges = json.loads(path.read_text(encoding="utf-8")).get("source_ranges", {}).get(split) if path.exists() else None
    if ranges is None:
        return rows
    return [row for name, start, count in ranges if name in FIRST_TEXT_SOURCES for row in rows[start : start + count]]


def fetch_chars(root: Path, work: Path, seed: int) -> bool:
    """text8-style splits: each text split, lower-cased to a-z and space, split for split."""
    splits = {}
    for split in SPLITS:
        splits[split] = [(row["source"], t) for row in _first_sources_rows(root, split)
                         if (t := text8_normalise(row["text"]))]
    res = SourceResult(name="text8-style", registry="derived", package="data/corpora/text", ok=True,
                       documents=sum(map(len, splits.values())),
                       bytes=sum(len(t) for docs in splits.values() for _, t in docs),
                       notes="the text domain's splits, lower-cased, non-letters -> one space")
    build = DomainBuild(domain="chars", key="source", splits=splits, separator=" ", fractions={s: "as text" for s in SPLITS},
                        notes=f"27 symbols: {CHARS_ALPHABET!r}")
    _report(write_domain(corpus_dir("chars", root), build, [res], seed))
    return True
