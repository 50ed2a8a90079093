"""Pre-tokenized arrays (lab/token_arrays.py) on a tiny corpus: the stream read back is
token_stream's exactly, shards end at document boundaries, stale arrays are refused aloud."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.inputs.tokenization import Codec
from lab import data
from lab.corpus_files import DomainBuild, write_domain
from lab.token_arrays import load_stream, read_manifest, tokens_dir, write_arrays
from lab.token_windows import token_stream
from lab.workloads import separator_ids

ROOT = Path(__file__).resolve().parents[2]
DOCS = [f"Document {i}: the dog slept under the table all afternoon, {'and dreamt ' * (i % 4)}then woke."
        for i in range(30)]


@pytest.fixture()
def corpus(tmp_path: Path, monkeypatch) -> tuple[Path, Codec]:
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path))
    build = DomainBuild(domain="text", key="source", splits={"train": [(f"d{i}", t) for i, t in enumerate(DOCS)],
                                           "valid": [("v", "A valid document.")], "test": [("t", "A test one.")]},
                        separator="\n\n", extra={"source_ranges": {"train": [["a", 0, 10], ["b", 10, 20]]}})
    write_domain(tmp_path / "corpora" / "text", build, [], seed=0)
    return tmp_path, Codec.load(ROOT / "assets" / "tokenizers" / "text")


def test_round_trip_equals_token_stream_with_and_without_a_char_limit(corpus) -> None:
    root, codec = corpus
    expected = {s: token_stream("text", s, codec) for s in ("train", "valid", "test")}
    limited = token_stream("text", "train", codec, limit_chars=500)
    m = write_arrays("text", codec, root, shard_tokens=120)
    assert len(m["splits"]["train"]["shards"]) > 2 and len(m["splits"]["valid"]["shards"]) == 1
    for split, stream in expected.items():
        got = load_stream("text", split, root, codec=codec)
        assert got is not None and got.dtype == torch.long and torch.equal(got, stream)
        assert torch.equal(token_stream("text", split, codec), stream)  # token_stream now reads the arrays
    assert torch.equal(load_stream("text", "train", root, codec=codec, limit_chars=500), limited)
    assert torch.equal(token_stream("text", "train", codec, limit_chars=500), limited)
    arr = np.load(tokens_dir("text", root) / m["splits"]["train"]["shards"][0]["file"])
    assert arr.dtype == np.uint16 and arr.ndim == 1


def test_shards_are_cut_at_document_boundaries(corpus) -> None:
    root, codec = corpus
    m = write_arrays("text", codec, root, shard_tokens=100)
    sep = separator_ids("text", codec)
    per_doc = [codec.encode(d) + sep for d in DOCS]
    at = 0
    for shard in m["splits"]["train"]["shards"]:
        arr = np.load(tokens_dir("text", root) / shard["file"]).tolist()
        n = shard["documents"]
        assert arr == [t for ids in per_doc[at : at + n] for t in ids]  # whole documents, in order
        assert shard["tokens"] == len(arr)
        at += n
    assert at == len(DOCS)
    first = load_stream("text", "train", root, max_shards=1, codec=codec)
    assert first.tolist() == [t for ids in per_doc[: m["splits"]["train"]["shards"][0]["documents"]] for t in ids]


def test_a_stale_tokenizer_or_corpus_is_ignored_with_a_message(corpus, capsys) -> None:
    root, codec = corpus
    expected = token_stream("text", "train", codec)
    write_arrays("text", codec, root, shard_tokens=100)
    path = tokens_dir("text", root) / "manifest.json"
    m = read_manifest("text", root)
    path.write_text(json.dumps({**m, "codec_sha256": "0" * 64}))
    assert load_stream("text", "train", root, codec=codec) is None
    assert "another tokenizer" in capsys.readouterr().err
    assert torch.equal(token_stream("text", "train", codec), expected)  # tokenized as before
    path.write_text(json.dumps({**m, "corpus_manifest_sha256": "1" * 64}))
    assert load_stream("text", "train", root, codec=codec) is None
    assert "another fetch" in capsys.readouterr().err
    path.write_text(json.dumps(m))
    assert load_stream("text", "train", root, codec=codec) is not None


def test_tokenize_command_writes_the_manifest(corpus, capsys) -> None:
    root, codec = corpus
    assert data.cli(["--data-dir", str(root), "tokenize", "text", "--shard-tokens", "100"]) == 0
    m = read_manifest("text", root)
    assert m["vocab_size"] == codec.vocab_size and len(m["tokenizer_sha256"]) == 64
    for shard in m["splits"]["train"]["shards"]:
        assert data.sha256_file(tokens_dir("text", root) / shard["file"]) == shard["sha256"]
    assert "first shard" in capsys.readouterr().out
    per_source = m["source_tokens"]["train"]  # tokens of each source, from the corpus's document ranges
    sep = separator_ids("text", codec)
    assert per_source["a"] == sum(len(codec.encode(d)) + len(sep) for d in DOCS[:10])
    assert per_source["a"] + per_source["b"] == m["splits"]["train"]["tokens"]
    assert data.cli(["--data-dir", str(root), "tokenize", "code"]) == 1  # no code corpus here


def test_protein_arrays_round_trip_with_a_character_alphabet(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path))
    seqs = {"train": [(f"p{i}", "MKTAYIAKQRQISFVKSHFSRQ"[i:] + "ACDE" * i) for i in range(8)],
            "valid": [("v", "MKV")], "test": [("t", "WWY")]}
    write_domain(tmp_path / "corpora" / "protein", DomainBuild(domain="protein", key="id", splits=seqs, separator=None), [],
                 seed=0)
    codec = Codec.load(ROOT / "assets" / "tokenizers" / "protein")  # its alphabet cannot spell the probe text
    expected = token_stream("protein", "train", codec)
    write_arrays("protein", codec, tmp_path, shard_tokens=40)
    assert torch.equal(load_stream("protein", "train", tmp_path, codec=codec), expected)
    text_codec = Codec.load(ROOT / "assets" / "tokenizers" / "text")
    assert load_stream("protein", "train", tmp_path, codec=text_codec) is None  # another tokenizer


def test_a_shard_without_its_index_is_read_whole(corpus) -> None:
    root, codec = corpus
    m = write_arrays("text", codec, root, shard_tokens=100)
    first = m["splits"]["train"]["shards"][0]
    (tokens_dir("text", root) / first["index"]).unlink()  # a campaign that carried the .npy alone
    got = load_stream("text", "train", root, max_shards=1, codec=codec, limit_chars=10)
    assert got is not None and len(got) == first["tokens"]
