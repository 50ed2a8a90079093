"""What the server keeps per visitor, and when it lets go.

Why: Gradio keeps a session object per visitor (every component's config and the last input and
output values: a 250 kB text a visitor sent stays there, refused or not) in an LRU of 10,000
sessions by default, and never drops an idle one before that cap. Strangers arriving for weeks
would fill it (300 refused 1 MB requests kept 350 MiB; normal runs about 0.3 MiB each).
So here:

- at most INFILL_SESSIONS_MAX sessions (default 64; Gradio's `state_session_capacity`): a 2-core
  server computes for a handful of visitors at once; which session goes for a newcomer, and when
  a newcomer is refused instead, is app.serving.address_sessions' rule (readers are never evicted);
- a session idle for INFILL_SESSION_IDLE_SECONDS (default 600) is dropped by a sweep that runs
  every SWEEP_SECONDS; its visitor keeps the page, the share links and the browser's own list of
  sessions, and only loses the trace loaded into the player (the link reloads it);
- every sweep, glibc is asked to hand freed memory back to the system (`malloc_trim`): freed
  objects (evicted sessions, finished runs' tensors) otherwise stay in the process's heap arenas
  (measured: RSS +57 MiB after 150 refused and 150 normal runs without it), and RSS is what an
  operator watches."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import datetime
import logging
from contextlib import asynccontextmanager

from engine.envvars import env_int

log = logging.getLogger("app")

SWEEP_SECONDS = 10.0


def session_idle_seconds() -> int:
    """Seconds after its last event that a visitor's session is dropped (INFILL_SESSION_IDLE_SECONDS, default 600)."""
    return env_int("INFILL_SESSION_IDLE_SECONDS", 600)


def drop_idle_sessions(state_holder, idle_seconds: float, now: datetime.datetime | None = None) -> int:
    """Drop the sessions of Gradio's `state_holder` whose last event is older than `idle_seconds`;
    return how many were dropped. (Gradio reads a session without its lock, so a visitor returning
    at the very moment its session is dropped can get one failed request, as with Gradio's own
    capacity eviction; it does not crash anything and the next request starts a fresh session.)"""
    now = now or datetime.datetime.now()
    cutoff = now - datetime.timedelta(seconds=idle_seconds)
    with state_holder.lock:
        # only sessions with a last use: Gradio creates a session, then stamps it, outside this
        # lock, so one without a stamp is being created right now (dropping it made that request fail)
        stale = [sid for sid, t in list(state_holder.time_last_used.items()) if t < cutoff]
        for sid in stale:
            state_holder.session_data.pop(sid, None)
            state_holder.time_last_used.pop(sid, None)
    return len(stale)


_libc = None


def trim() -> bool:
    """Ask glibc to return freed heap memory to the system (False where there is no glibc)."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(_libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


def sweep(state_holder, idle_seconds: float) -> int:
    """One sweep: drop idle sessions (collecting their cycles), then give freed heap memory back:
    every sweep, since finished runs and evicted sessions free memory between sweeps too."""
    import gc

    from app.serving.address_sessions import address_sessions, drop_sessions

    gone = address_sessions().idle_for(idle_seconds)  # the record of kept sessions forgets them too
    drop_sessions(state_holder, gone)
    dropped = drop_idle_sessions(state_holder, idle_seconds) + len(gone)
    if dropped:
        gc.collect()
    trim()
    return dropped


def lifespan(app):
    """A Starlette lifespan (Gradio's `app_kwargs["lifespan"]`) that sweeps idle sessions every
    SWEEP_SECONDS while the server runs."""
    @asynccontextmanager
    async def _span(_app):
        async def loop():
            while True:
                await asyncio.sleep(SWEEP_SECONDS)
                try:
                    holder = getattr(_app, "state_holder", None)
                    if holder is not None:
                        n = await asyncio.to_thread(sweep, holder, session_idle_seconds())
                        if n:
                            log.info("dropped %d idle visitor sessions", n)
                except Exception:  # noqa: BLE001 - a failed sweep must not stop the server
                    log.exception("session sweep failed")

        task = asyncio.create_task(loop())
        try:
            yield
        finally:
            task.cancel()
    return _span(app)
