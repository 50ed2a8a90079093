"""Compute slots shared by every run of this process, handed out least-attained-service first.

Why: Gradio's queue admits a run and keeps it until it ends, so two huge runs on the two model
slots made every small run wait for them (a 6-token run waited 76 s). Here many runs may be in
progress at once (Gradio's concurrency for run events, INFILL_ACTIVE_RUNS, default 16), but
only INFILL_CONCURRENCY (default 2) compute at a time, and each computes one step per turn: a run
takes a slot for one `next()` of its sampler and gives it back after. A freed slot goes to the
waiting run that has computed least so far, so a new small run goes ahead of long ones and its
latency hardly depends on them; a long run computes whenever no lighter run waits (and its
budget, engine.budget, counts only its computing time).

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

    def acquire(self, attained: float, cancelled: Callable[[], bool] | None = None) -> None:
        """Take a slot; among waiters the one with the least `attained` seconds goes first. Raises
        Cancelled (without a slot) when `cancelled()` turns true while waiting."""
        with self._lock:
            if self.free > 0 and not self._waiters:
                self.free -= 1
                return
            entry = (attained, next(self._seq), threading.Event())
            heapq.heappush(self._waiters, entry)
        while not entry[2].wait(0.1):
            if cancelled is not None and cancelled():
                with self._lock:
                    if not entry[2].is_set():  # still waiting: leave the line
                        self._waiters.remove(entry)
                        heapq.heapify(self._waiters)
                        raise Cancelled
                break  # the slot was handed over meanwhile: keep it

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                heapq.heappop(self._waiters)[2].set()  # hand the slot over directly: no barging
            else:
                self.free += 1


class Turns:
    """One run's use of the slots: its attained computing time and its cancel check."""

    def __init__(self, slots: Slots, cancelled: Callable[[], bool] | None = None):
        self.slots, self.cancelled, self.attained = slots, cancelled, 0.0

    @contextmanager
    def turn(self):
        self.slots.acquire(self.attained, self.cancelled)
        t = time.perf_counter()
        try:
            yield
        finally:
            self.attained += time.perf_counter() - t
            self.slots.release()

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
