"""The page's knob controls, texts, defaults and checks are the knob table's (engine.params.KNOBS,
issue 23): ranges, steps, start values, visibility per sampler, restored values and the form's
field order (the /infill endpoint's parameter names)."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from app.run import form
from app.tabs import common, compare, editor, player
from engine.params import KNOBS, SEED
from engine.samplers import SAMPLERS


def test_form_texts_ranges_and_defaults_are_the_tables():
    assert form.PARAM_HELP == {**{n: k.help for n, k in KNOBS.items()}, "seed": SEED.help}
    assert form.PAGE_RANGES == {n: k.page_range for n, k in KNOBS.items() if k.range}
    blank = form.Form(domain="text", model=None, text="", sampler="assd")
    assert blank.knobs == {name: k.page_default for name, k in KNOBS.items()}


def test_one_temperature_range_for_the_engine_and_the_page():
    """Issue 23: the page offered 0.05-3 while the engine took 0.05-10; now both take the table's."""
    assert form.PAGE_RANGES["temperature"] == KNOBS["temperature"].range == (0.05, 10.0)
    assert all(k.ui is None or k.ui_why for k in KNOBS.values())


@pytest.fixture(scope="module")
def page():
    p = common.Page(first_sampler="assd-cache", first_domain="text")
    with gr.Blocks():
        editor._parameters(p)
    return p


def test_the_controls_are_built_from_the_table(page):
    listed = set(SAMPLERS["assd-cache"].reads)
    for name, k in KNOBS.items():
        c = page.knobs[name]
        assert page.component(name) is c
        assert c.visible == (name in listed), name
        assert c.value == k.page_default, name
        assert k.help in c.info, name
        if k.choices:
            assert [ch[1] for ch in c.choices] == list(k.choices), name
        else:
            assert (c.minimum, c.maximum) == k.page_range, name
            assert c.step == k.ui_step, name


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_a_sampler_shows_exactly_the_knobs_it_reads(sampler, monkeypatch):
    monkeypatch.setattr(editor, "models_for", lambda d, s, m: {"model": gr.update()})
    out = editor.on_sampler(sampler, "text", None)
    vis = {name: u for name, u in out.items() if name in KNOBS}  # the knobs it updates, by name
    assert set(vis) == set(KNOBS)
    assert {n for n, u in vis.items() if u["visible"]} == set(SAMPLERS[sampler].reads)


def test_form_fields_are_the_knobs_and_the_handlers_take_them_in_order():
    # the /infill endpoint's parameter names and positions, as HTTP clients have them (a new knob is
    # appended: none of these may move)
    assert common.FORM_FIELDS[:11] == ("domain", "model", "text", "sampler", "k", "temperature", "seed", "steps",
                                       "dtau", "window", "inner")
    assert set(common.FORM_FIELDS) == {"domain", "model", "text", "sampler", "seed", *KNOBS}
    later = [n for n in KNOBS if n not in common.FORM_FIELDS[:11]]  # knobs added since: after an endpoint's own
    own = {player.run_infill: ([], ["watch", "request"]), player.run_page: (["watch"], ["request"]),
           compare.run_compare: (["sampler_b", "model_b"], ["request"])}
    for fn, (inputs, rest) in own.items():
        names = list(inspect.signature(fn).parameters)
        assert names == [*common.FORM_FIELDS[:11], *inputs, *later, *rest], fn.__name__


def test_a_new_knob_row_reaches_the_form_the_handlers_and_the_api(monkeypatch):
    """Adding a knob is one table row plus its sampler: the form, the handlers' (= /infill's)
    parameters and the Python API's signature follow the table without being edited."""
    from engine import api, params

    row = params.Knob(name="nudge", type=int, default=3, range=(1, 9), help="A knob that exists only in this test.")
    monkeypatch.setitem(params.KNOBS, "nudge", row)
    try:
        assert form.form_fields() == (*common.FORM_FIELDS, "nudge")
        # /compare: the new knob comes after sampler_b and model_b, which keep their published places
        published, since = common.FORM_FIELDS[:11], common.FORM_FIELDS[11:]
        assert common.endpoint_fields("sampler_b", "model_b") == (*published, "sampler_b", "model_b", *since, "nudge")
        handler = common.takes_form("sampler_b", "model_b")(lambda values, sampler_b, model_b: (values, sampler_b))
        got, b = handler(*range(11), "assd", "text-asarm", *range(len(since)), 7)
        assert b == "assd" and got["nudge"] == 7 and got["inner"] == 10
        got, _ = handler(*range(11), "assd", "text-asarm")  # a caller that does not know the new knob yet
        assert got["nudge"] == 3
        assert form.Form(domain="text", model=None, text="", sampler="assd").knobs["nudge"] == 3
        # a caller that builds the form from the published fields only (written before the knob)
        published = dict(zip(form.PUBLISHED_FIELDS, ("text", None, "a [MASK] b", "assd", 4, 1.0, 3, 32, 0.05,
                                                     "cosine", 1)))
        got = common.make_form(published).knobs
        assert got == {n: published[n] if n in published else k.page_default for n, k in KNOBS.items()}
        assert got["nudge"] == 3
        params.with_knobs(api.InfillRun.__init__, after="seed")
        sig = inspect.signature(api.InfillRun.__init__).parameters
        assert sig["nudge"].default == 3
        with pytest.raises(api.BadParameterError, match="nudge = 12 is outside"):
            api.InfillRun("a [MASK] b", model="text-asarm", sampler="assd", nudge=12)
    finally:
        monkeypatch.undo()
        params.with_knobs(api.InfillRun.__init__, after="seed")
    assert "nudge" not in inspect.signature(api.InfillRun.__init__).parameters


def test_a_restored_session_falls_back_to_the_tables_start_values(monkeypatch):
    from types import SimpleNamespace

    from app.tabs import sessions

    run = SimpleNamespace(params={"model": "m", "k": 7}, sampler="assd", seed=0, status="ok", steps=[],
                          completed_text="", id=1)
    rp = SimpleNamespace(runs=[run], session=SimpleNamespace(domain="text", model="m", text="t", share_id="x"),
                         kind="single", view_for=lambda r: {"masked": []})
    monkeypatch.setattr(sessions.replay, "load_session", lambda sid: rp)
    monkeypatch.setattr(sessions.token_views, "new_state", lambda view, steps: SimpleNamespace(round=0, detail=[]))
    for name in ("counters_md", "view_html", "detail_table"):
        monkeypatch.setattr(sessions, name, lambda *a, **k: "")
    monkeypatch.setattr(sessions.share, "share_link", lambda *a: "")
    monkeypatch.setattr(sessions.replay, "trace_ref", lambda *a: None, raising=False)
    v = sessions.restore_values("x")
    assert v["k"] == 7
    for name, k in KNOBS.items():
        if name != "k":
            assert v[name] == k.page_default, name


def test_the_editors_domain_handlers_update_components_by_name():
    """A domain switch sets the model list, the examples and (only when no model fits) the status; a
    person's switch puts that domain's first example and default sampler in the editor."""
    from app.examples import EXAMPLES
    from engine.samplers import default_sampler

    out = editor.on_domain("protein", default_sampler("protein"), None)
    assert set(out) == {"model", "example"}  # a model fits: the status keeps its line
    assert out["model"]["value"] in out["model"]["choices"] and out["model"]["value"].startswith("protein-")
    assert out["example"]["value"] == EXAMPLES["protein"][0]
    from app import choices

    assert editor.domain_example("code") == {"text": EXAMPLES["code"][0], "sampler": default_sampler("code"),
                                             "sampler_help": choices.sampler_help(default_sampler("code"), "code")}
    assert editor.models_b("text", "self-spec", None) == {"model_b": editor.models_for("text", "self-spec")["model"]}


def test_no_fitting_model_says_so_in_the_status(monkeypatch):
    from app import choices

    monkeypatch.setattr(choices, "list_models", lambda domain=None, kind=None: [])
    out = editor.models_for("text", "assd")
    assert out["model"]["choices"] == [] and out["model"]["value"] is None
    assert "⚠️" in out["status"] and choices.no_model_message("text", "asarm")[:20] in out["status"]



#: a page built with one knob row added after the published ones (in its own process, so the row is in the
#: table before app/ is imported, as a newcomer's row is): its raw /infill's answer to the published values,
#: and the outputs of /load_share and of the page's own restore (type and label of each, in order)
LATE_ROW_PAGE = """
import json, pathlib, sys
from engine import api, params
params.KNOBS["nudge"] = params.Knob(name="nudge", type=int, default=3, range=(1, 9), help="A knob that exists only in this test.")
params.with_knobs(api.InfillRun.__init__, after="seed")
from tests.support import sweep_bad_inputs as sweep
root = pathlib.Path(sys.argv[1])
sweep.setup(root)
from app import create
from app.stored import store as app_store
from storage import open_store
from tests.app.tabs.test_app_knobs import restore_outputs
app_store._store = open_store(f"sqlite:///{root / 'studio.db'}")
demo = create()
infill = next(f for f in demo.fns.values() if f.api_name == "infill")
print(json.dumps({"status": sweep.http_message(demo, "infill", sweep.form_values({})),
                  "infill_inputs": len(infill.inputs), **restore_outputs(demo)}))
"""


def restore_outputs(demo) -> dict:
    """The outputs of /load_share and of the page's Open (the handler `restore`), as (type, label) pairs."""
    def described(fn) -> list:
        return [[type(o).__name__, getattr(o, "label", None)] for o in fn.outputs]

    fns = list(demo.fns.values())
    return {"load_share": described(next(f for f in fns if f.api_name == "load_share")),
            "page": described(next(f for f in fns if f.name == "restore"))}


def test_a_knob_row_added_after_publication_keeps_the_http_api_as_published(tmp_path):
    """A newcomer's knob is its table row plus the sampler that reads it: a raw /infill request with
    only the published values still runs (the new knob takes its page default, no "this request sent
    11 values" refusal), and /load_share returns exactly its published outputs, in their places (HTTP
    clients and tests read them by index, from the front and from the end), while the page's own
    restore sets the new knob too."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from app import create
    from tests.support import sweep_bad_inputs as sweep

    assert list(sweep.FORM) == list(form.PUBLISHED_FIELDS)  # the request below: the published values only
    before = restore_outputs(create())
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", LATE_ROW_PAGE, str(tmp_path)], cwd=root, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["infill_inputs"] == len(form.FORM_FIELDS) + 1  # the page does take the new knob
    assert "⚠️" not in got["status"] and not got["status"].startswith("error"), got["status"]
    assert got["load_share"] == before["load_share"]
    # the page's own restore (private) sets the new knob's two controls: the editor's and the Exactness tab's
    assert got["page"].count(["Slider", "nudge"]) == 2
    assert [o for o in got["page"] if o != ["Slider", "nudge"]] == before["page"]
