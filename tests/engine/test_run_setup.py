"""The four named steps a run is built in (engine/run_setup.py), each on its own: resolve the
request, load the models, parse the input, admit it. engine.api.InfillRun is those four in order
(tests/engine/test_params_table.py and test_sampler_contract.py hold the whole)."""

from __future__ import annotations

import pytest

import engine.run_setup as steps
from engine.budget import Budget
from engine.errors import BadParameterError, IncompatibleModelsError, ModelNotFoundError
from engine.params import KNOBS
from engine.run_setup import admit, load_models, parse_input, resolve_request
from engine.samplers import SAMPLERS, default_sampler
from tests.support.tiny import masked_input


@pytest.fixture
def no_loading(monkeypatch):
    """Any model load fails the test: the step under test must not load one."""
    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(steps, "load", refuse)


# ------------------------------------------------------------------ 1. resolve the request
def test_resolve_reads_every_knob_by_the_tables_type_and_records_what_the_sampler_reads(no_loading):
    r = resolve_request("self-spec", knobs={"inner": "2", "dtau": 0.1}, seed="7")
    assert r.spec is SAMPLERS["self-spec"] and r.seed == 7
    assert r.knobs["inner"] == 2 and r.knobs["dtau"] == 0.1 and r.knobs["k"] == KNOBS["k"].default
    assert r.knobs["steps"] == SAMPLERS["self-spec"].default_steps  # steps: the sampler's own
    assert r.params == {"k": 5, "temperature": 1.0, "steps": 32, "dtau": 0.1, "window": "cosine", "inner": 2,
                        "cache": False}
    assert resolve_request("assd-cache").params["cache"] is True
    assert resolve_request("assd-cache", cache=False).params["cache"] is False
    assert resolve_request("assd-diffusion").knobs["steps"] == 4


def test_resolve_takes_the_domains_default_sampler_without_loading(no_loading):
    assert resolve_request(domain="protein").spec.name == default_sampler("protein")
    assert resolve_request().spec.name == default_sampler("text")


def test_resolve_refuses_before_any_model_loads(no_loading):
    with pytest.raises(BadParameterError, match="Unknown sampler 'nope'"):
        resolve_request("nope")
    with pytest.raises(BadParameterError, match="unknown argument.*beta"):
        resolve_request("assd", knobs={"beta": 1})
    with pytest.raises(BadParameterError, match=r"seed = -1 is outside the range.*18446744073709551615"):
        resolve_request("assd", seed=-1)
    with pytest.raises(BadParameterError, match=r"k = 65 is outside the allowed range 1 to 64"):
        resolve_request("assd", knobs={"k": 65})
    with pytest.raises(BadParameterError, match="k must be a whole number"):
        resolve_request("assd", knobs={"k": 2.5})


def test_a_served_request_takes_the_pages_range_with_the_engines_message(no_loading):
    """The one range check (engine.params.read_knobs): a run a server admits (InfillRun with a
    budget, the page's and the HTTP API's) takes the table's page range, saying why it is narrower."""
    assert resolve_request("mdm", knobs={"steps": 600}).knobs["steps"] == 600
    with pytest.raises(BadParameterError, match=r"steps = 600 is outside the allowed range 1 to 512; every step"):
        resolve_request("mdm", knobs={"steps": 600}, served=True)


# ------------------------------------------------------------------ 2. load the models
def test_load_models_uses_a_held_model_as_it_is_and_refuses_the_wrong_kind(tiny_asarm, no_loading):
    lm, draft = load_models(SAMPLERS["assd"], tiny_asarm)
    assert lm is tiny_asarm and draft is None
    with pytest.raises(IncompatibleModelsError, match=f"{tiny_asarm.name} is a asarm model; mdm needs a hybrid"):
        load_models(SAMPLERS["mdm"], tiny_asarm)


def test_load_models_takes_the_domains_bundled_drafter_or_says_what_is_missing(tiny_asarm, monkeypatch):
    asked = []

    def bundled(domain, kind):
        asked.append((domain, kind))
        raise ModelNotFoundError("none")

    monkeypatch.setattr(steps, "default_model", bundled)
    with pytest.raises(ModelNotFoundError, match="assd-diffusion drafts with a hybrid model"):
        load_models(SAMPLERS["assd-diffusion"], tiny_asarm)
    assert asked == [(tiny_asarm.domain, "hybrid")]


# ------------------------------------------------------------------ 3. parse the input
def test_parse_input_reads_the_text_with_the_models_tokenizer(tiny_asarm):
    mi = parse_input("ab[MASK:2]c", None, tiny_asarm)
    assert len(mi.masked) == 2 and mi.mask_id == tiny_asarm.codec.mask_id
    held = masked_input(tiny_asarm.codec, {1: "c"}, 4)
    assert parse_input(None, held, tiny_asarm) is held
    with pytest.raises(BadParameterError, match="Give the text to fill"):
        parse_input(None, None, tiny_asarm)


def test_parse_input_refuses_an_input_prepared_for_another_tokenizer(tiny_asarm):
    from dataclasses import replace

    other = replace(masked_input(tiny_asarm.codec, {1: "c"}, 4), mask_id=tiny_asarm.codec.mask_id + 1)
    with pytest.raises(BadParameterError, match="prepared with mask id"):
        parse_input(None, other, tiny_asarm)


# ------------------------------------------------------------------ 4. admit it
def test_admit_applies_the_budgets_input_scaled_limits_only_under_a_budget(tiny_asarm):
    mi = masked_input(tiny_asarm.codec, {1: "c"}, 4)
    heavy = {"steps": 500, "inner": 1}
    admit(mi, heavy, None)  # the library and the CLI: no budget, no limit
    with pytest.raises(BadParameterError, match="steps = 500 is more than this input needs"):
        admit(mi, heavy, Budget(None, None))
    admit(mi, {"steps": 32, "inner": 1}, Budget(None, None))
