"""The corpora on disk: where they live (INFILL_DATA_DIR), how a domain's splits are written with
a manifest of sha256 hashes (so what training read can be proven later), and how they are read
back. lab/data.py builds the corpora; training, evaluation and the report read them."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.errors import InfillError


class DataMissingError(InfillError):
    """A corpus was asked for before `python -m engine data fetch` built it."""


def data_dir() -> Path:
    """The cache folder: env INFILL_DATA_DIR, else ./data."""
    return Path(os.environ.get("INFILL_DATA_DIR", "data"))


def corpus_dir(domain: str, root: Path | None = None) -> Path:
    """Where a domain's splits live under the data directory."""
    return (root or data_dir()) / "corpora" / domain



def sha256_file(path: Path) -> str:
    """Hash a split file so the manifest can prove what training read."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line, UTF-8 kept readable (ensure_ascii off)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(kw_only=True)
class SourceResult:
    """What one registry package (or the stdlib) contributed, for the manifest."""

    name: str
    registry: str
    package: str
    version: str = ""
    license: str = ""
    ok: bool = False
    error: str = ""
    documents: int = 0
    bytes: int = 0
    notes: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The record as the manifest stores it (empty error and notes left out)."""
        d = dict(self.__dict__)
        if not d["error"]:
            d.pop("error")
        if not d["notes"]:
            d.pop("notes")
        return d


@dataclass(kw_only=True)
class DomainBuild:
    """Documents of one domain, already split, ready to be written with a manifest."""

    domain: str
    key: str  # jsonl field that names a document: "source", "path" or "id"
    splits: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # split -> (key, text)
    separator: str | None = None  # set when a .txt view is written
    fractions: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # further manifest keys (e.g. source ranges)


def write_domain(
    out_dir: Path, build: DomainBuild, sources: Sequence[SourceResult], seed: int
) -> dict[str, Any]:
    """Write the split files and manifest.json; return the manifest.

    Files are written to temporary names and renamed so an interrupted fetch never leaves a
    manifest whose hashes describe half-written files.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    splits_info: dict[str, Any] = {}
    for split, docs in build.splits.items():
        files: dict[str, Any] = {}
        jsonl = out_dir / f"{split}.jsonl"
        tmp = jsonl.with_suffix(".jsonl.tmp")
        write_jsonl(tmp, ({build.key: key, "text": text} for key, text in docs))
        tmp.replace(jsonl)
        files[jsonl.name] = {"bytes": jsonl.stat().st_size, "sha256": sha256_file(jsonl)}
        if build.separator is not None:
            txt = out_dir / f"{split}.txt"
            tmp = txt.with_suffix(".txt.tmp")
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                f.write(build.separator.join(text for _, text in docs))
                if docs:
                    f.write("\n")
            tmp.replace(txt)
            files[txt.name] = {"bytes": txt.stat().st_size, "sha256": sha256_file(txt)}
        splits_info[split] = {
            "documents": len(docs),
            "text_bytes": sum(len(text.encode("utf-8")) for _, text in docs),
            "files": files,
        }
    manifest = {
        "domain": build.domain,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": seed,
        "fractions": build.fractions,
        "jsonl_fields": [build.key, "text"],
        "txt_separator": build.separator,
        "sources": [s.as_dict() for s in sources],
        "splits": splits_info,
        "total_documents": sum(v["documents"] for v in splits_info.values()),
        "total_text_bytes": sum(v["text_bytes"] for v in splits_info.values()),
    }
    if build.notes:
        manifest["notes"] = build.notes
    manifest.update(build.extra)
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def verify_manifest(out_dir: Path) -> list[str]:
    """Return the problems found re-hashing a domain's files (empty list: all good)."""
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
    problems = []
    for info in manifest.get("splits", {}).values():
        for name, meta in info["files"].items():
            path = out_dir / name
            if not path.exists():
                problems.append(f"{name} is missing")
            elif sha256_file(path) != meta["sha256"]:
                problems.append(f"{name} does not match its sha256 in manifest.json")
    return problems


def load_humaneval_single_line() -> list[dict[str, Any]]:
    """The 1,033 single-line infilling tasks (prefix, middle, suffix, test, entry_point)."""
    path = corpus_dir("humaneval") / "single_line.jsonl"
    if not path.exists():
        raise DataMissingError(
            f"no HumanEval tasks at {path}: run `python -m engine data fetch humaneval` first"
        )
    return read_jsonl(path)
