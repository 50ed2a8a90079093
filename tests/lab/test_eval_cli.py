"""`python -m engine eval --model DIR`: a candidate checkpoint measured like a bundled one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lab import evaluate

ROOT = Path(__file__).resolve().parents[2]


def test_eval_model_measures_the_named_folder_only(monkeypatch, capsys):
    x = torch.tensor([[1, 5, 6, 7, 8, 9]])
    monkeypatch.setattr(evaluate, "_windows", lambda *a, **k: x)
    folder = str(ROOT / "assets" / "models" / "protein-judge")
    assert evaluate.cli(["--model", folder, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [folder]  # no bundled model measured beside it
    assert out[folder]["test_tokens"] == 5
    assert out[folder]["nll_left_to_right"] > 0


def test_eval_model_never_writes_bundled_cards():
    with pytest.raises(SystemExit):
        evaluate.cli(["--model", "assets/models/protein-judge", "--write-cards"])


def test_eval_corpus_needs_a_model():
    with pytest.raises(SystemExit):
        evaluate.cli(["--corpus", "modern"])
