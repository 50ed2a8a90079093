"""Which visitors asked to cancel, seen where Gradio's `/cancel` route is called.

Gradio cancels a job's asyncio task, but a sync generator handler runs in a worker thread that
is never told: a job waiting for a compute slot would still run its first round once it got one
and be stored as a cancelled run with steps. The request limit middleware (app.serving.limits) notes
each cancel here by the visitor's session hash; a run waiting for a slot checks
`cancelled_since(session_hash, t0)` and leaves without computing or storing anything."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

_MAX = 10_000
_lock = threading.Lock()
_cancels: OrderedDict[str, float] = OrderedDict()


def note_cancel(session_hash: str) -> None:
    """Remember that this visitor's session cancelled its jobs now (bounded; oldest forgotten first)."""
    with _lock:
        _cancels[session_hash] = time.monotonic()
        _cancels.move_to_end(session_hash)
        while len(_cancels) > _MAX:
            _cancels.popitem(last=False)


def cancelled_since(session_hash: str | None, t0: float) -> bool:
    """True when this visitor asked to cancel at or after monotonic time t0."""
    if not session_hash:
        return False
    with _lock:
        t = _cancels.get(session_hash)
    return t is not None and t >= t0
