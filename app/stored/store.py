"""The process's one Store (storage), opened on first use so that importing the app touches no
database. Tests point the app at their own database by setting `app.stored.store._store`."""

from __future__ import annotations

import threading

from storage import Store, open_store

_store: Store | None = None
_store_lock = threading.Lock()


def store() -> Store:
    """The process's one Store, opened (and migrated) on first use, so importing the app touches no database."""
    global _store
    with _store_lock:
        if _store is None:
            _store = open_store()
        return _store
