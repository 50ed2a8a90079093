"""A knob's value is settled once, where a request enters (engine.params.settle), and every reader
takes that value: a scratch knob with a default, added to the table and read by a scratch sampler
(both monkeypatched, no other file touched), reaches the Python API, the CLI's flags, the page's form
and the run it prepares, the exactness check and the Exactness tab's control, and the stored run, each
with the same value."""

from __future__ import annotations

import argparse
import inspect

import pytest

from engine import api, params
from engine.params import KnobValues
from engine.samplers import SAMPLERS
from engine.samplers.spec import SamplerSpec

TEXT = "The ship sailed into the [MASK:2] at dawn."


@pytest.fixture
def nudge(monkeypatch):
    """The scratch knob `nudge` (default 3, range 1-9) and the sampler `nudged` that reads it (the
    sequential sampler underneath); yields the values the sampler was called with."""
    seen: list[int] = []
    base = SAMPLERS["sequential"].run

    def _nudged(ctx, *, temperature: float, nudge: int):
        seen.append(nudge)
        return base(ctx, temperature=temperature)

    monkeypatch.setitem(params.KNOBS, "nudge", params.Knob(name="nudge", type=int, default=3, range=(1, 9),
                                                           help="A knob that exists only in this test."))
    monkeypatch.setitem(SAMPLERS, "nudged", SamplerSpec(name="nudged", kind="asarm", cache=False,
                                                        help="sequential, reading nudge", run=_nudged))
    params.with_knobs(api.InfillRun.__init__, after="seed")
    try:
        yield seen
    finally:
        monkeypatch.undo()
        params.with_knobs(api.InfillRun.__init__, after="seed")
    assert "nudge" not in inspect.signature(api.InfillRun.__init__).parameters


def test_the_settled_value_is_frozen_and_whole():
    v = params.settle({"k": 7}, default_steps=12)
    assert isinstance(v, KnobValues) and set(v) == set(params.KNOBS)
    assert (v["k"], v["temperature"], v["steps"]) == (7, params.KNOBS["temperature"].default, 12)
    with pytest.raises(TypeError):
        v["k"] = 8  # type: ignore[index]
    with pytest.raises(AttributeError):
        v._values = {}
    with pytest.raises(params.BadParameterError, match="unknown argument.*beta"):
        params.settle({"beta": 1})
    import copy
    import pickle

    assert copy.deepcopy(v) == v and pickle.loads(pickle.dumps(v)) == v  # a page's state may be copied


def test_a_scratch_knob_reaches_every_reader(nudge, tmp_path):
    seen = nudge
    # the Python API: the table's default, a given value, the range
    run = api.InfillRun(TEXT, model="text-asarm", sampler="nudged")
    list(run.stream())
    assert seen[-1] == 3 and run.knobs["nudge"] == 3 and run.params["nudge"] == 3
    r = api.infill(TEXT, model="text-asarm", sampler="nudged", nudge=7)
    assert seen[-1] == 7 and r.params["nudge"] == 7
    with pytest.raises(params.BadParameterError, match="nudge = 12 is outside"):
        api.InfillRun(TEXT, model="text-asarm", sampler="nudged", nudge=12)

    # the CLI: a flag with the table's default
    from engine import cli

    p = argparse.ArgumentParser()
    cli.add_knob_args(p)
    assert p.parse_args([]).nudge == 3 and p.parse_args(["--nudge", "5"]).nudge == 5

    # the page's form and the run it prepares
    from app.run import form

    assert form.Form(domain="text", model=None, text=TEXT, sampler="nudged").knobs["nudge"] == 3
    page_run = form.prepare(form.Form(domain="text", model="text-asarm", text=TEXT, sampler="nudged", nudge=6))
    list(page_run.stream())
    assert seen[-1] == 6 and page_run.knobs["nudge"] == 6

    # the exactness check: its draws run with the value, and it records it
    from engine.exactness.check import ExactnessCheck

    chk = ExactnessCheck(TEXT, samplers=["nudged"], samples=2, model="text-asarm", nudge=5)
    assert seen[-1] == 5 and chk.knobs["nudge"] == 5 and chk.params["nudge"] == 5

    # the Exactness tab: a control for the knob from its table row, shown when a chosen sampler reads it,
    # its endpoint taking it by name, and the value it holds reaching the check
    from app import create
    from app.tabs import exactness, exactness_knobs

    page = create()
    props = {c["props"].get("elem_id"): c["props"] for c in page.get_config_file()["components"]}
    assert props["exactness-knob-nudge"]["value"] == 3 and (props["exactness-knob-nudge"]["minimum"],
                                                             props["exactness-knob-nudge"]["maximum"]) == (1, 9)
    at = exactness_knobs.knob_names().index("nudge")
    assert exactness_knobs.shown(["nudged"])[at]["visible"] and not exactness_knobs.shown(["sequential"])[at]["visible"]
    endpoint = page.get_api_info()["named_endpoints"]["/exactness"]
    assert "nudge" in [q["parameter_name"] for q in endpoint["parameters"]]
    chk = exactness.prepare(TEXT, "text-asarm", ["nudged"], 2, 0, 0.5, 5, nudge=4)
    assert seen[-1] == 4 and chk.knobs["nudge"] == 4
    with pytest.raises(params.BadParameterError, match="nudge = 12 is outside"):
        exactness.prepare(TEXT, "text-asarm", ["nudged"], 2, 0, 0.5, 5, nudge=12)

    # the stored run: what the app stores is read back with the value
    from app.run.streaming import stored_params
    from storage import open_store

    store = open_store(f"sqlite:///{tmp_path / 'studio.db'}")
    share_id = store.create_session("text", "text-asarm", TEXT, [])
    run_id = store.record_run(share_id, "nudged", stored_params(page_run), page_run.seed, page_run.trace)
    assert store.get_run(run_id).params["nudge"] == 6
