"""Compute slots shared by every run of this process, handed out least-attained-service first.

Why: Gradio's queue admits a run and keeps it until it ends, so two huge runs on the two model
slots made every small run wait for them (a 6-token run waited 76 s). Here many runs may be in
progress at once (Gradio's concurrency for run events, INFILL_ACTIVE_RUNS, default 16), but
only INFILL_CONCURRENCY (default 2) compute at a time. A run takes a slot for one `next()` of
its sampler and gives it back after; between two network passes (engine.budget's checkpoint) it
also gives it up at once when a run of higher priority waits. Priority is a multi-level
feedback queue: level 0 while a run has computed under 0.5 s, then 2 s, 8 s, beyond; first
come first served within a level. So a new small run goes ahead of long ones and its latency
hardly depends on them, small runs among themselves keep their arrival order (no processor
sharing that would finish them all late), and a long run computes whenever no lighter run waits
(its budget, engine.budget, counts only its computing time).

Priorities age (a 0.8 s run took 41 s among 20 visitors looping short runs): while runs
past level 0 wait, AGE_RATE x (number of slots) seconds of service are forgiven per second, all
to the one that arrived first (`AgingClock`), so it climbs back to level 0, where its earlier
arrival puts it before newer runs. The long runs together thus take at most about AGE_RATE of the
slots from the short ones however many wait (sixteen worst-case runs each aging on its own
crowded the short runs out: measured, 150 s for 24-token runs), a lone long run among a stream
of short ones gets about AGE_RATE / (1 + AGE_RATE) of the slots, and a run waits only for work
that arrived before it or is lighter than it: never unboundedly.

Admission comes before the slots: app.serving.admission.

A run waiting for a slot also watches for its visitor's cancel (app.serving.cancels): a job cancelled
before it computed anything leaves no trace at all (`Cancelled`).

The wait a new run can expect (`Slots.estimate`, shown on the page before it starts) follows the
same rules from measured times: the runs that would compute before it, each until it finishes (the
mean measured compute time of finished runs) or leaves the new run's level, shared over the
slots, plus about one turn until a slot frees (it leaves aging out: an upper estimate for a new run)."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from engine.envvars import env_int

T = TypeVar("T")


class Cancelled(Exception):
    """The visitor cancelled this job (or pressed Stop) while it waited for a slot or computed its
    first round: nothing was shown, so nothing is stored."""


def concurrency() -> int:
    """Runs computing at once (INFILL_CONCURRENCY, default 2)."""
    return env_int("INFILL_CONCURRENCY", 2)


def active_runs() -> int:
    """Runs in progress at once, taking turns on the slots (INFILL_ACTIVE_RUNS, default 16)."""
    return max(env_int("INFILL_ACTIVE_RUNS", 16), concurrency())


@dataclass(eq=False, kw_only=True)
class _Waiter:
    """A run waiting for a slot. `static` is a fixed priority (callers that give one); otherwise its
    priority ages: `virtual` seconds of service less the `credit` the AgingClock gave it while it
    waited, if it `ages` (it waits past level 0)."""

    static: tuple | None
    arrival: int
    virtual: float
    attained: float
    ages: bool = False
    credit: float = 0.0
    event: threading.Event = field(default_factory=threading.Event)
    granted: float = 0.0  # the credit it had when handed a slot

    def priority(self) -> tuple:
        if self.static is not None:
            return self.static
        return aged_priority(self.virtual, self.credit if self.ages else 0.0, self.arrival)


class AgingClock:
    """Aging credit: `rate` x `n_slots` seconds of service forgiven per second while any run waits
    past level 0, all of it to the one that arrived first among those still past level 0 with the
    credit they have. So the long runs together earn at most that share of the slots, however many
    wait, and a waiting run is overtaken only by work that arrived before it and by runs lighter
    than it: its wait is bounded."""

    def __init__(self, n_slots: int, now: float, rate: float | None = None):
        self.n, self.rate, self.t = n_slots, rate, now

    def advance(self, now: float, aging: list) -> None:
        """Credit the time since the last call to the first arrived of `aging` (items with
        `arrival`, `virtual` and `credit`) still past level 0, then move the clock to `now`."""
        rate = AGE_RATE if self.rate is None else self.rate
        needy = [w for w in aging if level(max(0.0, w.virtual - w.credit)) > 0]
        if needy and now > self.t:
            min(needy, key=lambda w: w.arrival).credit += (now - self.t) * rate * self.n
        self.t = max(self.t, now)


class Slots:
    """The compute slots of this process and the runs waiting for one (lowest priority first;
    priorities age while a run waits), with the measured times the wait estimate needs."""

    def __init__(self, n: int, clock: Callable[[], float] = time.monotonic):
        self.n = self.free = n
        self.clock = clock
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self.aging = AgingClock(n, clock())
        self._seq = itertools.count()
        self._runs: deque[float] = deque(maxlen=64)  # compute seconds of recently finished runs
        self._turns: deque[float] = deque(maxlen=256)  # seconds a slot was held in one go
        self._holders: dict[int, tuple[tuple, float]] = {}  # run -> (priority, attained) while it computes

    def _first(self, now: float) -> _Waiter | None:
        """The waiter that goes next (a few dozen at most wait: a scan, not a heap, since priorities age)."""
        self.aging.advance(now, [w for w in self._waiters if w.ages])
        return min(self._waiters, key=lambda w: w.priority(), default=None)

    def _leave(self, w: _Waiter, now: float) -> None:
        self.aging.advance(now, [x for x in self._waiters if x.ages])
        self._waiters.remove(w)

    def acquire(self, priority: tuple | None = None, cancelled: Callable[[], bool] | None = None,
                attained: float = 0.0, *, arrival: int | None = None, virtual: float | None = None) -> float:
        """Take a slot; return the aging credit earned while waiting (seconds of service to forgive).
        Among waiters the lowest priority goes first: a fixed `priority`, or (with `arrival` and
        `virtual`) the aged priority of a run with `virtual` seconds of service (aged_priority with
        its share of the AgingClock). Raises Cancelled (without a slot) when `cancelled()` turns
        true while waiting. `attained` (the run's compute seconds so far) only feeds the estimate."""
        with self._lock:
            if self.free > 0 and not self._waiters:
                self.free -= 1
                return 0.0
            v = virtual if virtual is not None else attained
            w = _Waiter(
                static=priority, arrival=arrival if arrival is not None else next(self._seq), virtual=v, attained=attained
            )
            self.aging.advance(self.clock(), [x for x in self._waiters if x.ages])  # credit up to now
            w.ages = priority is None and level(v) > 0
            self._waiters.append(w)
        while not w.event.wait(0.1):
            if cancelled is not None and cancelled():
                with self._lock:
                    if not w.event.is_set():  # still waiting: leave the line
                        self._leave(w, self.clock())
                        raise Cancelled
                break  # the slot was handed over meanwhile: keep it
        return w.granted

    def better_waiting(self, priority: tuple) -> bool:
        """Whether a waiter (with its aged priority) would go before `priority`."""
        with self._lock:
            w = self._first(self.clock())
            return w is not None and w.priority() < priority

    def release(self) -> None:
        """Give a slot back: straight to the first waiter, else to the pool."""
        with self._lock:
            now = self.clock()
            w = self._first(now)
            if w is not None:
                w.granted = w.credit if w.ages else 0.0
                self._leave(w, now)
                w.event.set()  # hand the slot over directly: no barging
            else:
                self.free += 1

    def note_holder(self, key: int, priority: tuple, attained: float) -> None:
        """Run `key` computes on a slot (its priority and attained time feed the wait estimate)."""
        with self._lock:
            self._holders[key] = (priority, attained)

    def note_turn(self, key: int, seconds: float) -> None:
        """Run `key` gave its slot back after holding it for `seconds` in one go."""
        with self._lock:
            self._holders.pop(key, None)
            self._turns.append(seconds)

    def note_run(self, seconds: float) -> None:
        """A run finished after computing for `seconds` in all (measured for the wait estimate)."""
        with self._lock:
            self._runs.append(seconds)

    def estimate(self, priority: tuple = (0, float("inf"))) -> WaitEstimate:
        """The wait of a run queueing now at `priority` (default: a newly arrived run)."""
        with self._lock:
            self.aging.advance(self.clock(), [w for w in self._waiters if w.ages])
            ahead = [w.attained for w in self._waiters if w.priority() < priority]
            ahead += [a for p, a in self._holders.values() if p < priority]
            busy = self.free == 0 or bool(self._waiters)
            mean_run = statistics.fmean(self._runs) if self._runs else None
            mean_turn = statistics.fmean(self._turns) if self._turns else 0.0
        return estimate_wait(self.n, busy, priority[0], ahead, mean_run, mean_turn)


@dataclass(frozen=True)
class WaitEstimate:
    """What a run about to queue for a compute slot can expect: how many runs compute before it
    and about how long that takes (None until some run has finished and been measured)."""

    ahead: int
    seconds: float | None
    busy: bool

    def message(self) -> str:
        """The sentence the page shows while the run waits ('' when a slot is free)."""
        if not self.busy:
            return ""
        runs = f"{self.ahead} run" + ("s" if self.ahead != 1 else "")
        when = "" if self.seconds is None else f", about {self.seconds:.1f} s from measured run times"
        return f"Waiting for a compute slot: every slot is busy and {runs} go first{when}."


def estimate_wait(n_slots: int, busy: bool, level_: int, ahead_attained: list[float],
                  mean_run: float | None, mean_turn: float) -> WaitEstimate:
    """The wait of a run at level `level_` behind the runs (computing or waiting) that go first,
    which have computed `ahead_attained` seconds: each computes before it until it finishes
    (`mean_run` in all) or passes the end of the waiting run's level; that work is spread over
    `n_slots`, plus about one turn (`mean_turn`) until a running turn ends."""
    if not busy:
        return WaitEstimate(0, 0.0, False)
    if mean_run is None:
        return WaitEstimate(len(ahead_attained), None, True)
    cap = LEVELS[level_] if level_ < len(LEVELS) else float("inf")
    work = sum(max(0.0, min(mean_run, cap) - a) for a in ahead_attained)
    return WaitEstimate(len(ahead_attained), mean_turn + work / max(1, n_slots), True)


#: seconds of computing that end priority levels 0, 1 and 2
LEVELS = (0.5, 2.0, 8.0)
#: seconds of service forgiven per second and per slot to the first arrived of the runs waiting
#: past level 0 (AgingClock): it climbs back a level and no run waits unboundedly (a
#: 0.8 s run took 41 s), and long runs together take at most about this share from short ones
AGE_RATE = 0.25
_arrivals = itertools.count()


def level(attained: float) -> int:
    """The feedback-queue level of a run that has computed `attained` seconds."""
    return sum(attained >= t for t in LEVELS)


def aged_priority(virtual: float, credit: float, arrival: int) -> tuple:
    """(level, arrival) of a run with `virtual` seconds of service that was given `credit` seconds
    of aging while it waited (AgingClock): the credit comes off its service (not below 0)."""
    return (level(max(0.0, virtual - max(0.0, credit))), arrival)


class Turns:
    """One run's use of the slots: its attained computing time, the service its priority counts
    (attained less what waiting forgave), its arrival, its cancel check."""

    def __init__(self, slots: Slots, cancelled: Callable[[], bool] | None = None):
        self.slots, self.cancelled, self.attained = slots, cancelled, 0.0
        self.virtual = 0.0  # service as the priority counts it (aged while waiting)
        self.arrival = next(_arrivals)
        self._t: float | None = None  # start of the current turn (slot held)
        self._held = 0.0  # when the slot was last taken

    def priority(self) -> tuple:
        """(level, arrival): lighter runs first, then first come first served."""
        return (level(self.virtual), self.arrival)

    def _computed(self, seconds: float) -> None:
        self.attained += seconds
        self.virtual += seconds

    def _hold(self) -> None:
        credit = self.slots.acquire(None, self.cancelled, self.attained, arrival=self.arrival, virtual=self.virtual)
        self.virtual = max(0.0, self.virtual - credit)
        self._t = self._held = time.perf_counter()
        self.slots.note_holder(id(self), self.priority(), self.attained)

    def _give_back(self, now: float) -> None:
        self.slots.note_turn(id(self), now - self._held)
        self._t = None
        self.slots.release()

    @contextmanager
    def turn(self):
        """Hold a slot for the body (waiting for it first)."""
        self._hold()
        try:
            yield
        finally:
            if self._t is not None:  # None: preempt() gave the slot up and was cancelled in line
                now = time.perf_counter()
                self._computed(now - self._t)
                self._give_back(now)

    def preempt(self) -> None:
        """Between two network passes: give the slot to a waiting run of higher priority, then
        queue for it again (engine.budget calls this as the run's `pause`)."""
        if self._t is None:
            return
        if self.cancelled is not None and self.cancelled():
            raise Cancelled  # turn() gives the slot back; the run stores nothing (nothing was shown)
        now = time.perf_counter()
        self._computed(now - self._t)
        self._t = now
        if self.slots.better_waiting(self.priority()):
            self._give_back(now)
            self._hold()
        else:
            self.slots.note_holder(id(self), self.priority(), self.attained)

    def iterate(self, it: Iterator[T]) -> Iterator[T]:
        """Yield `it`'s items, computing each while holding a slot."""
        while True:
            with self.turn():
                item = next(it, _END)
            if item is _END:
                self.slots.note_run(self.attained)
                return
            yield item


_END = object()
_slots: Slots | None = None
_slots_lock = threading.Lock()


def slots() -> Slots:
    """This process's slots (created on first use with concurrency() of them)."""
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = Slots(concurrency())
        return _slots
