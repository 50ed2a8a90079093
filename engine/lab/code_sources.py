"""The PyPI packages that widen the code domain beyond the standard library and sympy, the
file-content de-duplication across them, and the HumanEval guard on every training file.

Why wheels, not sdists: an sdist's metadata is prepared by its build backend, and for numpy,
scipy or pandas that means compiling them (minutes, a C/Fortran toolchain); the wheel holds the
same .py files (a package's tests excluded either way, python_files) and downloads in seconds.
Licences are permissive only (BSD, MIT, Apache, PSF-style); each is read from the wheel's
metadata and recorded in the manifest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .corpus_extract import Docs, python_files
from .corpus_sources import Source
from .package_fetch import SourceUnavailable

#: widely used packages with permissive licences, largest bodies of hand-written Python first
CODE_PACKAGES = (
    "django", "transformers", "pandas", "scipy", "numpy", "sqlalchemy", "matplotlib", "twisted",
    "scikit-learn", "astropy", "statsmodels", "botocore", "sphinx", "docutils", "networkx", "pygments",
    "setuptools", "pip", "requests", "tornado", "bokeh", "babel", "mypy", "ipython", "jedi", "pytest",
    "aiohttp", "dask", "xarray", "sqlglot", "black", "celery", "kombu", "flask", "werkzeug", "jinja2",
    "click", "pydantic", "fastapi", "starlette", "httpx", "urllib3", "attrs", "scrapy", "nltk", "numba",
    "alembic", "openpyxl", "sqlparse", "boto3", "cython", "apache-airflow", "homeassistant", "moto",
    "tensorflow-probability", "prefect", "pyomo", "holoviews", "panel", "spyder", "scikit-image", "wagtail",
    "pyglet", "tensorflow-datasets", "jax", "keras", "great-expectations", "dagster", "mitmproxy",
    "pywikibot", "sagemaker",
)


def _extract(name: str):
    def extract(root: Path) -> Docs:
        docs, _ = python_files(root, name)
        if not docs:
            raise SourceUnavailable("no .py files outside tests in the wheel")
        return docs

    return extract


CODE_SOURCES = tuple(Source(p, "pypi", p, _extract(p), ("--only-binary", ":all:")) for p in CODE_PACKAGES)


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
