"""How a run is built, in four named steps, each a function with its own tests
(tests/engine/test_run_setup.py); engine.api.InfillRun calls them in this order:

1. `resolve_request`: the sampler (the domain's default when none is named), the seed and every
   knob read by its table type and checked against its range (engine.params.read_knobs, the one
   range check: the page's narrower range for a run a server admits under its budget), and what
   the run records; nothing is loaded unless the sampler must be read from the model's domain.
2. `load_models`: the run's model (a held one as it is, a name through the registry), refused
   when its kind is not the sampler's, and the drafting network the catalogue entry names, with
   its fit check.
3. `parse_input`: the text read as the model's domain reads it (engine.inputs.domains.normalise:
   protein text as protein tools read it; `MaskedInput.note` says what changed, for the page, the
   API's `InfillResult.note` and the CLI), then its [MASK] spans read with that model's tokenizer (or
   a prepared MaskedInput checked against it). The one reading of typed text: the app, the API and
   the CLI all come through here.
4. `admit`: the budget's limits that scale with the input (engine.budget.Budget.check_params).

Every refusal is an InfillError raised before any network pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.inputs.domains import default_span, line_masks, normalise, unindented
from engine.inputs.masking import MaskedInput, parse_masked_text
from engine.loading.loaded_model import LoadedModel
from engine.loading.registry import default_model, load

from .budget import Budget
from .errors import BadParameterError, IncompatibleModelsError, ModelNotFoundError
from .params import KnobValues, recorded, refuse_unknown, seed_number, settle
from .samplers import DOMAIN_DEFAULT, SAMPLERS, SamplerSpec, default_sampler


def parse_for(text: str, lm: LoadedModel) -> MaskedInput:
    """Text with [MASK] / [MASK:n] sentinels as this model takes it: read by its domain's normaliser
    first (the note on the result says what that changed, '' if nothing), then with its tokenizer,
    its length and its domain's span rules (default span, one-line code spans, unindented lines)."""
    read, note = normalise(lm.domain, text)
    mi = parse_masked_text(read, lm.codec, max_tokens=lm.max_tokens, default_span=default_span(lm.domain),
                           line_masks=line_masks(lm.domain), after_newline=unindented(lm.domain))
    mi.note = note
    return mi


#: InfillRun's arguments that are not numbers: what each must be (None always allowed except where noted)
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "text": ((str,), "a string"),
    "model": ((str, LoadedModel), "a model name, folder or Hub id (a string), "
              "or a loaded model (engine.loading.loaded_model.LoadedModel)"),
    "sampler": ((str,), "a sampler name (a string)"),
    "domain": ((str,), "a domain name (a string)"),
    "draft_model": ((str, LoadedModel), "a model name, folder or Hub id (a string), or a loaded model"),
    "cache": ((bool,), "True or False"),
    "masked_input": ((MaskedInput,), "an engine.inputs.masking.MaskedInput"),
    "allow_paths": ((bool,), "True or False"),
    "budget": ((Budget,), "an engine.budget.Budget"),
    "device": ((str, torch.device), "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device"),
}
_REQUIRED = {"sampler", "allow_paths"}


def check_types(**values) -> None:
    """BadParameterError (the engine's error, not a TypeError mid-run) for an argument of the wrong type."""
    for name, v in values.items():
        types, what = _TYPES[name]
        if v is None and name not in _REQUIRED:
            continue
        if not isinstance(v, types):
            raise BadParameterError(f"{name} must be {what}, got {type(v).__name__}.")


def loaded(model: str | LoadedModel, allow_paths: bool = True, device=None) -> LoadedModel:
    """A model as the run takes it: one the caller already holds is used as it is (no second trip
    through the registry), a name, folder or Hub id is loaded on `device` ("auto" | "cpu" |
    "cuda[:N]" | a torch.device; None reads INFILL_DEVICE, engine/loading/device.py)."""
    return model if isinstance(model, LoadedModel) else load(model, allow_paths, device)


@dataclass(frozen=True, kw_only=True)
class Request:
    """A run's request, resolved: its catalogue entry, its seed, every knob's value (settled once,
    engine.params.settle: read by the table's type, range-checked; steps: the sampler's own where not
    given) and what it records."""

    spec: SamplerSpec
    seed: int
    knobs: KnobValues
    params: dict[str, object]  # what the run records: its sampler's knobs (with their group) and the cache


def resolve_request(sampler: str = DOMAIN_DEFAULT, *, domain: str | None = None,
                    model: str | LoadedModel | None = None, seed: object = 0, cache: bool | None = None,
                    knobs: dict[str, object] | None = None, served: bool = False, allow_paths: bool = True,
                    device=None) -> Request:
    """Step 1: which sampler, which seed, which knob values, what is recorded (see the module's doc).
    `served`: a run a server admits (one with a budget) takes the page's knob ranges (read_knobs)."""
    knobs = knobs or {}
    refuse_unknown(knobs, "InfillRun")  # before the sampler is resolved, which may load a model
    if sampler == DOMAIN_DEFAULT:  # the domain's default (engine.samplers.DEFAULT_SAMPLERS)
        sampler = default_sampler(domain or (loaded(model, allow_paths, device).domain if model else "text"))
    if sampler not in SAMPLERS:
        raise BadParameterError(f"Unknown sampler {sampler[:40]!r}. Choose one of: {', '.join(SAMPLERS)}.")
    spec = SAMPLERS[sampler]
    seed = seed_number(seed)  # the one seed rule (engine.params.seed_number)
    values = settle(knobs, default_steps=spec.default_steps, served=served)  # the run's one knob value
    # what the run records: k and temperature always (the sessions list shows them), the cache, and
    # every knob its sampler reads (with the rest of that knob's group: engine.params.recorded)
    params = {n: values[n] for n in recorded({"k", "temperature", *spec.reads})}
    params["cache"] = spec.cache if cache is None else cache
    return Request(spec=spec, seed=seed, knobs=values, params=params)


#: what each model kind is, in the words of a refusal
_KIND_WORDS = {"asarm": "an AS-ARM", "hybrid": "a hybrid (self-speculative masked diffusion) model"}


def require_kind(lm: LoadedModel, spec: SamplerSpec) -> None:
    """IncompatibleModelsError, before anything runs, for a model of another kind than the sampler drives."""
    if lm.kind != spec.kind:
        raise IncompatibleModelsError(
            f"{lm.name} is a {lm.kind} model; {spec.name} needs {_KIND_WORDS.get(spec.kind, 'a ' + spec.kind)}.")


def default_drafter(lm: LoadedModel, spec: SamplerSpec) -> str:
    """The bundled drafter of the model's domain (the catalogue's SecondModel kind), or a message saying
    what is missing."""
    kind, sampler = spec.second.kind, spec.name
    try:
        return default_model(lm.domain, kind)
    except ModelNotFoundError:
        how = f" ({spec.second.how.format(model=lm.name)})" if spec.second.how else ""
        raise ModelNotFoundError(
            f"{sampler} drafts with a {kind} model and none is available for the {lm.domain!r} domain "
            f"(expected {lm.domain}-{kind}); pass draft_model=... or train one{how}.") from None


def load_models(spec: SamplerSpec, model: str | LoadedModel | None = None, *, domain: str | None = None,
                draft_model: str | LoadedModel | None = None, allow_paths: bool = True,
                device=None) -> tuple[LoadedModel, LoadedModel | None]:
    """Step 2: the run's model (the domain's bundled one of the sampler's kind when none is named) and
    the drafting network its entry names (engine.samplers.drafter_contract.SecondModel), each checked."""
    lm = loaded(model or default_model(domain or "text", spec.kind), allow_paths, device)
    require_kind(lm, spec)
    draft_lm = None
    if spec.second is not None:
        draft_lm = loaded(draft_model or default_drafter(lm, spec), allow_paths, device)
        spec.second.check(lm, draft_lm)
    return lm, draft_lm


def parse_input(text: str | None, masked_input: MaskedInput | None, lm: LoadedModel) -> MaskedInput:
    """Step 3: the input as the model takes it: the text read by its domain's normaliser and parsed
    with its tokenizer (parse_for), or a MaskedInput prepared for that tokenizer (taken as it is)."""
    if masked_input is None:
        if text is None:
            raise BadParameterError("Give the text to fill (with [MASK] or [MASK:n]).")
        return parse_for(text, lm)
    if masked_input.mask_id != lm.codec.mask_id:  # prepared for another tokenizer
        raise BadParameterError(
            f"masked_input was prepared with mask id {masked_input.mask_id}; {lm.name}'s is "
            f"{lm.codec.mask_id}: prepare it with this model's tokenizer (engine.api.parse_for).")
    return masked_input


def admit(mi: MaskedInput, params: dict[str, object], budget: Budget | None) -> None:
    """Step 4: a run under a budget (a server's) is refused when its knobs ask more than the input
    needs (engine.budget.Budget.check_params); without one every run is admitted."""
    if budget is not None:
        budget.check_params(len(mi.masked), params)
