"""Per-address bounds on every endpoint: calls in flight and calls per minute.

Why: Gradio bounds only how many events of one function compute at once, not who sends them. One
address keeping 40 `/run/stop` requests in flight held Gradio's thread pool and made every other
visitor's small run take 10-18 s; joins from a few addresses can fill the queue that all visitors
share (INFILL_QUEUE_SIZE). So the request limits' middleware (app.serving.limits) asks `admit()`
before Gradio reads a call: a call of an endpoint group over its address's bound is answered 429
with one sentence (the page shows it as its error message) and never reaches Gradio.

- A visitor is its address (app.serving.visitors: IPv6 grouped by /64, a proxy's forwarded address
  only from INFILL_TRUSTED_PROXIES).
- In flight: a direct call (`/run/<name>`, what the page uses for Stop) while its request is open;
  a queued one (`/queue/join`, `/call/<name>`) from its join until Gradio's queue has finished it.
- Per minute: a moving window, kept by the `limits` package (in memory; expired keys are dropped).
- Each endpoint group has its own bound (`DEFAULTS`; `INFILL_LIMIT_<GROUP>=IN_FLIGHT,PER_MINUTE`
  overrides one, `INFILL_CALL_LIMITS=0` lifts them all: the load test's and the soak's visitors
  all share the loopback). Each refused call is counted by address (the operator's stats); the log
  gets one line per burst (refusals of one address and group less than BURST_GAP seconds apart)."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

log = logging.getLogger("app.limits")

#: endpoint groups by the API names of their events (a name Gradio numbered, `stats_2`, is `stats`)
GROUPS: dict[str, tuple[str, ...]] = {
    "stop": ("stop", "stop_run", "stop_compare", "skip_to_end"),
    "scrub": ("scrub", "play", "step_forward", "step_back", "replay"),
    "share": ("load_share", "restore", "on_load", "recent", "remember", "remember_run"),
    "statistics": ("stats", "stats_filters", "measure_machine"),  # stats writes the CSV export
    "exactness": ("exactness",),
    "compare": ("compare", "compare_verdict"),
    "run": ("infill", "run_page", "speedup"),
}
#: every other event (the editor's checks, the buttons' states) is in "other"
OTHER = "other"
#: (calls in flight, calls per minute) per address, by group
DEFAULTS: dict[str, tuple[int, int]] = {
    "stop": (2, 30), "scrub": (4, 240), "share": (4, 60), "statistics": (2, 30), "exactness": (1, 10),
    "compare": (2, 20), "run": (4, 40), OTHER: (8, 600),
}
#: refusals of one address and group less than this many seconds apart are one burst: one log line
BURST_GAP = 60.0
#: every refusal of a burst after its first is answered this many seconds late (an asyncio sleep:
#: no thread, no work): a client re-sending as soon as it is answered then sends N calls per
#: REFUSAL_HOLD seconds, not thousands a second (200 Stops in flight sent 935 a second, and the HTTP
#: work alone made another visitor's small run take 2.3 s at the median instead of 0.16 s)
REFUSAL_HOLD = 2.0
#: refused calls held back at most, per address and in all (past either they are answered at once)
HELD_PER_ADDRESS, HELD_MAX = 256, 1024
_ADDRESSES_MAX = 4096  # refusal records kept at most (all forgotten at once past it)
_NAME_TO_GROUP = {name: g for g, names in GROUPS.items() for name in names}


def group_of(api_name: str | None) -> str:
    """The endpoint group of an event's API name."""
    name = re.sub(r"_\d+$", "", api_name or "")
    return _NAME_TO_GROUP.get(name) or _NAME_TO_GROUP.get(api_name or "") or OTHER


def bounds(group: str) -> tuple[int, int]:
    """(in flight, per minute) for a group: INFILL_LIMIT_<GROUP> ("4,30"), else DEFAULTS. A bound of
    0 (or INFILL_CALL_LIMITS=0 for all) lifts it."""
    if os.environ.get("INFILL_CALL_LIMITS", "1") == "0":
        return (0, 0)
    raw = os.environ.get(f"INFILL_LIMIT_{group.upper()}", "")
    try:
        n, m = (int(x) for x in raw.split(","))
        if n >= 0 and m >= 0:
            return (n, m)
    except ValueError:
        pass
    return DEFAULTS[group]


@dataclass(frozen=True)
class Refusal:
    """Why a call was refused: the sentence for the visitor, the seconds to wait, and how long the
    answer is held back (0 for the first refusal of a burst)."""

    message: str
    retry_after: int
    hold: float = 0.0


WHAT = {"stop": "Stop", "scrub": "player", "share": "share-link", "statistics": "statistics",
        "exactness": "exactness-check", "compare": "Compare", "run": "Run", OTHER: "page"}


class CallLimits:
    """The bounds of one server: direct calls in flight counted here, queued ones read from Gradio's
    queue (its own record of the events it has not finished), calls per minute in `limits`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._direct: Counter[tuple[str, str]] = Counter()
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._last_refusal: dict[tuple[str, str], float] = {}
        self._refused: Counter[str] = Counter()
        self._held: Counter[str] = Counter()

    def admit(self, address: str, group: str, queued: int = 0) -> Refusal | None:
        """None when a call of `group` from `address` may go ahead (then it counts against the
        minute), else the refusal. `queued`: this address's calls of the group in Gradio's queue."""
        in_flight, per_minute = bounds(group)
        with self._lock:
            busy = self._direct[(address, group)] + queued
        what = WHAT[group]
        if in_flight and busy >= in_flight:
            return self._refuse(address, group, f"over {in_flight} in flight", Refusal(
                f"Too many {what} requests from your address at once (at most {in_flight}). Wait for them to "
                "finish, then try again.", 1))
        item = RateLimitItemPerMinute(per_minute) if per_minute else None
        if item is not None and not self._limiter.hit(item, group, address):
            wait = max(1, int(self._limiter.get_window_stats(item, group, address).reset_time - time.time()) + 1)
            return self._refuse(address, group, f"over {per_minute} a minute", Refusal(
                f"Too many {what} requests from your address (at most {per_minute} a minute). Try again in "
                f"{wait} s.", wait))
        return None

    def _refuse(self, address: str, group: str, why: str, refusal: Refusal) -> Refusal:
        if self.note_refusal(address, group, why):
            return refusal
        with self._lock:
            if self._held[address] >= HELD_PER_ADDRESS or sum(self._held.values()) >= HELD_MAX:
                return refusal
        return Refusal(refusal.message, refusal.retry_after, REFUSAL_HOLD)

    def held(self, address: str, delta: int) -> None:
        """A refused call's answer is being held back (+1), or has gone out (-1)."""
        with self._lock:
            self._held[address] += delta
            if self._held[address] <= 0:
                del self._held[address]

    def note_refusal(self, address: str, group: str, why: str) -> bool:
        """Count a refusal of `address` (the operator's stats); log one line per burst. True for
        the first refusal of a burst."""
        now = time.monotonic()
        with self._lock:
            if len(self._last_refusal) > _ADDRESSES_MAX:
                self._last_refusal.clear()
            if len(self._refused) > _ADDRESSES_MAX:
                self._refused.clear()
            last = self._last_refusal.get((address, group))
            self._last_refusal[(address, group)] = now
            self._refused[address] += 1
        first = last is None or now - last > BURST_GAP
        if first:
            log.info("refusing %s calls from %s: %s (one line per burst; /operator/stats counts each)",
                     group, address, why)
        return first

    def entered(self, address: str, group: str) -> None:
        """A direct call of `group` from `address` is in flight (until left())."""
        with self._lock:
            self._direct[(address, group)] += 1

    def left(self, address: str, group: str) -> None:
        """That direct call has been answered."""
        with self._lock:
            self._direct[(address, group)] -= 1
            if self._direct[(address, group)] <= 0:
                del self._direct[(address, group)]

    def refusals(self) -> dict[str, int]:
        """Calls refused so far, by address (the operator's stats)."""
        with self._lock:
            return dict(self._refused)


def queued_calls(blocks, address: str, group: str) -> int:
    """This address's events of `group` that Gradio's queue holds (waiting or computing): its own
    record, `event_ids_to_events`, which it empties when an event ends, fails or is cancelled."""
    from app.serving.visitors import scope_address

    queue = getattr(blocks, "_queue", None)
    events = list(getattr(queue, "event_ids_to_events", {}).values())
    n = 0
    for ev in events:
        fn, req = getattr(ev, "fn", None), getattr(ev, "request", None)
        if fn is None or req is None or group_of(getattr(fn, "api_name", None)) != group:
            continue
        if scope_address(getattr(req, "scope", {})) == address:
            n += 1
    return n


_limits: CallLimits | None = None
_limits_lock = threading.Lock()


def fresh_call_limits() -> CallLimits:
    """A newly launched server's own record: a process that launches several servers (the tests
    do) must not carry one server's minute into the next."""
    global _limits
    with _limits_lock:
        _limits = CallLimits()
        return _limits


def call_limits() -> CallLimits:
    """This process's bounds (created on first use)."""
    global _limits
    with _limits_lock:
        if _limits is None:
            _limits = CallLimits()
        return _limits
