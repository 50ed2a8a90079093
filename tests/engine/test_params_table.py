"""One home for the sampler knobs (issue 23): engine.params.KNOBS. Every knob a sampler reads has a
row; the engine's checks, the API's and the exactness check's defaults and the CLI's flags are the
table's (the app's controls: tests/app/tabs/test_app_knobs.py)."""

from __future__ import annotations

import argparse
import inspect

import pytest

from engine.api import LIMITS, InfillRun
from engine.cli import build_parser
from engine.errors import BadParameterError
from engine.exactness.check import ExactnessCheck
from engine.params import KNOBS, read_knob
from engine.samplers import SAMPLERS, readers

NUMERIC = [n for n, k in KNOBS.items() if k.range is not None]


def test_every_knob_a_sampler_reads_has_a_table_row():
    missing = {s.name: [p for p in s.reads if p not in KNOBS] for s in SAMPLERS.values()}
    assert not {s: m for s, m in missing.items() if m}, f"knobs without a row in engine.params.KNOBS: {missing}"


def test_every_row_is_read_by_some_sampler():
    assert all(readers(n) for n in KNOBS), {n: readers(n) for n in KNOBS}
    assert readers("dtau") == ["self-spec"]
    assert set(readers("temperature")) == set(SAMPLERS)


def test_rows_are_well_formed():
    for k in KNOBS.values():
        assert k.help.strip() and k.type in (int, float, str), k
        assert (k.range is None) == bool(k.choices), k  # a number has a range, a choice its values
        if k.range is not None:
            lo, hi = k.range
            assert lo < hi
            plo, phi = k.page_range
            assert lo <= plo < phi <= hi, f"{k.name}: the page may offer less than the engine, never more"
            if k.ui is not None:
                assert k.ui_why, f"{k.name}: a narrower page range says why"
            default = k.page_default
            assert plo <= default <= phi, k
        else:
            assert k.default in k.choices


def test_engine_limits_are_the_tables():
    assert LIMITS == {n: KNOBS[n].range for n in NUMERIC}


@pytest.mark.parametrize("name", NUMERIC)
def test_the_api_refuses_just_outside_the_tables_range(name):
    lo, hi = KNOBS[name].range
    for bad in (lo - (1 if KNOBS[name].type is int else (lo / 2 or 0.01)),  # a range from 0: -0.01
                hi + (1 if KNOBS[name].type is int else hi / 10)):
        with pytest.raises(BadParameterError, match=name):
            InfillRun("a [MASK] b", sampler="self-spec" if name in ("dtau", "inner", "steps") else
                      "assd-ngram" if name == "confidence" else "assd", **{name: bad})


def test_window_choice_is_the_tables():
    assert read_knob("window", "linear") == "linear"
    with pytest.raises(BadParameterError, match="window must be 'cosine' or 'linear'"):
        InfillRun("a [MASK] b", sampler="self-spec", window="sine")


def test_python_defaults_are_the_tables():
    sig = inspect.signature(InfillRun.__init__).parameters
    for name, k in KNOBS.items():
        assert sig[name].default == k.default, name


def test_the_exactness_check_takes_the_tables_knobs_by_name(monkeypatch):
    import engine.exactness.check

    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the knobs were checked")

    monkeypatch.setattr(engine.exactness.check, "load", no_model)
    with pytest.raises(BadParameterError, match="unknown argument.*beta.*k, temperature"):
        ExactnessCheck("a [MASK:1] b", samplers="assd", beta=1)
    for name in LIMITS:  # read and range-checked by the table before any model loads
        lo, _ = KNOBS[name].range
        with pytest.raises(BadParameterError, match=name):
            ExactnessCheck("a [MASK:1] b", samplers="assd", **{name: lo - 1})


def _subparser(cmd: str) -> argparse.ArgumentParser:
    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[cmd]


@pytest.mark.parametrize("cmd", ["infill", "exactness"])
def test_cli_flags_are_the_tables(cmd):
    flags = {a.dest: a for a in _subparser(cmd)._actions}
    for name, k in KNOBS.items():
        a = flags[name]
        assert a.default == k.default, (cmd, name)
        if k.choices:
            assert list(a.choices) == list(k.choices), (cmd, name)
        else:
            assert a.type is k.type, (cmd, name)
            lo, hi = k.range
            assert f"{lo:g} to {hi:g}" in a.help, (cmd, name, a.help)
        assert k.help in a.help
        for s in readers(name):
            assert s in a.help or "every sampler" in a.help, (cmd, name, s)


def test_a_run_records_the_knobs_its_sampler_reads_with_their_group():
    """What a run stores as its setting (engine.params.recorded): k and temperature always, the cache,
    and a diffusion knob brings its whole group (self-spec reads dtau, window, inner: steps is
    recorded too, so a stored run says every number its diffusion schedule used)."""
    from engine.params import recorded

    assert recorded(("k", "temperature")) == ["k", "temperature"]
    assert recorded(("dtau",)) == ["steps", "dtau", "window", "inner"]
    assert recorded(("steps", "temperature")) == ["temperature", "steps", "dtau", "window", "inner"]
    plain = InfillRun("a [MASK] b", sampler="assd", k=3).params  # no grouped knob read: none widened
    assert set(plain) == {"k", "temperature", "cache", *SAMPLERS["assd"].reads}
    assert (plain["k"], plain["temperature"], plain["cache"]) == (3, 1.0, False)
    assert not {"steps", "dtau", "window", "inner"} & set(plain)
    run = InfillRun("a [MASK] b", sampler="self-spec", inner=2)
    assert run.params == {"k": 5, "temperature": 1.0, "steps": 32, "dtau": 0.05, "window": "cosine", "inner": 2,
                          "cache": False}
    check = ExactnessCheck("a [MASK:1] b", samplers="mdm", samples=1, steps=7)
    assert check.params == {"temperature": 1.0, "steps": 7, "dtau": 0.05, "window": "cosine", "inner": 1}


def test_a_two_word_knob_gets_a_hyphenated_flag(monkeypatch):
    """A later knob named with an underscore (say k_first) reads like the CLI's other two-word flags
    (--draft-model): --k-first, with --k_first still accepted, both into the knob's own name."""
    import engine.params
    from engine.cli import add_knob_args
    from engine.params import Knob

    row = Knob(name="k_first", type=int, default=0, range=(0, 64), help="How many tokens the first round drafts.")
    monkeypatch.setattr(engine.params, "KNOBS", {**KNOBS, "k_first": row})
    p = argparse.ArgumentParser()
    add_knob_args(p)
    assert p.parse_args(["--k-first", "3"]).k_first == 3
    assert p.parse_args(["--k_first", "4"]).k_first == 4
    assert p.parse_args([]).k_first == 0
    assert p.parse_args(["--window", "linear"]).window == "linear"
    assert "--k-first" in p.format_help()
