"""The app's logic without Gradio: which models a visitor may pick, preparing a run from form
values, streaming it round by round into a TraceState while the store records it, and reading a
stored session back for replay. Every input problem surfaces as an `InfillError` message."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from engine import registry
from engine.api import LIMITS, InfillRun
from engine.budget import Budget
from engine.errors import BadParameterError, InfillError, ModelNotFoundError
from engine.samplers import DEFAULT_SAMPLER as ENGINE_DEFAULT_SAMPLER
from engine.samplers import SAMPLERS, cost_sentence, default_sampler
from engine.seeding import SEED_MAX
from engine.trace import Step
from storage import NewSession, SessionRecord, StorageInputError, Store, new_share_id, open_store

from . import cancels
from .inputs import as_float, as_int, check_sentinels, check_text, normalize
from .render import TraceState, fold
from .share import share_id_from_link
from .slots import Cancelled, Turns, admission, slots, small_run_tokens
from .textmap import bytes_fn

log = logging.getLogger("app")

DOMAINS = ["text", "code", "protein"]
#: the sampler the page starts with: the first domain's default (engine.samplers.DEFAULT_SAMPLERS:
#: the fastest exact speculative sampler measured for each domain; a domain switch picks its own)
DEFAULT_SAMPLER = ENGINE_DEFAULT_SAMPLER
MASK_PLACEHOLDER = "\u2581"

EXAMPLES: dict[str, list[str]] = {
    # the first example of each domain is the page's default input: more than one span, so the first
    # Run shows drafts, accepts and rejects across rounds
    "text": [
        "After dinner we sat by the warm [MASK:4] and talked about the [MASK:8] until the fire went out.",
        "The old man walked to the [MASK:12] and looked at the sea.",
        "Once upon a time, a little [MASK] lived in a small house near the [MASK:6].",
        "In the beginning God created the heaven and the [MASK:5]. And the earth was [MASK:20].",
    ],
    "code": [
        "def mean(xs):\n    total = [MASK:6]\n    [MASK]\n    return total / len(xs)\n",
        "def add(a, b):\n    [MASK:8]\n",
        "def is_even(n):\n    return [MASK:6]\n\nprint(is_even(4))\n",
        "for i in range(10):\n    if i % 2 == 0:\n        [MASK:10]\n",
    ],
    "protein": [
        "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGT[MASK:12]KAVQV",
        "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGTQDNLSGAEKAVQV",
        "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF[MASK:20]GSAQVKGHGKKVADALTNAVAHV",
        "[MASK:8]GLSDGEWQQVLNVWGKVEADIAGHGQEVLIRLFTGHPETLEKF",
    ],
}

#: one plain sentence per knob, shown at the control (its range follows it there)
PARAM_HELP = {
    "k": "How many tokens are guessed (drafted) per round before one network call checks them all.",
    "temperature": "Below 1 the model picks its likeliest tokens more often; above 1 it picks more freely.",
    "seed": "The random numbers: the same seed, input and settings give the same run again",
    "steps": "How many denoising steps the diffusion model takes (more steps, more network calls).",
    "dtau": "How far the drafting window grows each outer step: larger drafts more tokens at once.",
    "window": "How the drafting window grows over the run: along a cosine curve or in equal steps.",
    "inner": "How many times each outer step drafts and checks again before the window grows.",
}

#: what a visitor may type into each knob on the page (the sliders show these ranges; prepare()
#: refuses anything outside with a message that names the knob and its range)
PAGE_RANGES: dict[str, tuple[float, float]] = {
    "k": (1, 64), "temperature": (0.05, 3.0), "steps": (1, 512), "dtau": (0.001, 1.0), "inner": (1, 64),
}
SEED_HELP_RANGE = "a whole number from 0 to 18446744073709551615 (2^64 - 1)"

#: samplers whose network calls can exceed the tokens they fill, and why (said next to their help)
CALLS_NOTE = {
    "mdm": "Its calls can exceed the tokens it fills: every one of its steps is a full network pass over "
           "all masked positions, however few tokens that step reveals.",
    "self-spec": "Its calls can exceed the tokens it fills: each outer step drafts with one pass and checks "
                 "with more, and a rejected window is drafted again.",
    "assd-diffusion": "Its calls can exceed the tokens it fills: each round spends a few diffusion steps of the "
                      "drafter (counted as calls) before the AS-ARM checks the drafts, and rejected drafts are "
                      "redrawn next round.",
}

#: why a sampler needs a model other than the AS-ARM
KIND_WHY = {
    "hybrid": "it runs a hybrid model: a masked-diffusion network whose last block is causal, so it can draft "
              "many tokens at once and check them itself; the AS-ARM cannot do that",
}


def min_interval() -> float:
    """Seconds between two streamed UI updates (INFILL_UI_MIN_INTERVAL, default 0.25): four a second
    keep a run visibly moving, and each update costs the run its rendering and Gradio's transport
    (the step player replays every round afterwards at any speed)."""
    try:
        return max(0.0, float(os.environ.get("INFILL_UI_MIN_INTERVAL", "0.25")))
    except ValueError:
        return 0.25


# ----------------------------------------------------------------------------- store

_store: Store | None = None
_store_lock = threading.Lock()


def store() -> Store:
    """The process's one Store, opened (and migrated) on first use, so importing the app touches no database."""
    global _store
    with _store_lock:
        if _store is None:
            _store = open_store()
        return _store


# ----------------------------------------------------------------------------- models & samplers


def sampler_kind(sampler: str) -> str:
    """Which kind of model a sampler needs: 'hybrid' for the self-speculative family, else 'asarm'."""
    spec = SAMPLERS.get(sampler)
    return "hybrid" if spec is not None and spec.family == "hybrid" else "asarm"


def list_models(domain: str | None = None, kind: str | None = None) -> list[str]:
    """The model names a visitor may pick, for a domain and kind (an empty list, never an error page, when listing fails)."""
    try:
        rows = registry.available()
    except Exception:  # a broken folder must not take the page down
        log.exception("listing models failed")
        return []
    return sorted(
        r["name"] for r in rows
        if (domain is None or r["domain"] == domain) and (kind is None or r["kind"] == kind)
    )


def no_model_message(domain: str, kind: str) -> str:
    """What to say when no model fits, including how an operator adds one."""
    return (
        f"No {kind} model is available for the {domain!r} domain yet. The operator can add "
        "checkpoints under assets/models/ or list folders in INFILL_MODEL_DIRS."
    )


def sampler_help(sampler: str, domain: str | None = None) -> str:
    """What the sampler does, the model it needs, why its calls may exceed its tokens (diffusion),
    and, for a domain's default, what it costs against cached sequential decoding."""
    spec = SAMPLERS.get(sampler)
    if spec is None:
        return ""
    needs = "a hybrid (self-speculative) model" if spec.family == "hybrid" else "an AS-ARM model"
    out = f"{spec.help} Needs {needs}."
    if sampler in CALLS_NOTE:
        out += " " + CALLS_NOTE[sampler]
    if domain is not None and sampler == default_sampler(domain):
        out += " " + cost_sentence(domain)
    return out


def switch_note(sampler: str, old_model: str | None, new_model: str | None) -> str:
    """What to say when picking `sampler` changed the model (the page never swaps it silently)."""
    if not old_model or not new_model or old_model == new_model:
        return ""
    kind = sampler_kind(sampler)
    why = KIND_WHY.get(kind, "it drives an any-subset autoregressive model (AS-ARM) as its exact density oracle")
    return f"The model changed from {old_model} to {new_model}: {sampler} needs another model, because {why}."


def shown_params(sampler: str, params: dict) -> dict:
    """A run's stored parameters reduced to the knobs its sampler reads (Statistics names no others)."""
    spec = SAMPLERS.get(sampler)
    keep = set(spec.params) if spec is not None else set(params)
    return {k: v for k, v in params.items() if k in keep}


def check_range(name: str, value: float) -> None:
    """A knob typed outside the page's range is refused with its name and range (nothing runs)."""
    lo, hi = PAGE_RANGES[name]
    if not lo <= value <= hi:
        raise BadParameterError(f"{name} = {value:g} is outside this page's range {lo:g} to {hi:g}; "
                                f"type a value in it. ({PARAM_HELP[name]})")


def mask_hint(text: str) -> str:
    """A hint when the text holds a lower-case or mixed-case marker such as [mask] (markers are upper case)."""
    import re

    m = re.search(r"\[(?!MASK)[mM][aA][sS][kK](:[^\]]*)?\]", text or "")
    if not m:
        return ""
    return f"{m.group(0)} is not read as a marker: markers are upper case, write [MASK{m.group(1) or ''}]."


@dataclass
class Form:
    """The editor's values as they arrive from the page (unchecked: prepare() checks them)."""

    domain: str
    model: str | None
    text: str
    sampler: str
    k: float = 5
    temperature: float = 1.0
    seed: float = 0
    steps: float = 32
    dtau: float = 0.05
    window: str = "cosine"
    inner: float = 1


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
    form.text = normalize(form.domain, form.text)[0]
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
    seed_text = str(form.seed).strip() if form.seed is not None else ""
    if not seed_text:
        raise BadParameterError(f"seed is empty: type {SEED_HELP_RANGE}.")
    seed = as_int("seed", seed_text)
    if not 0 <= seed <= SEED_MAX:
        raise BadParameterError(f"seed = {seed} is outside the range: type {SEED_HELP_RANGE}.")
    values = {"k": as_int("k", form.k), "temperature": as_float("temperature", form.temperature),
              "steps": as_int("steps", form.steps), "dtau": as_float("dtau", form.dtau),
              "inner": as_int("inner", form.inner)}
    reads = SAMPLERS[form.sampler].params
    for name in list(values):  # the knobs this sampler reads are checked; the hidden, ignored ones reset
        if name in reads:
            check_range(name, values[name])
        else:
            values[name] = IGNORED_DEFAULTS[name]
    return InfillRun(
        form.text, model=model, sampler=form.sampler, domain=form.domain, seed=seed,
        temperature=values["temperature"], k=values["k"], steps=values["steps"], dtau=values["dtau"],
        window=str(form.window), inner=values["inner"], allow_paths=False, budget=Budget.from_env(),
    )


#: what a knob the sampler ignores is sent as (the engine's defaults; steps None: the sampler's own)
IGNORED_DEFAULTS = {"k": 5, "temperature": 1.0, "steps": None, "dtau": 0.05, "inner": 1}


def token_view(run: InfillRun) -> dict:
    """What replay needs to draw the input without loading the model (token_ids lets it decode
    multi-byte characters by offsets when the model's tokenizer is still listed)."""
    codec = run.lm.codec
    ms = set(run.mi.masked)
    return {
        "model": run.lm.name,
        "token_texts": [MASK_PLACEHOLDER if i in ms else codec.token_text(t) for i, t in enumerate(run.mi.tokens)],
        "token_ids": [None if i in ms else int(t) for i, t in enumerate(run.mi.tokens)],
        "masked": list(run.mi.masked),
        "span_ranges": [list(r) for r in run.mi.span_ranges],
    }


@functools.lru_cache(maxsize=32)
def _bytes_for_folder(folder: str):
    from engine.tokenization import Codec

    return bytes_fn(Codec.load(folder))


def bytes_for(view: dict):
    """token id -> bytes for the view's model (None when its tokenizer is not available). Cached
    by the model's folder, not its name: two folders may carry the same name."""
    if view.get("token_ids") is None:
        return None
    try:
        return _bytes_for_folder(str(registry.resolve(view.get("model") or "", allow_paths=False)))
    except Exception:  # noqa: BLE001 - a model no longer listed: fall back to per-token texts
        return None


def new_state(view: dict, steps: list[Step] | None = None, upto: int | None = None) -> TraceState:
    """The display state of a view after `upto` of `steps` (all of them by default)."""
    return fold(list(view["token_texts"]), list(view["masked"]), steps or [], upto,
                ids=view.get("token_ids"), bytes_of=bytes_for(view))


def stored_params(run: InfillRun) -> dict:
    """A run's parameters as stored, with the model that really ran (statistics group by it)."""
    return {**run.params, "model": run.lm.name}


#: sessions announced to a visitor (share id shown) but not stored yet: the first run's record
#: stores its session in the same transaction (storage.NewSession); bounded, oldest dropped
_pending: OrderedDict[str, NewSession] = OrderedDict()
_pending_lock = threading.Lock()
_PENDING_MAX = 4096


def create_session(kind: str, runs: list[InfillRun], text: str, domain: str) -> str:
    """A share id for these runs' session; the session is stored with its first run, so a run
    killed before it is recorded leaves nothing behind (and no session is ever without runs)."""
    models = sorted({r.lm.name for r in runs})
    payload = {"version": 1, "kind": kind, "views": {r.lm.name: token_view(r) for r in runs}}
    new = NewSession(domain, " | ".join(models), text, payload)
    share_id = new_share_id()
    with _pending_lock:
        _pending[share_id] = new
        while len(_pending) > _PENDING_MAX:
            _pending.popitem(last=False)
    return share_id


def _pending_session(share_id: str) -> NewSession | None:
    with _pending_lock:
        return _pending.get(share_id)


def _stored(share_id: str) -> None:
    with _pending_lock:
        _pending.pop(share_id, None)


# ----------------------------------------------------------------------------- streaming


@dataclass
class Live:
    """One run in progress (or finished): its state, its trace, its result."""

    run: InfillRun
    view: dict
    state: TraceState
    share_id: str
    steps: list[Step] = field(default_factory=list)
    done: bool = False
    result: object = None
    run_id: int | None = None
    error: str = ""
    stopped: bool = False  # Stop ended it; stored as cancelled
    owner: str | None = None  # the visitor's Gradio session hash (for cancels)
    created: float = field(default_factory=time.monotonic)
    cancelled: bool = False  # the visitor cancelled before the run computed anything


_stops: set[str] = set()
_stops_lock = threading.Lock()


def request_stop(share_id: str) -> None:
    """Ask the run of this session to stop after the round it is in (Stop's cooperative path:
    it works whether or not the web framework manages to cancel the streaming task)."""
    with _stops_lock:
        _stops.add(share_id)


def clear_stop(share_id: str) -> None:
    """Forget a Stop request (the consumer of the session's runs calls this when they are over)."""
    with _stops_lock:
        _stops.discard(share_id)


def stop_requested(share_id: str) -> bool:
    """Whether Stop was pressed for this session's runs."""
    with _stops_lock:
        return share_id in _stops


_skips: set[str] = set()


def request_skip(share_id: str) -> None:
    """Skip to end: the Watch pace of this session's run stops and its last frame shows (bounded:
    presses for runs that never watch are forgotten in bulk, never piled up)."""
    with _stops_lock:
        if len(_skips) >= 4096:
            _skips.clear()
        _skips.add(share_id)


def skip_requested(share_id: str) -> bool:
    """Whether Skip to end was pressed for this session's run."""
    with _stops_lock:
        return share_id in _skips


def clear_skip(share_id: str) -> None:
    """Forget a Skip to end request (the run's last frame has gone out)."""
    with _stops_lock:
        _skips.discard(share_id)


def rounds(live: Live) -> Iterator[Live]:
    """Advance `live` one round per iteration (the last round when the sampler ends), each step
    computed on a shared compute slot (app.slots); the store records the run (ok, cancelled if the
    consumer stops early or Stop was requested, stopped when it used its budget, failed on an error). A job whose
    visitor cancelled it while it waited for its first slot ends at once and stores nothing.
    The run is first admitted (app.slots.Admission: a few runs per visitor, long runs bounded); a
    refusal raises slots.Busy, an InfillError with the message, and stores nothing."""
    long = len(live.run.mi.masked) > small_run_tokens()
    try:
        with admission().enter(live.owner, long, lambda: cancels.cancelled_since(live.owner, live.created)):
            yield from _admitted_rounds(live)
    except Cancelled:  # cancelled while a long run waited in line for its seat
        live.cancelled = live.done = True


def _admitted_rounds(live: Live) -> Iterator[Live]:
    """rounds() once admitted: the run on the slots, recorded by the store. `live.run_id` is set
    whenever the store holds the run, also when it ended by an error (a budget stop)."""
    run = live.run
    turns = Turns(slots(), lambda: cancels.cancelled_since(live.owner, live.created))
    run.pause = turns.preempt  # lighter runs take the slot between two network passes
    rec_cm = store().recorder(live.share_id, run.spec.name, stored_params(run), run.seed,
                              session=_pending_session(live.share_id))
    rec = None
    try:
        with rec_cm as rec:
            yield from _recorded(live, rec, turns)
    finally:
        if rec is not None and rec.run_id is not None:  # stored, however it ended: reachable by link
            live.run_id = rec.run_id
            _stored(live.share_id)
    if not live.cancelled:
        yield live  # the final update, once the store holds the run


def _recorded(live: Live, rec, turns: Turns) -> Iterator[Live]:
    """The rounds of a run inside its recorder (rec.steps is what the store will hold: the steps
    the consumer was shown, never one read after it left or pressed Stop)."""
    run = live.run
    cur_round = None
    try:
        for step in rec.wrap(turns.iterate(run.stream())):
            if cur_round is not None and step.round != cur_round:
                try:
                    yield live  # the previous round is complete
                except GeneratorExit:  # the consumer left (a disconnect): it never saw this step
                    rec.steps.pop()
                    raise
                turns.cancelled = None  # from here on a cancel stops a run that was seen: stored
                if stop_requested(live.share_id):
                    rec.steps.pop()  # the step read after Stop was never shown
                    live.stopped = True
                    break
            cur_round = step.round
            live.steps.append(step)
            live.state.apply(step)
        if not live.stopped:
            with turns.turn():
                res = run.result()
    except Cancelled:
        rec.discard()
        live.cancelled = live.done = True
        return
    if not live.stopped:
        live.result = res
        rec.finish(completed_text=res.text, masked_tokens=res.masked_tokens, logprob=res.log_prob,
                   wall_seconds=res.seconds)
    live.done = True


BASELINE_SAMPLER = "sequential-cache"  # the strongest exact baseline (docs/DESIGN.md §5)


def speedup_applies(live: Live) -> bool:
    """A finished AS-ARM run of a sampler other than the baseline, with the line switched on."""
    run = live.run
    return (live.result is not None and os.environ.get("INFILL_SPEEDUP", "1") != "0"
            and run.spec.family != "hybrid" and run.lm.kind == "asarm" and run.spec.name != BASELINE_SAMPLER)


_SPEEDUP_PENDING: OrderedDict[str, Live] = OrderedDict()  # share id -> finished run, newest last
_SPEEDUP_KEEP = 64
_speedup_lock = threading.Lock()


def remember_for_speedup(live: Live) -> None:
    """Keep a finished run until the page's chained `speedup` event asks for it (bounded: the
    oldest are dropped, so an unasked run never piles up)."""
    if not speedup_applies(live):
        return
    with _speedup_lock:
        _SPEEDUP_PENDING[live.share_id] = live
        while len(_SPEEDUP_PENDING) > _SPEEDUP_KEEP:
            _SPEEDUP_PENDING.popitem(last=False)


def speedup_for(share_id: str) -> tuple[Live | None, str]:
    """(the run, its speed-up line) for a run remembered by remember_for_speedup; each is timed once."""
    with _speedup_lock:
        live = _SPEEDUP_PENDING.pop(share_id, None)
    return (live, speedup_line(live)) if live is not None else (None, "")


#: below this much work (masked tokens, or compute for one cached sequential run) timing noise
#: swamps any ratio: five identical one-token runs read 0.30x to 0.99x (issue 25)
MIN_TIMED_TOKENS = 8
MIN_TIMED_SECONDS = 0.05


def _speedup_seconds() -> float:
    """Compute the speed-up line may spend on its repetitions (INFILL_SPEEDUP_SECONDS, default 6)."""
    try:
        return max(0.0, float(os.environ.get("INFILL_SPEEDUP_SECONDS", "6")))
    except ValueError:
        return 6.0


def _rerun(live: Live, sampler: str) -> InfillRun:
    """The finished run again (same masked input, model, seed and knobs), or with another sampler."""
    run = live.run
    p = run.params
    same = sampler == run.spec.name
    return InfillRun(masked_input=run.mi, model=run.lm.name, sampler=sampler, seed=run.seed,
                     temperature=p.get("temperature", 1.0), k=p.get("k", 5) if same else 5,
                     steps=p.get("steps") if same else None, dtau=p.get("dtau", 0.05), window=p.get("window", "cosine"),
                     inner=p.get("inner", 1), draft_model=run.draft_lm.name if same and run.draft_lm else None,
                     allow_paths=False, budget=Budget.from_env())


def _timed(live: Live, sampler: str) -> float:
    """Compute seconds of one unstored run on a compute slot (slot waits excluded)."""
    r = _rerun(live, sampler)
    turns = Turns(slots(), lambda: cancels.cancelled_since(live.owner, live.created))
    r.pause = turns.preempt
    for _ in turns.iterate(r.stream()):
        pass
    return r.compute_seconds


def speed_ratio(base: list[float], run: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of the per-pair ratios base_i / run_i (above 1: the run is faster)."""
    import statistics

    ratios = sorted(b / r for b, r in zip(base, run) if r > 0)
    return statistics.median(ratios), ratios[0], ratios[-1]


def speedup_line(live: Live) -> str:
    """After a finished AS-ARM run: the same input, model, seed and temperature timed again, cached
    sequential decoding and this sampler alternating (unstored, each on a compute slot like any
    run; the finished run's own compute time is the first sample of its sampler), and the median
    of the pairs' wall-time ratios with their range. The first pair decides how many pairs fit in
    INFILL_SPEEDUP_SECONDS (1 to 7: a long run gets one, as before); below MIN_TIMED_TOKENS masked
    tokens or MIN_TIMED_SECONDS of cached sequential work the line says "too short to time" instead
    of a ratio. "" where it does not apply or is switched off (INFILL_SPEEDUP=0). The timing runs are
    admitted like any run (a long input needs a long-run seat), so they cannot take the seats kept
    for small runs, but not counted as the visitor's own; refused, there is no line."""
    if not speedup_applies(live):
        return ""
    name = live.run.spec.name
    n = len(live.run.mi.masked)
    if n < MIN_TIMED_TOKENS:
        return (f"**vs cached sequential** too short to time: {n} masked token" + ("s" if n != 1 else "")
                + f"; below {MIN_TIMED_TOKENS} timing noise decides the ratio. Mask more tokens to compare speeds.")
    cancelled = lambda: cancels.cancelled_since(live.owner, live.created)  # noqa: E731
    try:
        # the server's own measurement: it takes a long-run seat when long, but does not count
        # against the visitor's runs in progress (a Compare started right after Run is two runs)
        with admission().enter(None, n > small_run_tokens(), cancelled):
            base, run = _timed_pairs(live, name)
    except (Cancelled, InfillError):  # cancelled, refused (slots.Busy) or over its budget: no line
        return ""
    except Exception:  # noqa: BLE001 - the extra timing must never spoil a finished, stored run
        log.exception("timing cached sequential decoding failed")
        return ""
    if base is None:
        return (f"**vs cached sequential** too short to time: cached sequential decoding of this input took "
                f"{fmt_seconds(run[0])}, below {fmt_seconds(MIN_TIMED_SECONDS)} timing noise decides the "
                "ratio. Mask more tokens to compare speeds.")
    return _ratio_line(name, base, run)


def _timed_pairs(live: Live, name: str) -> tuple[list[float] | None, list[float]]:
    """Alternating compute times (cached sequential, this sampler); the finished run's own time is
    the sampler's first sample. (None, [base]) when cached sequential is too short to time."""
    base, run = [_timed(live, BASELINE_SAMPLER)], [live.run.compute_seconds]
    if base[0] < MIN_TIMED_SECONDS:
        return None, base
    pairs = int(max(1, min(7, _speedup_seconds() // max(base[0] + run[0], 1e-9))))
    for _ in range(pairs - 1):
        run.append(_timed(live, name))
        base.append(_timed(live, BASELINE_SAMPLER))
    return base, run


def _ratio_line(name: str, base: list[float], run: list[float]) -> str:
    """The speed-up line from the timed pairs: median ratio and its range."""
    import statistics

    if run[0] <= 0:
        return ""
    med, lo, hi = speed_ratio(base, run)
    spread = (f"median of {len(run)} alternating pairs (range {lo:.2f}-{hi:.2f}x" if len(run) > 1 else
              "one pair (a long run: more pairs would cost more than INFILL_SPEEDUP_SECONDS"
              f" = {_speedup_seconds():g} s of compute")
    return (f"**vs cached sequential** {med:.2f}x, {spread}; cached sequential {fmt_seconds(statistics.median(base))} "
            f"against {name}'s {fmt_seconds(statistics.median(run))}; above 1: faster)")


def fmt_seconds(seconds: float) -> str:
    """Seconds as a person reads them: milliseconds below one second, so two short runs differ."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def throttled(it: Iterator[Live]) -> Iterator[Live]:
    """Pass through at most one update per min_interval(); the final update always passes."""
    gap, last = min_interval(), 0.0
    for live in it:
        now = time.perf_counter()
        if live.done or now - last >= gap:
            last = now
            yield live


def start(form: Form, kind: str = "infill", owner: str | None = None) -> Live:
    """A checked run with its share id and empty display state, ready for rounds() (nothing stored yet)."""
    run = prepare(form)
    share_id = create_session(kind, [run], form.text, form.domain)
    view = token_view(run)
    return Live(run, view, new_state(view), share_id, owner=owner)


# ----------------------------------------------------------------------------- replay


class StoredTrace(Mapping):
    """A stored run's trace as a visitor's player state holds it: the run's id, the input's token
    view and a title; the steps are read from the store when the player needs them (the few most
    recent runs cached process-wide). Why: Gradio keeps each visitor's state in memory, and a
    trace of a thousand steps with their probabilities per visitor added up (issue 28); an id
    costs nothing. Reads like the {"view", "steps", "title"} dict the player used to hold."""

    __slots__ = ("run_id", "view", "title")

    def __init__(self, run_id: int, view: dict, title: str = ""):
        self.run_id, self.view, self.title = run_id, view, title

    def __getitem__(self, key: str):
        if key == "steps":
            return stored_steps(self.run_id)
        if key == "view":
            return self.view
        if key == "title":
            return self.title
        raise KeyError(key)

    def __iter__(self):
        return iter(("view", "steps", "title"))

    def __len__(self) -> int:
        return 3


_STEPS_KEEP = 16
_steps_cache: OrderedDict[tuple[int, int], list[Step]] = OrderedDict()
_steps_lock = threading.Lock()


def stored_steps(run_id: int) -> list[Step]:
    """The steps of stored run `run_id` ([] when retention deleted it), from a small LRU cache."""
    key = (id(store()), run_id)
    with _steps_lock:
        if key in _steps_cache:
            _steps_cache.move_to_end(key)
            return _steps_cache[key]
    run = store().get_run(run_id)
    steps = list(run.steps) if run is not None else []
    with _steps_lock:
        _steps_cache[key] = steps
        while len(_steps_cache) > _STEPS_KEEP:
            _steps_cache.popitem(last=False)
    return steps


def trace_ref(run_id: int | None, view: dict, steps: list[Step], title: str):
    """The player's state for a run: its id once stored (StoredTrace), else the steps themselves."""
    if run_id is None:
        return {"view": view, "steps": steps, "title": title}
    return StoredTrace(run_id, view, title)



@dataclass
class Replay:
    """A stored session read back for the page: its runs and the token views to draw them with."""

    session: SessionRecord
    runs: list  # RunRecord, oldest first
    views: dict

    def view_for(self, run) -> dict:
        """The token view of the model this run used (the first one for older sessions)."""
        m = run.params.get("model")
        if m in self.views:
            return self.views[m]
        return next(iter(self.views.values()))

    @property
    def kind(self) -> str:
        """'infill' or 'compare': which view the session restores into."""
        return self.session.spans.get("kind", "infill") if isinstance(self.session.spans, dict) else "infill"


def load_session(share_id: str) -> Replay:
    """A stored session by share id, with a message that says why when it cannot be replayed."""
    if not isinstance(share_id, str):
        raise BadParameterError("Give a share id or a share link (text).")
    share_id = share_id.strip()
    if "?" in share_id or "/" in share_id:  # a whole share link pasted: the id is its ?s= value
        share_id = share_id_from_link(share_id) or share_id
    if not share_id:
        raise BadParameterError("Give a share id or a share link (the id is the part after ?s=).")
    sess = store().get_session(share_id)
    if sess is None:
        raise BadParameterError("No stored session has this share id; check the link (a run is stored when it "
                                "ends, so a link opened while its run is still going is not there yet).")
    views = sess.spans.get("views") if isinstance(sess.spans, dict) else None
    if not views:
        raise BadParameterError("This session was stored without the data needed to replay it.")
    return Replay(sess, sorted(sess.runs, key=lambda r: r.id), views)


def readable(e: BaseException) -> str:
    """A message for the page: InfillError / storage messages verbatim, never a stack trace."""
    if isinstance(e, (InfillError, StorageInputError)):
        return str(e)
    log.exception("unexpected error", exc_info=e)
    return f"Something went wrong on the server ({type(e).__name__}). The run was not completed."


__all__ = ["DOMAINS", "EXAMPLES", "LIMITS", "Form", "Live", "Replay", "prepare", "start", "rounds",
           "throttled", "load_session", "readable", "list_models", "sampler_help", "store"]
