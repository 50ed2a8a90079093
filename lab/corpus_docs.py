"""Extractors for the documentation and dictionary packages that widen the text domain (Debian
manuals, man pages, POD, dictd dictionaries): an unpacked package -> (name, prose) documents.

Each extractor is built by a small factory from the globs of the package's layout, so
lab/data.py lists a source in one line; the markup readers are in corpus_markup.py and
the reStructuredText one is the `modern` corpus's (experiment_corpora.rst_prose).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable
from pathlib import Path

from .corpus_clean import chunk_paragraphs, decode_text
from .corpus_extract import Docs
from .corpus_markup import dictd_entries, dictd_prose, html_to_text, pod_to_text, roff_to_text
from .experiment_corpora import rst_prose
from .package_fetch import SourceUnavailable

Extractor = Callable[[Path], Docs]
#: dictionary entries joined into one document (entries are a few lines each)
DICT_ENTRIES_PER_DOC = 40


def _read(path: Path) -> str:
    raw = path.read_bytes()
    if path.name.endswith((".gz", ".dz")):
        raw = gzip.decompress(raw)
    return decode_text(raw)


def _files(root: Path, globs: Iterable[str], exclude: tuple[str, ...] = ()) -> list[Path]:
    found = {p.resolve() for g in globs for p in root.glob(g) if p.is_file() and not p.is_symlink()}
    return sorted(p for p in found if not any(x in p.as_posix() for x in exclude))


def pages(name: str, reader: Callable[[str], str], *globs: str, exclude: tuple[str, ...] = ()) -> Extractor:
    """An extractor: every file matching `globs` read by `reader` (markup -> prose), each page cut
    into documents of about 16k characters at paragraph boundaries."""

    def extract(root: Path) -> Docs:
        files = _files(root, globs, exclude)
        if not files:
            raise SourceUnavailable(f"package holds no {' or '.join(globs)}")
        docs: Docs = []
        for path in files:
            prose = reader(_read(path))
            rel = path.name.split(".")[0]
            docs += [(f"{name}/{path.parent.name}/{rel}/{i}", chunk)
                     for i, chunk in enumerate(chunk_paragraphs(prose)) if chunk]
        return docs

    return extract


def html_pages(name: str, *globs: str, exclude: tuple[str, ...] = ()) -> Extractor:
    """Pages of an HTML manual (Sphinx, DocBook or hand-written) as prose."""
    return pages(name, html_to_text, *globs, exclude=exclude)


def rst_pages(name: str, *globs: str, exclude: tuple[str, ...] = ()) -> Extractor:
    """reStructuredText sources (a Sphinx manual's _sources/*.rst.txt) as prose."""
    return pages(name, rst_prose, *globs, exclude=exclude)


def man_pages(name: str, *globs: str) -> Extractor:
    """Man pages (roff, gzip-compressed); `.so` redirections are skipped, being no text."""

    def reader(source: str) -> str:
        return "" if source.lstrip().startswith(".so ") else roff_to_text(source)

    return pages(name, reader, *globs)


def pod_pages(name: str, *globs: str) -> Extractor:
    """Perl's POD documents as prose."""
    return pages(name, pod_to_text, *globs)


def dictd(name: str, stem: str) -> Extractor:
    """A dictd dictionary (usr/share/dictd/<stem>.index + .dict.dz): entries in index order,
    DICT_ENTRIES_PER_DOC entries a document."""

    def extract(root: Path) -> Docs:
        index = root / "usr/share/dictd" / f"{stem}.index"
        body = root / "usr/share/dictd" / f"{stem}.dict.dz"
        if not index.exists() or not body.exists():
            raise SourceUnavailable(f"no usr/share/dictd/{stem}.index and .dict.dz")
        entries = dictd_entries(index.read_text(encoding="utf-8", errors="replace"),
                                gzip.decompress(body.read_bytes()))
        prose = [p for head, entry in entries if (p := dictd_prose(entry, head))]
        return [(f"{name}/{i}", "\n".join(prose[j : j + DICT_ENTRIES_PER_DOC]))
                for i, j in enumerate(range(0, len(prose), DICT_ENTRIES_PER_DOC))]

    return extract
