"""A run streamed round by round to the page: `start()` checks the form and announces the
session, `rounds()` admits the run (app.serving.slots), computes each step on a shared compute slot,
applies it to the display state and lets the store record it; `throttled()` paces the updates."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from app.run.form import Form, prepare
from app.serving import cancels
from app.serving.admission import admission, small_run_tokens
from app.serving.pending_sessions import create_session, mark_stored, pending_session
from app.serving.slots import Cancelled, Turns, slots
from app.serving.stops import request_stop, stop_requested
from app.serving.store_budget import run_bytes, store_budget
from app.stored.store import store
from app.views.render import TraceState
from app.views.token_views import run_state, token_view
from engine.api import InfillRun
from engine.trace import Step
from storage.recorder import RunGroup


def min_interval() -> float:
    """Seconds between two streamed UI updates (INFILL_UI_MIN_INTERVAL, default 0.25): four a second
    keep a run visibly moving, and each update costs the run its rendering and Gradio's transport
    (the step player replays every round afterwards at any speed)."""
    try:
        return max(0.0, float(os.environ.get("INFILL_UI_MIN_INTERVAL", "0.25")))
    except ValueError:
        return 0.25


def stored_params(run: InfillRun) -> dict:
    """A run's parameters as stored, with the model that really ran (statistics group by it)."""
    return {**run.params, "model": run.lm.name}



@dataclass(kw_only=True)
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
    address: str | None = None  # the visitor's key for the limits (app.serving.visitors), else owner
    created: float = field(default_factory=time.monotonic)
    cancelled: bool = False  # the visitor cancelled before the run computed anything
    note: str = ""  # what the domain's normaliser changed in the input (app.run.form.Form.note), for the status
    group: RunGroup | None = None  # stored with the other sides of a comparison, all at once
    side: int = 0  # which side of its group
    recorded: bool = False  # its recorder kept its steps (they count against the store's budget)
    rounds_shown: int = 0  # rounds handed to the page (Stop after one of them stores the run)
    ended: threading.Event = field(default_factory=threading.Event)  # set once rounds() is over
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stop(self) -> bool:
        """Stop pressed: the run stops at its next check. True when a round was handed to the
        page already or the run is over (it then ends after its round and is stored as cancelled,
        or is stored as it ended); False when none was (it stops before showing one and stores
        nothing)."""
        with self._lock:
            request_stop(self.share_id)
            return self.rounds_shown > 0 or self.done

    def show_round(self) -> bool:
        """A round is about to be handed to the page: False when Stop came before the first
        (the run then stores nothing, as stop() told the visitor)."""
        with self._lock:
            if self.rounds_shown == 0 and stop_requested(self.share_id):
                return False
            self.rounds_shown += 1
            return True


def rounds(live: Live) -> Iterator[Live]:
    """Advance `live` one round per iteration (the last round when the sampler ends), each step
    computed on a shared compute slot (app.serving.slots); the store records the run (ok, cancelled if the
    consumer stops early or Stop was requested, stopped when it used its budget, failed on an error). A job whose
    visitor cancelled it while it waited for its first slot ends at once and stores nothing.
    The run is first admitted (app.serving.admission: a few runs per visitor, long runs bounded); a
    refusal raises admission.Busy, an InfillError with the message, and stores nothing."""
    long = len(live.run.mi.masked) > small_run_tokens()
    who = live.address or live.owner or ""
    try:
        store_budget().admit(who)  # the store's bounds (app.serving.store_budget): StoreFull, before any work
    except BaseException:
        live.ended.set()
        raise
    try:
        with admission().enter(who, long, lambda: _called_off(live)):
            yield from _admitted_rounds(live)
    except Cancelled:  # cancelled while a long run waited in line for its seat
        live.cancelled = live.done = True
    finally:
        if live.recorded:
            store_budget().charge(who, run_bytes(live.steps, live.run.mi.source if live.side == 0 else ""))
        else:
            store_budget().release()
        live.ended.set()  # Stop reads the run's outcome from here (app.tabs.player.stop_run)


def _called_off(live: Live) -> bool:
    """Whether the visitor cancelled this run (the page's /cancel) or pressed Stop for it: checked
    from the moment it is accepted, while it waits for a seat or a slot and between the network
    passes of its first round, so that Stop never lets a run go on before anything was shown."""
    return cancels.cancelled_since(live.owner, live.created) or stop_requested(live.share_id)


def _admitted_rounds(live: Live) -> Iterator[Live]:
    """rounds() once admitted: the run on the slots, recorded by the store. `live.run_id` is set
    whenever the store holds the run, also when it ended by an error (a budget stop)."""
    run = live.run
    turns = Turns(slots(), lambda: _called_off(live))  # also checked between network passes until a round is shown
    run.pause = turns.preempt  # lighter runs take the slot between two network passes
    if live.group is not None:  # a comparison's side: stored with the others (RunGroup.commit)
        rec_cm = live.group.recorder(live.side, run.spec.name, stored_params(run), run.seed)
    else:
        rec_cm = store().recorder(live.share_id, run.spec.name, stored_params(run), run.seed,
                                  session=pending_session(live.share_id))
    rec = None
    try:
        with rec_cm as rec:
            try:
                yield from _recorded(live, rec, turns)
            finally:  # the sampler's own seconds, stored however it ended: what Compare shows, live and by link
                rec.compute_seconds = run.compute_seconds
    finally:
        live.recorded = rec is not None and not rec.discarded  # stored (or, a comparison's side, kept to store)
        if rec is not None and rec.run_id is not None:  # stored, however it ended: reachable by link
            live.run_id = rec.run_id
            mark_stored(live.share_id)
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
                if not live.show_round():  # Stop came before the first round was shown
                    raise Cancelled
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
            if not live.show_round():  # a run of one round, Stop came before it was shown: kept nowhere
                raise Cancelled
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


def throttled(it: Iterator[Live]) -> Iterator[Live]:
    """Pass through at most one update per min_interval(); the final update always passes."""
    gap, last = min_interval(), 0.0
    for live in it:
        now = time.perf_counter()
        if live.done or now - last >= gap:
            last = now
            yield live


def start(form: Form, kind: str = "infill", owner: str | None = None, address: str | None = None) -> Live:
    """A checked run with its share id and empty display state, ready for rounds() (nothing stored
    yet). `owner`: the visitor's session hash (cancels); `address`: its key for the limits."""
    run = prepare(form)
    share_id = create_session(kind, [run], form.text, form.domain)
    view = token_view(run)
    return Live(run=run, view=view, state=run_state(run, view), share_id=share_id, owner=owner, address=address, note=form.note)
