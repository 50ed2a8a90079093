"""The editor's form checked into a run: `Form` holds the values as they arrive from the page,
`prepare()` checks what only the page knows (domain, sampler, model, text and its markers) and builds
the InfillRun, which reads the text through its domain's normaliser (the engine's one reading,
engine.run_setup.parse_for: `Form.note` keeps what it changed), the seed and the knobs the sampler
reads, and checks their ranges (the
engine's one check, engine.params.read_knobs, with the page's ranges for a served run); every
refusal is an InfillError whose message says what to type instead. PARAM_HELP and PAGE_RANGES
are the knobs' texts and slider ranges, read from the one knob table (engine.params.KNOBS)."""

from __future__ import annotations

import re

from app.choices import list_models, no_model_message, sampler_kind
from app.examples import DOMAINS
from app.run.inputs import check_sentinels, check_text
from engine.api import InfillRun
from engine.budget import Budget
from engine.errors import BadParameterError, ModelNotFoundError
from engine.params import KNOBS, SEED, SEED_RULE, read_knob, refuse_unknown, seed_number
from engine.samplers import SAMPLERS

#: one plain sentence per knob, shown at the control (its range follows it there): the table's
PARAM_HELP = {**{name: k.help for name, k in KNOBS.items()}, "seed": SEED.help}

#: what a visitor may type into each knob on the page (the sliders show these ranges; the engine
#: refuses anything outside a served run's range with a message that names the knob and its range):
#: the table's page range, narrower than the engine's only where the table says why
PAGE_RANGES: dict[str, tuple[float, float]] = {name: k.page_range for name, k in KNOBS.items() if k.range}
SEED_HELP_RANGE = SEED_RULE


def served_seed(v: object) -> int:
    """A seed as the server takes it, one rule in every form (the page's text box, /infill, /compare,
    /exactness): an integer, or a string of ASCII digits. A number written with a decimal point is
    refused whatever its value, JSON 1000.0 as "7.0" is (1000.0 ran while "7.0" was
    refused), with the same sentence; engine.params.seed_number reads the rest."""
    if isinstance(v, float):
        raise BadParameterError(f"seed must be {SEED_RULE}; got {v!r}.")
    return seed_number(v)


def unread_knob(name: str, v: object, sampler: str) -> None:
    """A knob the sampler does not read: the page sends every knob (the hidden ones hold values in
    their ranges), so a value in the knob's page range is ignored, but one outside it, or malformed,
    is refused, saying the sampler does not read it (steps=-1 and inner=1e6 ran silently)."""
    if v is None or v == "":
        return
    x = read_knob(name, v)
    k = KNOBS[name]
    if k.range is not None and not k.page_range[0] <= x <= k.page_range[1]:
        lo, hi = k.page_range
        raise BadParameterError(f"{name} = {x} is outside {lo:g} to {hi:g}. The {sampler} sampler does not read "
                                f"{name}: send a value in that range (the page sends {k.page_default:g}).")


def mask_hint(text: str) -> str:
    """A hint when the text holds a lower-case or mixed-case marker such as [mask] (markers are upper case)."""
    m = re.search(r"\[(?!MASK)[mM][aA][sS][kK](:[^\]]*)?\]", text or "")
    if not m:
        return ""
    return f"{m.group(0)} is not read as a marker: markers are upper case, write [MASK{m.group(1) or ''}]."


#: the knobs on the page's first row, before the seed (the rest follow it)
FIRST_ROW = ("k", "temperature")
#: how many of the knob table's rows the /infill and /compare endpoints were published with: those
#: rows keep their places (a new row goes after them, engine.params.KNOBS)
PUBLISHED_KNOBS = 6
#: the form's inputs as the /infill and /compare endpoints were published, by position: HTTP clients
#: that call them positionally rely on these places (tests/app/tabs/test_app_outputs.py holds the contract)
PUBLISHED_FIELDS = ("domain", "model", "text", "sampler", *FIRST_ROW, "seed",
                    *(name for name in list(KNOBS)[:PUBLISHED_KNOBS] if name not in FIRST_ROW))


def added_fields() -> tuple[str, ...]:
    """The knobs added to the table since the endpoints were published, in the table's order: the one
    answer to "what came after publication". Each goes after everything a client already reads by
    position (an endpoint's own inputs), /load_share leaves them out (the page's own restore sets
    them, app.tabs.sessions), and a request that leaves them out gets their page defaults
    (app.ui.StudioBlocks), so a newcomer's row moves nothing an HTTP client reads."""
    return tuple(name for name in KNOBS if name not in PUBLISHED_FIELDS)


def form_fields() -> tuple[str, ...]:
    """FORM_FIELDS from the knob table as it stands: the published fields, then added_fields()
    (app.tabs.common.takes_form places those after an endpoint's own inputs, so no published
    position moves)."""
    return (*PUBLISHED_FIELDS, *added_fields())


#: the form's inputs: the domain, model, text, sampler, seed and every knob of the table
FORM_FIELDS = form_fields()


class Form:
    """The editor's values as they arrive from the page (unchecked: prepare() checks them): the
    domain, model, text, sampler and seed, and `knobs`, every knob of the table by name (the page's
    start value where not given)."""

    def __init__(self, domain: str, model: str | None, text: str, sampler: str, seed: object = SEED.default,
                 **knobs: object):
        refuse_unknown(knobs, "Form")  # the engine's one check of knob names
        self.domain, self.model, self.text, self.sampler, self.seed = domain, model, text, sampler, seed
        self.knobs: dict[str, object] = {name: knobs.get(name, k.page_default) for name, k in KNOBS.items()}
        self.note = ""  # what the domain's normaliser changed in the text (prepare() sets it from the run)

    def __repr__(self) -> str:
        fields = {"domain": self.domain, "model": self.model, "text": self.text, "sampler": self.sampler,
                  "seed": self.seed, **self.knobs}
        return f"Form({', '.join(f'{n}={fields[n]!r}' for n in FORM_FIELDS)})"


def prepare(form: Form) -> InfillRun:
    """Form values -> InfillRun (checks everything; raises InfillError with a readable message)."""
    for name in ("domain", "sampler", "model"):
        v = getattr(form, name)
        if not (isinstance(v, str) or (name == "model" and v is None)):
            raise BadParameterError(f"{name} must be a name (text), got {type(v).__name__}.")
    if form.domain not in DOMAINS:
        raise BadParameterError(f"Unknown domain {form.domain!r}. Choose one of: {', '.join(DOMAINS)}.")
    if form.sampler not in SAMPLERS:
        raise BadParameterError(f"Unknown sampler {form.sampler!r}. Choose one of: {', '.join(SAMPLERS)}.")
    check_text(form.text)
    check_sentinels(form.text)
    if "[MASK" not in form.text and mask_hint(form.text):
        raise BadParameterError("Nothing is masked. " + mask_hint(form.text))
    kind = sampler_kind(form.sampler)
    allowed = list_models(form.domain, kind)
    if not allowed:
        raise ModelNotFoundError(no_model_message(form.domain, kind))
    model = form.model or allowed[0]
    if model not in allowed:
        all_models = list_models()
        if model in all_models:
            raise BadParameterError(
                f"Model {model!r} does not fit: the {form.sampler} sampler on {form.domain!r} needs one of: "
                f"{', '.join(allowed)}."
            )
        raise ModelNotFoundError(f"No model named {model!r}. Available: {', '.join(allowed)}.")
    if form.seed is None or form.seed == "":
        raise BadParameterError(f"seed is empty: type {SEED_HELP_RANGE}.")
    # the knobs this sampler reads go to the engine as typed: it reads each by its type and range (the
    # page's, under the server's budget) and says what is wrong. The hidden ones the sampler ignores are
    # not sent (the run takes the table's defaults), but a malformed or out-of-range one is refused
    # (unread_knob)
    reads = SAMPLERS[form.sampler].reads
    knobs = {name: v for name, v in form.knobs.items() if name in reads}
    for name, v in form.knobs.items():
        if name not in reads:
            unread_knob(name, v, form.sampler)
    run = InfillRun(
        form.text, model=model, sampler=form.sampler, domain=form.domain, seed=served_seed(form.seed), **knobs,
        allow_paths=False, budget=Budget.from_env(),
    )
    # the engine read the text through the domain's normaliser (its one reading): the session stores
    # the text as read, and the status says what the reading changed
    form.text, form.note = run.mi.source, run.note
    return run
