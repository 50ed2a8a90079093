"""Sessions announced to a visitor (their share id shown) but not stored yet: a session is stored
with its first run's record (storage.NewSession), in the same transaction, so a run killed
before it is recorded leaves nothing behind and no stored session is ever without runs."""

from __future__ import annotations

import threading
from collections import OrderedDict

from app.views.token_views import token_view
from engine.api import InfillRun
from storage import NewSession, new_share_id

#: stores its session in the same transaction (storage.NewSession); bounded, oldest dropped
_pending: OrderedDict[str, NewSession] = OrderedDict()
_pending_lock = threading.Lock()
_PENDING_MAX = 4096


def create_session(kind: str, runs: list[InfillRun], text: str, domain: str) -> str:
    """A share id for these runs' session; the session is stored with its first run, so a run
    killed before it is recorded leaves nothing behind (and no session is ever without runs)."""
    models = sorted({r.lm.name for r in runs})
    payload = {"version": 1, "kind": kind, "views": {r.lm.name: token_view(r) for r in runs}}
    new = NewSession(domain=domain, model=" | ".join(models), text=text, spans=payload)
    share_id = new_share_id()
    with _pending_lock:
        _pending[share_id] = new
        while len(_pending) > _PENDING_MAX:
            _pending.popitem(last=False)
    return share_id


def pending_session(share_id: str) -> NewSession | None:
    """The session to store with this share id's first run (None once stored, or never announced)."""
    with _pending_lock:
        return _pending.get(share_id)


def mark_stored(share_id: str) -> None:
    """The session of this share id is in the store now: forget it here."""
    with _pending_lock:
        _pending.pop(share_id, None)
