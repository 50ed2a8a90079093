"""The PTP head's held-out acceptance curve and the stop rule (lab/train_curve.py): the rule
as a pure function on synthetic curves, and tiny CPU runs (a 16-wide teacher and head) whose
train_state.json and log carry the curve, one stopped by the rule and one not."""

from __future__ import annotations

import argparse
import json

import pytest

from lab import train
from lab.train_curve import every_arg, flat
from tests.support.tiny import cpu_data_env, write_protein_corpus

RISING = [0.30, 0.32, 0.34, 0.36, 0.38, 0.40, 0.42, 0.44]
FLAT = [0.30, 0.35, 0.38, 0.40, 0.401, 0.400, 0.402, 0.401]


def test_the_rule_stops_a_flat_curve_and_not_a_rising_one():
    assert flat(FLAT, window=3, min_gain=0.005, min_points=6)
    assert not flat(RISING, window=3, min_gain=0.005, min_points=6)
    assert not flat([0.4] * 5, window=3, min_gain=0.005, min_points=6)  # flat, but too few points yet
    assert flat([0.4] * 6, window=3, min_gain=0.005, min_points=6)
    assert not flat(FLAT[:6], window=3, min_gain=0.005, min_points=6)  # 0.38 -> 0.401 over the last 3: rising
    assert flat(FLAT[:7], window=3, min_gain=0.005, min_points=6)  # 0.400 -> at best 0.402: flat


def test_the_rule_stops_a_falling_curve_and_keeps_one_rising_through_jitter():
    assert flat([0.40, 0.42, 0.44, 0.43, 0.42, 0.41], window=3, min_gain=0.0, min_points=4)
    jitter = [0.30, 0.33, 0.32, 0.35, 0.34, 0.37, 0.36, 0.39]  # rising, every other point a step back
    assert all(not flat(jitter[:n], window=2, min_gain=0.005, min_points=3) for n in range(1, len(jitter) + 1))


def test_the_rule_never_reads_fewer_than_window_plus_one_points():
    assert not flat([0.5, 0.5, 0.5], window=3, min_gain=0.01, min_points=1)
    assert flat([0.5, 0.5, 0.5, 0.5], window=3, min_gain=0.01, min_points=1)
    assert not flat([], window=1, min_gain=0.01, min_points=0)


def test_curve_every_reads_steps_or_seconds():
    assert every_arg("50") == ("steps", 50) and every_arg("30s") == ("seconds", 30.0)
    for bad in ("0", "-3", "x", "2.5", "0s"):
        with pytest.raises(argparse.ArgumentTypeError):
            every_arg(bad)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A tiny protein AS-ARM (2 steps) on a tiny corpus; INFILL_* set for the module's runs."""
    tmp = tmp_path_factory.mktemp("curve")
    write_protein_corpus(tmp / "data")
    with cpu_data_env(tmp / "data"):
        assert train.cli(["--kind", "asarm", "--domain", "protein", "--hidden", "16", "--layers", "2", "--heads", "2",
                          "--ffn", "32", "--seq-len", "16", "--batch", "2", "--threads", "1", "--steps", "2",
                          "--out", str(tmp / "teacher"), "--quiet"]) == 0
        yield tmp


def head_args(tmp, out: str) -> list[str]:
    return ["--kind", "ptp", "--domain", "protein", "--teacher", str(tmp / "teacher"), "--layers", "1", "--heads", "2",
            "--ffn", "32", "--seq-len", "16", "--batch", "2", "--threads", "1", "--k", "3", "--ptp-mode", "onepass",
            "--out", str(tmp / out), "--quiet", "--save-minutes", "100", "--curve-windows", "4", "--warmup", "1"]


def state(folder) -> dict:
    return json.loads((folder / "train_state.json").read_text())


def test_the_curve_is_in_the_state_and_the_log(teacher, capsys):
    assert train.cli(head_args(teacher, "head") + ["--steps", "5", "--curve-every", "2"]) == 0
    log = capsys.readouterr().out
    st = state(teacher / "head")
    curve = st["acceptance_curve"]
    assert [p["step"] for p in curve["points"]] == [0, 2, 4, 5]  # the start, every 2 steps, the end
    assert [p["tokens"] for p in curve["points"]] == [0, 2 * 16 * 2, 4 * 16 * 2, 5 * 16 * 2]
    assert all(0 < p["acceptance"] <= 1 and p["seconds"] >= 0 for p in curve["points"])
    assert curve["every"] == "2 steps" and curve["stop_when_flat"] is None and st["stopped_flat"] is None
    lines = [ln for ln in log.splitlines() if ln.startswith("curve step")]
    assert len(lines) == 4 and lines[1].startswith("curve step 2 tokens 64 ")
    assert f"acceptance {curve['points'][1]['acceptance']:.4f}" in lines[1]


def test_stop_when_flat_stops_a_flat_run_and_saves(teacher):
    """A gain no curve reaches (+1.0): the run stops at its minimum number of points and saves."""
    out = teacher / "flat"
    assert train.cli(head_args(teacher, "flat") + ["--steps", "40", "--curve-every", "1",
                                                   "--stop-when-flat", "2", "1.0", "--stop-min-points", "4"]) == 0
    st = state(out)
    assert st["steps"] == 3 and [p["step"] for p in st["acceptance_curve"]["points"]] == [0, 1, 2, 3]
    assert st["stopped_flat"]["step"] == 3 and "over the last 2 points" in st["stopped_flat"]["reason"]
    assert st["acceptance_curve"]["stop_when_flat"] == {"window": 2, "min_gain": 1.0, "min_points": 4}
    assert (out / "model.safetensors").is_file()


def test_stop_when_flat_lets_a_rising_run_finish(teacher):
    """A gain every curve reaches (-1.0: any change counts): the run goes to its --steps."""
    assert train.cli(head_args(teacher, "rising") + ["--steps", "6", "--curve-every", "1",
                                                     "--stop-when-flat", "2", "-1.0", "--stop-min-points", "2"]) == 0
    st = state(teacher / "rising")
    assert st["steps"] == 6 and st["stopped_flat"] is None and len(st["acceptance_curve"]["points"]) == 7


def test_curve_flags_are_refused_where_they_cannot_apply(teacher):
    with pytest.raises(SystemExit):
        train.cli(head_args(teacher, "x") + ["--steps", "2", "--stop-when-flat", "2", "0.01"])  # no --curve-every
    with pytest.raises(SystemExit):
        train.cli(head_args(teacher, "x") + ["--steps", "2", "--curve-every", "1", "--stop-when-flat", "1.5", "0"])
    with pytest.raises(SystemExit):
        train.cli(["--kind", "asarm", "--domain", "protein", "--out", str(teacher / "y"), "--curve-every", "5"])
