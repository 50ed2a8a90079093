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


def test_a_ptp_cards_command_rebuilds_its_shape():
    """The card's command gives back the head's mode, low-rank term and, for a head without one, the
    missing output layer (a command without --no-output-layer would train another head)."""
    from lab.cards import train_command

    cfg = {"model_type": "ptp", "domain": "code", "hidden_size": 320, "num_layers": 0, "num_heads": 5,
           "intermediate_size": 1024, "teacher": "code-asarm", "k": 5, "rate_min": 0.7, "mode": "onepass",
           "prev_rank": 128}
    state = {"kind": "ptp", "domain": "code", "seq_len": 256, "batch": 8, "steps": 600, "lr": 0.0015}
    plain = train_command(cfg, state)
    assert "--ptp-mode onepass --prev-rank 128" in plain and "--no-output-layer" not in plain
    assert train_command({**cfg, "output_layer": False}, state).endswith("--prev-rank 128 --no-output-layer")
