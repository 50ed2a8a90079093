"""Which visitor sessions the server keeps in memory, and which one goes when a new one comes.

Why: Gradio keeps at most INFILL_SESSIONS_MAX sessions (app.serving.memory) and, past that, drops
the least recently used one, whoever it belongs to. A session hash is whatever the client sends,
so strangers sending one-shot requests, each with a new hash, pushed out a visitor who had run
seconds earlier: its player lost its trace (for one address, and for 200 strangers
from 200 addresses, which IPv6 makes cheap). The request limits' middleware (app.serving.limits)
notes the session of every call with the address it came from, before Gradio creates it, and:

- one address keeps at most INFILL_SESSIONS_PER_ADDRESS sessions (default 8): a new one past that
  drops that same address's least recently used one, so an address minting sessions only ever
  pushes out its own;
- at most INFILL_SESSIONS_MAX sessions are kept in all (default 64): a new session past that
  drops the least recently used *idle* session, one with no open page (Gradio's heartbeat stream,
  which the page keeps open) and no call for INFILL_SESSION_ACTIVE_SECONDS (default 120). When
  every kept session is in use, the new one is refused (`SessionsFull`: a 429 with one sentence)
  rather than a reader evicted."""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict

from engine.envvars import env_int

#: addresses remembered at most (the least recently active is forgotten first)
_ADDRESSES_MAX = 4096


def sessions_per_address() -> int:
    """Sessions one address may keep in memory (INFILL_SESSIONS_PER_ADDRESS, default 8)."""
    return env_int("INFILL_SESSIONS_PER_ADDRESS", 8)


def session_active_seconds() -> int:
    """Seconds after its last call that a session without an open page still counts as in use and
    is never dropped for a newcomer (INFILL_SESSION_ACTIVE_SECONDS, default 120)."""
    return env_int("INFILL_SESSION_ACTIVE_SECONDS", 120)


class SessionsFull(Exception):
    """Every kept session is in use: a new one is refused rather than a reader's evicted."""

    def __init__(self, kept: int, active_seconds: float):
        super().__init__(f"The studio keeps {kept} visitors' pages at most and all are in use; please try "
                         f"again in {active_seconds:g} s.")


class AddressSessions:
    """The kept sessions by address and by last use; note() says which to drop, or refuses."""

    def __init__(self, *, cap: int, total: int = 0, active_seconds: float = 120.0, clock=time.monotonic):
        self.cap, self.total, self.active_seconds, self.clock = cap, total, active_seconds, clock
        self._lock = threading.Lock()
        self._by_address: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._used: OrderedDict[str, tuple[str, float]] = OrderedDict()  # session -> (address, last use), oldest first
        self._open: Counter[str] = Counter()  # open pages (heartbeat streams) by session

    def note(self, address: str, session_hash: str) -> list[str]:
        """`address` used `session_hash` now; the sessions to drop from the server's memory (that
        address's over its cap, or the least recently used idle one over the total). Raises
        SessionsFull for a new session when every kept one is in use."""
        with self._lock:
            now = self.clock()
            known = self._used.get(session_hash)
            if known is not None:
                address = known[0]  # a session stays its first address's
            mine = self._by_address.get(address, OrderedDict())
            drop: list[str] = []
            if known is None:
                if len(mine) >= self.cap > 0:
                    drop.append(next(iter(mine)))
                elif len(self._used) >= self.total > 0:
                    victim = self._idle(now)
                    if victim is None:
                        raise SessionsFull(self.total, self.active_seconds)
                    drop.append(victim)
                for sh in drop:
                    self._forget(sh)
            self._by_address.setdefault(address, mine)
            self._by_address.move_to_end(address)
            mine[session_hash] = None
            mine.move_to_end(session_hash)
            self._used[session_hash] = (address, now)
            self._used.move_to_end(session_hash)
            while len(self._by_address) > _ADDRESSES_MAX:
                _, gone = self._by_address.popitem(last=False)
                for sh in gone:
                    self._used.pop(sh, None)
            return drop

    def _idle(self, now: float) -> str | None:
        """The least recently used session with no open page and no call for active_seconds."""
        for sh, (_, t) in self._used.items():
            if now - t < self.active_seconds:
                return None  # the rest were used later still
            if not self._open.get(sh):
                return sh
        return None

    def _forget(self, session_hash: str) -> None:
        address, _ = self._used.pop(session_hash, (None, 0.0))
        mine = self._by_address.get(address)
        if mine is not None:
            mine.pop(session_hash, None)
            if not mine:
                del self._by_address[address]

    def opened(self, session_hash: str) -> None:
        """A page of this session opened its heartbeat stream: in use while it is open."""
        with self._lock:
            self._open[session_hash] += 1

    def closed(self, session_hash: str) -> None:
        """That stream closed (the page was closed or lost its connection): its last use counts from now."""
        with self._lock:
            self._open[session_hash] -= 1
            if self._open[session_hash] <= 0:
                del self._open[session_hash]
            if session_hash in self._used:
                self._used[session_hash] = (self._used[session_hash][0], self.clock())
                self._used.move_to_end(session_hash)

    def idle_for(self, seconds: float) -> list[str]:
        """Forget the sessions with no call for `seconds`, open page or not (the memory sweep drops
        them from Gradio too, as it drops any session idle that long); which they were."""
        with self._lock:
            now = self.clock()
            gone = [sh for sh, (_, t) in self._used.items() if now - t >= seconds]
            for sh in gone:
                self._forget(sh)
            return gone

    def counts(self) -> dict[str, int]:
        """Sessions per address (the operator's stats)."""
        with self._lock:
            return {a: len(s) for a, s in self._by_address.items()}


def sessions_max() -> int:
    """Visitor sessions kept in memory at most (INFILL_SESSIONS_MAX, default 64)."""
    return env_int("INFILL_SESSIONS_MAX", 64)


_sessions: AddressSessions | None = None
_sessions_lock = threading.Lock()


def address_sessions() -> AddressSessions:
    """This process's record (created on first use from the environment)."""
    global _sessions
    with _sessions_lock:
        if _sessions is None:
            _sessions = AddressSessions(cap=sessions_per_address(), total=sessions_max(), active_seconds=session_active_seconds())
        return _sessions


def drop_sessions(state_holder, session_hashes: list[str]) -> None:
    """Drop these sessions from Gradio's `state_holder` (as its own capacity eviction does)."""
    if not session_hashes or state_holder is None:
        return
    with state_holder.lock:
        for sh in session_hashes:
            state_holder.session_data.pop(sh, None)
            state_holder.time_last_used.pop(sh, None)
