"""How many visitor sessions one address may keep in the server's memory.

Why: Gradio keeps at most INFILL_SESSIONS_MAX sessions (app.serving.memory) and drops the least
recently used one past that. A session hash is whatever the client sends, so strangers sending
200 one-shot requests, each with a new hash, pushed out a visitor who had run seconds earlier:
its player lost its trace (issue 36). Here every address (app.serving.visitors) keeps at most
INFILL_SESSIONS_PER_ADDRESS sessions (default 8); a new session past that drops that same
address's least recently used one, so an address minting sessions only ever pushes out its own.
The request limits' middleware (app.serving.limits) notes the session of every queue join and
REST call with the address it came from."""

from __future__ import annotations

import threading
from collections import OrderedDict

from engine.envvars import env_int

#: addresses remembered at most (the least recently active is forgotten first)
_ADDRESSES_MAX = 4096


def sessions_per_address() -> int:
    """Sessions one address may keep in memory (INFILL_SESSIONS_PER_ADDRESS, default 8)."""
    return env_int("INFILL_SESSIONS_PER_ADDRESS", 8)


class AddressSessions:
    """Which sessions each address uses, most recent last; note() says which to drop."""

    def __init__(self, cap: int):
        self.cap = cap
        self._lock = threading.Lock()
        self._by_address: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()

    def note(self, address: str, session_hash: str) -> list[str]:
        """`address` used `session_hash` now; the sessions of that address over the cap (its
        least recently used), which the caller drops from the server's memory."""
        with self._lock:
            mine = self._by_address.setdefault(address, OrderedDict())
            self._by_address.move_to_end(address)
            mine[session_hash] = None
            mine.move_to_end(session_hash)
            drop = []
            while len(mine) > self.cap:
                drop.append(mine.popitem(last=False)[0])
            while len(self._by_address) > _ADDRESSES_MAX:
                self._by_address.popitem(last=False)
            return drop

    def counts(self) -> dict[str, int]:
        """Sessions per address (the operator's stats)."""
        with self._lock:
            return {a: len(s) for a, s in self._by_address.items()}


_sessions: AddressSessions | None = None
_sessions_lock = threading.Lock()


def address_sessions() -> AddressSessions:
    """This process's record (created on first use from the environment)."""
    global _sessions
    with _sessions_lock:
        if _sessions is None:
            _sessions = AddressSessions(sessions_per_address())
        return _sessions


def drop_sessions(state_holder, session_hashes: list[str]) -> None:
    """Drop these sessions from Gradio's `state_holder` (as its own capacity eviction does)."""
    if not session_hashes or state_holder is None:
        return
    with state_holder.lock:
        for sh in session_hashes:
            state_holder.session_data.pop(sh, None)
            state_holder.time_last_used.pop(sh, None)
