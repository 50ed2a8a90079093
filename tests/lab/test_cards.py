"""Model cards (lab/cards.py) name what a folder really holds: the weights' stored dtype, never the
n-gram prior's, and the prior itself when the folder has one."""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

from engine.samplers.ngram_prior import FILE, count, save
from lab.cards import PRIOR_LINE, stored_dtype, write_card


def test_a_card_names_the_weights_dtype_and_the_prior_beside_them(tmp_path):
    save_file({"w": torch.zeros(2, dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "asarm", "dtype": "float32"}))
    write_card(tmp_path, {"nll": 1.0})
    assert PRIOR_LINE not in (tmp_path / "README.md").read_text()
    save(tmp_path, *count(torch.tensor([4, 5, 4]), 6, [0]), {})  # int16 ids sort before model.safetensors
    assert (tmp_path / FILE).is_file() and stored_dtype(tmp_path) == "bfloat16"
    write_card(tmp_path, {"nll": 1.0})
    card = (tmp_path / "README.md").read_text()
    assert "Weights stored in bfloat16" in card and PRIOR_LINE in card
