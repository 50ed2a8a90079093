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

A run waiting for a slot also watches for its visitor's cancel (app.cancels): a job cancelled
before it computed anything leaves no trace at all (`Cancelled`)."""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """The visitor cancelled this job while it waited for a slot."""


def _env_int(name: str, default: int) -> int:
    try:
        v = int(os.environ.get(name, default))
    except ValueError:
        return default
    return v if v > 0 else default


def concurrency() -> int:
    """Runs computing at once (INFILL_CONCURRENCY, default 2)."""
    return _env_int("INFILL_CONCURRENCY", 2)


def active_runs() -> int:
    """Runs in progress at once, taking turns on the slots (INFILL_ACTIVE_RUNS, default 16)."""
    return max(_env_int("INFILL_ACTIVE_RUNS", 16), concurrency())


class Slots:
    def __init__(self, n: int):
        self.free = n
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, int, threading.Event]] = []
        self._seq = itertools.count()

    def acquire(self, priority: tuple, cancelled: Callable[[], bool] | None = None) -> None:
        """Take a slot; among waiters the lowest `priority` goes first. Raises Cancelled (without
        a slot) when `cancelled()` turns true while waiting."""
        with self._lock:
            if self.free > 0 and not self._waiters:
                self.free -= 1
                return
            entry = (priority, next(self._seq), threading.Event())
            heapq.heappush(self._waiters, entry)
        while not entry[2].wait(0.1):
            if cancelled is not None and cancelled():
                with self._lock:
                    if not entry[2].is_set():  # still waiting: leave the line
                        self._waiters.remove(entry)
                        heapq.heapify(self._waiters)
                        raise Cancelled
                break  # the slot was handed over meanwhile: keep it

    def better_waiting(self, priority: tuple) -> bool:
        """Whether a waiter would go before `priority`."""
        with self._lock:
            return bool(self._waiters) and self._waiters[0][0] < priority

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                heapq.heappop(self._waiters)[2].set()  # hand the slot over directly: no barging
            else:
                self.free += 1


#: seconds of computing that end priority levels 0, 1 and 2
LEVELS = (0.5, 2.0, 8.0)
_arrivals = itertools.count()


def level(attained: float) -> int:
    return sum(attained >= t for t in LEVELS)


class Turns:
    """One run's use of the slots: its attained computing time, its arrival, its cancel check."""

    def __init__(self, slots: Slots, cancelled: Callable[[], bool] | None = None):
        self.slots, self.cancelled, self.attained = slots, cancelled, 0.0
        self.arrival = next(_arrivals)
        self._t: float | None = None  # start of the current turn (slot held)

    def priority(self) -> tuple:
        return (level(self.attained), self.arrival)

    @contextmanager
    def turn(self):
        self.slots.acquire(self.priority(), self.cancelled)
        self._t = time.perf_counter()
        try:
            yield
        finally:
            if self._t is not None:  # None: preempt() gave the slot up and was cancelled in line
                self.attained += time.perf_counter() - self._t
                self._t = None
                self.slots.release()

    def preempt(self) -> None:
        """Between two network passes: give the slot to a waiting run of higher priority, then
        queue for it again (engine.budget calls this as the run's `pause`)."""
        if self._t is None:
            return
        now = time.perf_counter()
        self.attained += now - self._t
        self._t = now
        if self.slots.better_waiting(self.priority()):
            self.slots.release()
            self._t = None
            self.slots.acquire(self.priority(), self.cancelled)
            self._t = time.perf_counter()

    def iterate(self, it: Iterator[T]) -> Iterator[T]:
        """Yield `it`'s items, computing each while holding a slot."""
        while True:
            with self.turn():
                item = next(it, _END)
            if item is _END:
                return
            yield item


_END = object()
_slots: Slots | None = None
_slots_lock = threading.Lock()


def slots() -> Slots:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = Slots(concurrency())
        return _slots
