"""Handlers update the page by component name (app.tabs.common.named), while what outside clients
rely on stays fixed: the HTTP API's endpoint names, their parameter names and the order of their
outputs, and the page's element ids #player and #status (issue 23)."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from tests.support.studio import TEXT, tiny_studio

#: the public endpoints and their parameters as clients call them (measured before the change)
API = {
    "/compare_verdict": ["link"],
    "/compare": ["domain", "model", "text", "sampler", "k", "temperature", "seed", "steps", "dtau", "window", "inner",
                 "sampler_b", "model_b"],
    "/exactness": ["text", "model", "samplers", "n", "seed", "temperature", "k"],
    "/infill": ["domain", "model", "text", "sampler", "k", "temperature", "seed", "steps", "dtau", "window", "inner"],
    "/load_share": ["share_id"],
    "/measure_machine": ["domain"],
    "/mask_selection": ["text", "a", "b", "model", "domain"],
    "/play": ["i", "speed"],
    "/recent": ["ids"],
    "/replay": ["speed"],
    "/scrub": ["i"],
    "/show_tokens": ["text", "model", "domain"],
    "/speedup": ["link"],
    "/stats": ["domain", "model", "sampler"],
    "/step_back": ["i"],
    "/step_forward": ["i"],
    "/stop": [],
    "/toggle_tokens": ["selected"],
}
#: what /infill returns, in order (its gr.State outputs are not sent to clients)
INFILL_RETURNS = [None, None, None, "Current round", "Completed text", "Share link (appears once the run is stored)",
                  "Step in the stored trace (drag to scrub)"]


@pytest.fixture(scope="module")
def page():
    from app import create

    return create()


def _labels(returns: list[dict]) -> list:
    return [r.get("label") if not str(r.get("label", "")).startswith("value_") else None for r in returns]


def test_the_api_keeps_its_endpoints_parameters_and_output_order(page):
    from engine.params import KNOBS

    info = page.get_api_info()["named_endpoints"]
    got = {k: [p["parameter_name"] for p in v["parameters"]] for k, v in info.items()}
    # /exactness takes the table's other knobs after its published temperature and k, in the table's order
    published = len(API["/exactness"])
    assert got["/exactness"][published:] == [n for n in KNOBS if n not in ("temperature", "k")]
    got["/exactness"] = got["/exactness"][:published]
    # a knob added to the table since (engine.params.KNOBS) is appended to the form endpoints, after
    # every published parameter: none of those may move
    later = [name for name in KNOBS if name not in API["/infill"]]
    for form_endpoint in ("/infill", "/compare"):
        published = len(API[form_endpoint])
        assert got[form_endpoint][published:] == later, form_endpoint
        got[form_endpoint] = got[form_endpoint][:published]
    assert got == API
    assert _labels(info["/infill"]["returns"]) == INFILL_RETURNS
    assert _labels(info["/compare"]["returns"])[5:] == [
        "Summary", None, None, "Share link (appears once both runs are stored)"]


def test_the_page_keeps_its_element_ids(page):
    ids = {c["props"].get("elem_id") for c in page.get_config_file()["components"]}
    assert {"player", "status", "share-link", "completed"} <= ids


def test_named_turns_names_into_components_and_keeps_the_signature():
    from app.tabs.common import Page, components, named

    with gr.Blocks():
        p = Page(a=gr.Textbox(), b=gr.Textbox(), c=gr.Textbox())

    def plain(x, y=1, request: gr.Request = None):
        return {"a": x, "c": y}

    def gen(x):
        yield {"b": x}
        yield {}

    wrapped = named(p, plain)
    assert list(inspect.signature(wrapped).parameters) == ["x", "y", "request"]  # the API's parameter names
    assert wrapped.__name__ == "plain"
    assert wrapped(5) == {p.a: 5, p.c: 1}  # b is left out: Gradio keeps its value
    g = named(p, gen)
    assert inspect.isgeneratorfunction(g)
    assert list(g(3)) == [{p.b: 3}, gr.skip()]  # an empty update changes nothing (never an invalid one)
    assert components(p, ("c", "a")) == [p.c, p.a]
    with pytest.raises(AttributeError):
        named(p, lambda: {"nope": 1})()


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("outputs")) as store:
        yield store


def test_every_run_update_names_only_run_outputs(studio):
    """Run's frames, a refusal's and Stop's name only components their event lists (Gradio would
    refuse any other), and the last frame carries the text, the link and the trace."""
    from app.tabs import compare, playback, player

    frames = list(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 3, 32, 0.05, "cosine", 1))
    refused = list(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, -1, 32, 0.05, "cosine", 1))
    for f in frames + refused:
        assert f and set(f) <= set(player.RUN_OUTPUTS), set(f) - set(player.RUN_OUTPUTS)
    last = frames[-1]
    assert "Done" in last["status"] and last["completed"] and "?s=" in last["link"] and last["trace_state"]
    assert refused[0]["link"] == "" and "seed" in refused[0]["status"]
    sid = last["link"].split("?s=")[-1]
    assert set(player.stop_run(sid)) <= set(player.STOP_OUTPUTS)
    assert set(playback.frame(last["trace_state"], 1)) == set(playback.FRAME_OUTPUTS)
    cmp = list(compare.run_compare("text", "text-asarm", TEXT, "sequential", 4, 1.0, 3, 32, 0.05, "cosine", 1,
                                   "assd", "text-asarm"))
    for f in cmp:
        assert f and set(f) <= set(compare.COMPARE_OUTPUTS)
    assert "Done" in cmp[-1]["cmp_status"] and "?s=" in cmp[-1]["cmp_link"]
