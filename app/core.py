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
from engine.samplers import SAMPLERS
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
#: the sampler the page starts with (one constant; the fastest exact sampler on the bundled models)
DEFAULT_SAMPLER = ENGINE_DEFAULT_SAMPLER  # preselected in the form: the engine's fastest exact sampler on CPU (issue 13)
MASK_PLACEHOLDER = "\u2581"

EXAMPLES: dict[str, list[str]] = {
    "text": [
        "The old man walked to the [MASK:12] and looked at the sea.",
        "Once upon a time, a little [MASK] lived in a small house near the [MASK:6].",
        "In the beginning God created the heaven and the [MASK:5]. And the earth was [MASK:20].",
    ],
    "code": [
        "def add(a, b):\n    [MASK:8]\n",
        "def is_even(n):\n    return [MASK:6]\n\nprint(is_even(4))\n",
        "for i in range(10):\n    if i % 2 == 0:\n        [MASK:10]\n",
    ],
    "protein": [
        "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGTQDNLSGAEKAVQV",
        "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF[MASK:20]GSAQVKGHGKKVADALTNAVAHV",
        "[MASK:8]GLSDGEWQQVLNVWGKVEADIAGHGQEVLIRLFTGHPETLEKF",
    ],
}

PARAM_HELP = {
    "k": "drafts per round (speculation depth)",
    "temperature": "softmax temperature of proposal and target",
    "seed": "random seed, 0 to 2**64 - 1: the same seed replays the same run",
    "steps": "diffusion steps of the cosine grid",
    "dtau": "window growth per outer step (self-speculative)",
    "window": "window schedule (self-speculative)",
    "inner": "inner verification loops per outer step",
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


def sampler_help(sampler: str) -> str:
    """One line on the sampler: what it does, the model it needs and its parameters."""
    spec = SAMPLERS.get(sampler)
    if spec is None:
        return ""
    knobs = ", ".join(f"{p}: {PARAM_HELP.get(p, '')}" for p in spec.params)
    needs = "a hybrid (self-speculative) model" if spec.family == "hybrid" else "an AS-ARM model"
    return f"{spec.help} Needs {needs}." + (f" Parameters: {knobs}." if knobs else "")


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
    k = as_int("k", form.k)
    seed = as_int("seed", form.seed)
    if not 0 <= seed <= SEED_MAX:
        raise BadParameterError("seed must be between 0 and 2**64 - 1.")
    return InfillRun(
        form.text, model=model, sampler=form.sampler, domain=form.domain, seed=seed,
        temperature=as_float("temperature", form.temperature), k=k,
        steps=as_int("steps", form.steps), dtau=as_float("dtau", form.dtau),
        window=str(form.window), inner=as_int("inner", form.inner), allow_paths=False,
        budget=Budget.from_env(),
    )


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


def speedup_line(live: Live) -> str:
    """After a finished AS-ARM run: cached sequential decoding of the same input, model, seed and
    temperature, run on a compute slot like any run (not stored), and the wall-time ratio of the
    two samplers' own compute (slot waits excluded). "" where it does not apply or is switched off
    (INFILL_SPEEDUP=0). Admitted like any run (a long one needs a long-run seat), so these
    second runs cannot take the seats kept for small runs; refused, there is no line."""
    if not speedup_applies(live):
        return ""
    run = live.run
    cancelled = lambda: cancels.cancelled_since(live.owner, live.created)  # noqa: E731
    try:
        with admission().enter(live.owner, len(run.mi.masked) > small_run_tokens(), cancelled):
            base = InfillRun(masked_input=run.mi, model=run.lm.name, sampler=BASELINE_SAMPLER, seed=run.seed,
                             temperature=run.params.get("temperature", 1.0), allow_paths=False,
                             budget=Budget.from_env())
            turns = Turns(slots(), cancelled)
            base.pause = turns.preempt
            for _ in turns.iterate(base.stream()):
                pass
    except (Cancelled, InfillError):  # cancelled, refused (slots.Busy) or over its budget: no line
        return ""
    except Exception:  # noqa: BLE001 - the extra timing must never spoil a finished, stored run
        log.exception("timing cached sequential decoding failed")
        return ""
    if run.compute_seconds <= 0:
        return ""
    ratio = base.compute_seconds / run.compute_seconds
    return (f"**vs cached sequential** {ratio:.2f}x ({_duration(base.compute_seconds)} against this run's "
            f"{_duration(run.compute_seconds)}; above 1: faster)")


def _duration(seconds: float) -> str:
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
