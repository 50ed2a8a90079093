"""Pre-tokenized corpora: each split's token stream (exactly what token_windows.token_stream builds)
as compact uint16 arrays under data/tokens/<domain>/, with a manifest.

Why: a lent GPU has minutes, and tokenizing five times the data costs minutes on its CPU; the
arrays travel compressed instead (a shard of about 8M tokens per domain fits the 64 MiB that a
campaign carries with the code tree). Train is cut into shards at document boundaries, so a
campaign can carry the first shard and a later one the next; valid and test are one shard each.

Layout: manifest.json; <split>-NNN.npy (np.uint16, 1-D: each document's ids then the separator
ids); <split>-NNN.docs.npy (int64, one row per document: token end inside the shard, characters
of the split so far), which lets a character limit cut the stream where token_stream would.
The manifest records the tokenizer file's sha256, a fingerprint of the codec (vocabulary,
whitespace mapping and the ids of a probe text: what decides the ids, whatever the tokenizers
version) and per file its token count and sha256. Arrays whose fingerprint differs from the
codec in use are ignored with a message, and the corpus is tokenized as before.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.errors import InfillError
from engine.inputs.domains import CORPORA, DOMAINS
from engine.inputs.tokenization import Codec

from .corpus_files import corpus_dir, data_dir, read_jsonl, sha256_file

#: the bundled tokenizers, one folder per domain (AS-ARM, hybrid and judge of a domain share it)
TOKENIZERS = Path(__file__).resolve().parents[1] / "assets" / "tokenizers"
SHARD_TOKENS = 8_000_000
SPLITS = ("train", "valid", "test")
BATCH_DOCS = 256  # documents encoded in one call (the Rust tokenizer spreads a batch over the cores)
_PROBE = ("The quick brown fox jumps over the lazy dog.\n\n    def f(x):\n\treturn x  # \u00e9\u4e2d\n"
          "MKTAYIAKQRQISFVKSHFSRQ 12,345.67 \u201cquoted\u201d")


def separator(domain: str) -> str | None:
    """What joins two documents of a domain in a token stream (engine/inputs/domains.py): a blank line for
    prose and code, a space for text8-style characters (no newline in its alphabet); None where
    each document is a window of its own (proteins). A corpus joins as its domain does."""
    return DOMAINS[CORPORA.get(domain, domain)].separator


def separator_ids(domain: str, codec: Codec) -> list[int]:
    """The separator as token ids (none where documents are not joined)."""
    sep = separator(domain)
    return codec.encode(sep) if sep else []


def tokens_dir(domain: str, root: Path | None = None) -> Path:
    """Where a domain's arrays live under the data directory."""
    return (root or data_dir()) / "tokens" / domain


def codec_fingerprint(codec: Codec) -> str:
    """sha256 of what decides the ids: the vocabulary, the whitespace mapping, a probe's ids."""
    vocab = sorted(codec.hf.get_vocab().items())
    try:
        probe = codec.encode(_PROBE)
    except InfillError:  # a character-level alphabet (proteins): its vocabulary decides the ids
        probe = None
    blob = json.dumps([vocab, sorted(codec.whitespace.items()), probe], ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _documents(domain: str, split: str, root: Path) -> list[str]:
    return [row["text"] for row in read_jsonl(corpus_dir(domain, root) / f"{split}.jsonl")]


def _encoded(docs: list[str], codec: Codec) -> Iterator[tuple[list[int], int]]:
    for i in range(0, len(docs), BATCH_DOCS):
        batch = docs[i : i + BATCH_DOCS]
        yield from zip(codec.encode_many(batch), (len(d) for d in batch))


def _write_shard(out: Path, name: str, ids: list[int], rows: list[tuple[int, int]]) -> dict[str, Any]:
    arr = np.asarray(ids, dtype=np.uint16)
    np.save(out / f"{name}.npy", arr)
    np.save(out / f"{name}.docs.npy", np.asarray(rows, dtype=np.int64).reshape(-1, 2))
    return {"file": f"{name}.npy", "tokens": int(arr.size), "documents": len(rows),
            "sha256": sha256_file(out / f"{name}.npy"), "index": f"{name}.docs.npy",
            "index_sha256": sha256_file(out / f"{name}.docs.npy")}


def write_arrays(domain: str, codec: Codec, root: Path | None = None, *, tokenizer_file: Path | None = None,
                 shard_tokens: int = SHARD_TOKENS) -> dict[str, Any]:
    """Tokenize every split of a fetched domain into shards and write the manifest; return it."""
    root = root or data_dir()
    if codec.vocab_size > np.iinfo(np.uint16).max + 1:
        raise ValueError(f"a vocabulary of {codec.vocab_size} does not fit uint16")
    out = tokens_dir(domain, root)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.npy"):
        old.unlink()
    sep = separator_ids(domain, codec)
    corpus_manifest = corpus_dir(domain, root) / "manifest.json"
    ranges = json.loads(corpus_manifest.read_text(encoding="utf-8")).get("source_ranges", {}) \
        if corpus_manifest.exists() else {}
    splits: dict[str, Any] = {}
    source_tokens: dict[str, dict[str, int]] = {}
    for split in SPLITS:
        docs = _documents(domain, split, root)
        shards: list[dict[str, Any]] = []
        ids: list[int] = []
        rows: list[tuple[int, int]] = []
        chars = 0
        per_doc: list[int] = []
        for doc_ids, n_chars in _encoded(docs, codec):
            per_doc.append(len(doc_ids) + len(sep))
            ids.extend(doc_ids)
            ids.extend(sep)
            chars += n_chars
            rows.append((len(ids), chars))
            if split == "train" and len(ids) >= shard_tokens:
                shards.append(_write_shard(out, f"{split}-{len(shards):03d}", ids, rows))
                ids, rows = [], []
        if rows or not shards:
            shards.append(_write_shard(out, f"{split}-{len(shards):03d}", ids, rows))
        first = out / shards[0]["file"]  # what a campaign carries: its size as it travels
        shards[0]["xz_bytes"] = len(lzma.compress(first.read_bytes(), preset=6))
        if ranges.get(split):  # tokens of each source (the corpus manifest's document ranges)
            source_tokens[split] = {}
            for name, start, count in ranges[split]:
                source_tokens[split][name] = source_tokens[split].get(name, 0) + sum(per_doc[start : start + count])
        splits[split] = {"documents": len(docs), "chars": chars,
                         "tokens": sum(s["tokens"] for s in shards), "shards": shards}
        _say(f"tokens {domain}/{split}: {len(docs)} documents, {splits[split]['tokens']:,} tokens, "
             f"{len(shards)} shard(s)")
    manifest = {
        "domain": domain,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "dtype": "uint16",
        "tokenizer_sha256": sha256_file(tokenizer_file) if tokenizer_file and tokenizer_file.exists() else None,
        "codec_sha256": codec_fingerprint(codec),
        "vocab_size": codec.vocab_size,
        "separator_ids": sep,
        "shard_tokens": shard_tokens,
        "corpus_manifest_sha256": sha256_file(corpus_manifest) if corpus_manifest.exists() else None,
        "splits": splits,
        "source_tokens": source_tokens,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(domain: str, root: Path | None = None) -> dict[str, Any] | None:
    """The arrays' manifest, or None where the domain was never tokenized."""
    path = tokens_dir(domain, root) / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def load_stream(domain: str, split: str, root: Path | None = None, max_shards: int | None = None, *,
                codec: Codec | None = None, limit_chars: int | None = None) -> torch.Tensor | None:
    """The split's token stream from the arrays (torch.long, as token_stream returns it), or None
    when there are no arrays for it, they were made by another tokenizer than `codec`, or from
    another fetch of the corpus than the one on disk (each refusal said on stderr). `max_shards`
    reads the first shards only (those a campaign carried); `limit_chars` cuts after the document
    that passes that many characters, as token_stream does."""
    root = root or data_dir()
    manifest = read_manifest(domain, root)
    if manifest is None or split not in manifest.get("splits", {}):
        return None
    if codec is not None and manifest.get("codec_sha256") != codec_fingerprint(codec):
        _say(f"tokens {domain}: arrays made with another tokenizer (fingerprint differs); tokenizing instead")
        return None
    corpus_manifest = corpus_dir(domain, root) / "manifest.json"
    if corpus_manifest.exists() and manifest.get("corpus_manifest_sha256") not in (None, sha256_file(corpus_manifest)):
        _say(f"tokens {domain}: arrays are from another fetch of the corpus; tokenizing instead "
             f"(run `python -m engine data tokenize {domain}`)")
        return None
    out = tokens_dir(domain, root)
    parts: list[np.ndarray] = []
    for shard in manifest["splits"][split]["shards"][:max_shards]:
        path = out / shard["file"]
        if not path.exists():
            break  # a campaign carries the first shards only
        arr = np.load(path)
        if limit_chars and (out / shard["index"]).exists():  # without its index a shard is read whole
            index = np.load(out / shard["index"])
            over = np.nonzero(index[:, 1] > limit_chars)[0]
            if over.size:
                parts.append(arr[: index[over[0], 0]])
                break
        parts.append(arr)
    if not parts:
        return None
    return torch.from_numpy(np.concatenate(parts).astype(np.int64))
