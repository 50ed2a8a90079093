"""`python -m engine bench fills`: its data are well-formed and the command runs end to end on a
tiny subset with the bundled models. No timing and no quality threshold is asserted here."""

from __future__ import annotations

import json
import re

import pytest

from engine.loading.registry import load
from lab import bench_fills
from lab.bench_fills import (
    judge_word,
    load_code_items,
    load_protein_items,
    load_text_items,
    mask_word,
    run_program,
)
from lab.data import PROTEIN_ALPHABET

WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")


def test_text_set_is_well_formed() -> None:
    items = load_text_items()
    assert len(items) >= 50
    assert len({it["text"] for it in items}) == len(items)
    for it in items:
        assert it["text"].count("[MASK]") == 1 and " [MASK]" in it["text"], it["text"]
        assert "[MASK:" not in it["text"]
        assert it["accept"] and len(set(it["accept"])) == len(it["accept"]), it["text"]
        for w in it["accept"]:
            assert WORD.fullmatch(w), (it["text"], w)  # one lower-case word each


def test_code_set_is_well_formed_and_its_tests_decide() -> None:
    """Every function passes its tests as written and fails them with the masked line replaced by
    `pass`, so passing really depends on the filled line."""
    items = load_code_items()
    assert len(items) >= 20
    for it in items:
        start = bench_fills._line_start(it["source"], it["masked"])
        assert it["source"][start - 1] == " "
        assert run_program(it["source"] + "\n" + it["tests"]), it["masked"]
        broken = it["source"][:start] + "pass" + it["source"][start + len(it["masked"]):]
        assert not run_program(broken + "\n" + it["tests"]), it["masked"]


def test_protein_set_is_well_formed() -> None:
    items, rate = load_protein_items()
    assert len(items) >= 5 and rate == pytest.approx(0.15)
    lm = load("protein-asarm")
    for it in items:
        assert set(it["sequence"]) <= set(PROTEIN_ALPHABET) and len(it["sequence"]) <= lm.max_tokens, it["name"]
    assert len({it["sequence"] for it in items}) == len(items)


def test_run_program_times_out_and_has_no_network() -> None:
    assert not run_program("while True:\n    pass\n", timeout=1.0)
    assert not run_program("import socket\nsocket.create_connection(('127.0.0.1', 9))\n")
    assert run_program("x = 1\nassert x == 1\n")


def test_judge_word() -> None:
    pre, suf = "we sat by the warm", " and talked."
    acc = {"fire", "stove"}
    ok = judge_word(pre + " fire" + suf, pre, suf, acc, None)
    assert ok == {"fill": " fire", "whole_word": True, "accepted": True, "context_intact": True}
    word = judge_word(pre + " horses" + suf, pre, suf, acc, frozenset({"horses"}))
    assert word["whole_word"] and not word["accepted"]
    assert not judge_word(pre + " horsez" + suf, pre, suf, acc, frozenset({"horses"}))["whole_word"]
    for bad in (" fi re", "fire", "  fire", " fire,", " eed-"):  # not one word after one space
        j = judge_word(pre + bad + suf, pre, suf, acc, None)
        assert not j["whole_word"] and not j["accepted"], bad
    broken = judge_word("we sat by a warm fire and talked.", pre, suf, acc, None)
    assert not broken["context_intact"] and not broken["accepted"]


def test_mask_owns_the_space_only_after_the_fix() -> None:
    lm = load("text-asarm")
    text = "After dinner we sat by the warm fire and talked."
    s = text.index("fire")
    after = mask_word(text, s, s + 4, lm, True)
    before = mask_word(text, s, s + 4, lm, False)
    assert after.pieces[0] == text[: s - 1] and before.pieces[0] == text[:s]
    assert len(after.masked) == len(lm.codec.encode(" fire"))
    assert len(before.masked) == len(lm.codec.encode("fire"))


def test_command_runs_on_a_tiny_subset(capsys, monkeypatch, tmp_path) -> None:
    """Without corpora (as on CI): whole words by shape, the Swiss-Prot composition as unigram."""
    from lab.bench import cli

    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(bench_fills, "_text_vocab", lambda: None)  # train_words caches across tests

    assert cli(["fills", "--limit", "1", "--seeds", "1", "--temperatures", "1", "--lengths", "reference,default",
                "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [(r["length"], r["word_boundary"]) for r in res["text"]["rows"]] == [
        ("reference", False), ("reference", True), ("default", False), ("default", True)]
    for r in res["text"]["rows"]:
        assert r["runs"] == 1 and r["context_intact"] == 1.0 and 0 <= r["accepted"] <= r["whole_word"] <= 1
    assert [r["runs"] for r in res["code"]["rows"]] == [1, 1]
    assert res["text"]["whole_word_dictionary"] == "none (word shape only)"
    p = res["protein"]
    assert p["unigram_source"] == "UniProtKB/Swiss-Prot composition"
    assert p["proteins"] == 1 and p["masked_residues"] == round(0.15 * len(load_protein_items()[0][0]["sequence"]))
    assert p["nll_model"] > 0 and p["nll_unigram"] > 0 and 0 <= p["recovery"]["1.0"] <= 1
