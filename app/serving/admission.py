"""Which runs may be in progress, before any of them takes a compute slot (app.serving.slots).

A visitor may have INFILL_RUNS_PER_VISITOR runs in progress (default 2); a long run (over
INFILL_SMALL_RUN_TOKENS masked tokens, default 32) needs one of INFILL_ACTIVE_RUNS long-run seats
or a place in a line of INFILL_LONG_RUN_LINE, else it is refused with a message; and Gradio's
concurrency for run events (`run_seats`) adds INFILL_SMALL_RUN_SEATS that no long run can hold, so
a small run never waits for long runs to end (issue 28: 16 worst-case runs held every seat and
6-token runs waited 20 s)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager

from app.serving.slots import Cancelled, active_runs
from engine.envvars import env_int
from engine.errors import InfillError


class Busy(InfillError):
    """A run refused at admission: its visitor has too many in progress, or the long-run table and
    its line are full. The message says what to do."""


def per_visitor() -> int:
    """Runs one visitor (Gradio session) may have in progress at once (INFILL_RUNS_PER_VISITOR, default 2)."""
    return env_int("INFILL_RUNS_PER_VISITOR", 2)


def small_run_tokens() -> int:
    """A run with at most this many masked tokens is small (INFILL_SMALL_RUN_TOKENS, default 32): its
    cost is bounded by the budget's parameter caps, and it never needs a long-run seat."""
    return env_int("INFILL_SMALL_RUN_TOKENS", 32)


def long_run_line() -> int:
    """Long runs that may wait for a long-run seat (INFILL_LONG_RUN_LINE, default 4); more are refused."""
    return env_int("INFILL_LONG_RUN_LINE", 4)


def small_run_seats() -> int:
    """Gradio seats only small runs can reach (INFILL_SMALL_RUN_SEATS, default 8)."""
    return env_int("INFILL_SMALL_RUN_SEATS", 8)


def run_seats() -> int:
    """Gradio's concurrency for run events: the long runs' seats and line, plus small_run_seats(),
    so long runs can never take every seat (issue 28: 16 worst-case runs made 6-token runs wait 20 s)."""
    return active_runs() + long_run_line() + small_run_seats()


class Admission:
    """Which runs may be in progress: at most `per_visitor` per visitor, and at most `seats` long
    runs (more than small_run_tokens() masked tokens) with `line` more waiting, first come first
    served, for a seat; beyond that a long run is refused with a message. Small runs need no seat,
    and Gradio's concurrency (run_seats) leaves them seats no long run can hold, so a small run
    never waits for long ones to end: only for a compute slot, where it goes first (Slots)."""

    def __init__(self, seats: int, line: int, per_visitor: int):
        self.seats, self.line, self.per_visitor = seats, line, per_visitor
        self._lock = threading.Lock()
        self._owners: dict[str, int] = {}
        self.long = 0  # long runs holding a seat
        self._line: deque[threading.Event] = deque()

    def _refuse_visitor(self, owner: str | None) -> None:
        if owner is not None and self._owners.get(owner, 0) >= self.per_visitor:
            raise Busy(f"You already have {self.per_visitor} runs in progress, the most one visitor may have "
                       "at once. Wait for one to finish (or stop it), then run again.")

    @contextmanager
    def enter(self, owner: str | None, long: bool, cancelled: Callable[[], bool] | None = None):
        """Hold an admission for the body: raises Busy (nothing held) when refused, Cancelled when
        the visitor cancelled while a long run waited in line."""
        with self._lock:
            self._refuse_visitor(owner)
            ev = None
            if long and self.long >= self.seats:
                if len(self._line) >= self.line:
                    raise Busy(f"The server is running its limit of {self.seats} long runs and {self.line} more "
                               f"wait. Try again in a minute, or mask at most {small_run_tokens()} tokens: "
                               "such a run starts at once.")
                ev = threading.Event()
                self._line.append(ev)
            elif long:
                self.long += 1
            if owner is not None:
                self._owners[owner] = self._owners.get(owner, 0) + 1
        holds = long and ev is None  # a long run holding a seat
        try:
            while ev is not None and not ev.wait(0.1):  # a leaving long run hands its seat over
                if cancelled is not None and cancelled():
                    with self._lock:
                        if not ev.is_set():
                            self._line.remove(ev)
                            raise Cancelled
                    break
            holds = long
            yield
        finally:
            with self._lock:
                if owner is not None:
                    left = self._owners.get(owner, 1) - 1
                    if left > 0:
                        self._owners[owner] = left
                    else:
                        self._owners.pop(owner, None)
                if holds:
                    if self._line:
                        self._line.popleft().set()  # the seat goes straight to the first in line
                    else:
                        self.long -= 1

    def in_progress(self, owner: str) -> int:
        """Runs this visitor has in progress (or waiting in line)."""
        with self._lock:
            return self._owners.get(owner, 0)


_admission: Admission | None = None
_admission_lock = threading.Lock()


def admission() -> Admission:
    """This process's admission rules (created on first use from the environment)."""
    global _admission
    with _admission_lock:
        if _admission is None:
            _admission = Admission(active_runs(), long_run_line(), per_visitor())
        return _admission
