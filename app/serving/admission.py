"""Which runs may be in progress, before any of them takes a compute slot (app.serving.slots).

A visitor may have INFILL_RUNS_PER_VISITOR runs in progress (default 2); a long run (over
INFILL_SMALL_RUN_TOKENS masked tokens, default 32) needs one of INFILL_ACTIVE_RUNS long-run seats
or a place in a line of INFILL_LONG_RUN_LINE, else it is refused with a message; and Gradio's
concurrency for run events (`run_seats`) adds INFILL_SMALL_RUN_SEATS that no long run can hold, so
a small run never waits for long runs to end (16 worst-case runs held every seat and
6-token runs waited 20 s)."""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from contextlib import contextmanager

from app.serving.slots import Cancelled, active_runs
from app.serving.visitors import UNKNOWN
from engine.envvars import env_int
from engine.errors import InfillError

log = logging.getLogger("app.admission")


class Busy(InfillError):
    """A run refused at admission: its visitor has too many in progress, or the long-run table and
    its line are full. The message says what to do."""


def per_visitor() -> int:
    """Runs one visitor (an address: app.serving.visitors) may have in progress at once
    (INFILL_RUNS_PER_VISITOR, default 2)."""
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
    so long runs can never take every seat (16 worst-case runs made 6-token runs wait 20 s)."""
    return active_runs() + long_run_line() + small_run_seats()


class Admission:
    """Which runs may be in progress: at most `per_visitor` per visitor (its address:
    app.serving.visitors), and at most `seats` long runs (more than small_run_tokens() masked
    tokens) with `line` more waiting for a seat, served round-robin by visitor: a freed seat goes
    to the first waiting run of the visitor after the last one served, so one visitor's waiting
    runs never stand between another visitor and a seat. Beyond that a long run is refused with a
    message; every refusal is logged in one line and counted per visitor (refusals()). Small runs
    need no seat, and Gradio's concurrency (run_seats) leaves them seats no long run can hold, so a
    small run never waits for long ones to end: only for a compute slot, where it goes first (Slots)."""

    def __init__(self, seats: int, line: int, per_visitor: int):
        self.seats, self.line, self.per_visitor = seats, line, per_visitor
        self._lock = threading.Lock()
        self._owners: dict[str, int] = {}
        self.long = 0  # long runs holding a seat
        self._line: OrderedDict[str | None, deque[threading.Event]] = OrderedDict()  # by visitor, in turn
        self._refusals: Counter[str] = Counter()

    def _waiting(self) -> int:
        return sum(len(q) for q in self._line.values())

    def _refuse(self, owner: str | None, why: str, message: str) -> None:
        self._refusals[owner or UNKNOWN] += 1
        if len(self._refusals) > _REFUSALS_KEPT:  # bounded: the visitor refused least often is forgotten
            del self._refusals[min(self._refusals, key=self._refusals.__getitem__)]
        log.info("refused run from %s: %s", owner or UNKNOWN, why)
        raise Busy(message)

    def _refuse_visitor(self, owner: str | None) -> None:
        if owner is not None and self._owners.get(owner, 0) >= self.per_visitor:
            self._refuse(owner, f"{self.per_visitor} runs in progress",
                         f"You already have {self.per_visitor} runs in progress, the most one visitor may have "
                         "at once. Wait for one to finish (or stop it), then run again.")

    @contextmanager
    def enter(self, owner: str | None, long: bool, cancelled: Callable[[], bool] | None = None):
        """Hold an admission for the body: raises Busy (nothing held) when refused, Cancelled when
        the visitor cancelled while a long run waited in line. `owner`: the visitor's key."""
        with self._lock:
            self._refuse_visitor(owner)
            ev = None
            if long and self.long >= self.seats:
                if self._waiting() >= self.line:
                    self._refuse(owner, "long-run seats and line full",
                                 f"The server is running its limit of {self.seats} long runs and {self.line} more "
                                 f"wait. Try again in a minute, or mask at most {small_run_tokens()} tokens: "
                                 "such a run starts at once.")
                ev = threading.Event()
                self._line.setdefault(owner, deque()).append(ev)
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
                            self._leave_line(owner, ev)
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
                    nxt = self._next_in_line()
                    if nxt is not None:
                        nxt.set()  # the seat goes straight to the next visitor's first waiting run
                    else:
                        self.long -= 1

    def _leave_line(self, owner: str | None, ev: threading.Event) -> None:
        q = self._line.get(owner)
        if q is not None:
            q.remove(ev)
            if not q:
                del self._line[owner]

    def _next_in_line(self) -> threading.Event | None:
        """The first waiting run of the visitor whose turn it is; that visitor goes to the back."""
        if not self._line:
            return None
        owner, q = next(iter(self._line.items()))
        ev = q.popleft()
        del self._line[owner]
        if q:
            self._line[owner] = q  # its other waiting runs come after every other visitor's first
        return ev

    def in_progress(self, owner: str) -> int:
        """Runs this visitor has in progress (or waiting in line)."""
        with self._lock:
            return self._owners.get(owner, 0)

    def refusals(self) -> dict[str, int]:
        """Runs refused since start, by visitor, most refused first (the operator's stats)."""
        with self._lock:
            return dict(self._refusals.most_common())

    def by_visitor(self) -> dict[str, int]:
        """Runs in progress (or waiting) by visitor (the operator's stats)."""
        with self._lock:
            return dict(self._owners)


#: visitors whose refusals are counted at most (the least refused is forgotten first)
_REFUSALS_KEPT = 4096
_admission: Admission | None = None
_admission_lock = threading.Lock()


def admission() -> Admission:
    """This process's admission rules (created on first use from the environment)."""
    global _admission
    with _admission_lock:
        if _admission is None:
            _admission = Admission(active_runs(), long_run_line(), per_visitor())
        return _admission
