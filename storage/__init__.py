"""Storage: sessions, runs, traces and statistics in SQLite (default) or PostgreSQL.

The rest of the project uses ``open_store()`` and the ``Store`` it returns (storage.repository).
"""

from __future__ import annotations

from storage.repository import (
    GroupStats,
    NewSession,
    RankRate,
    RunRecord,
    RunRecorder,
    SessionRecord,
    SessionSummary,
    StorageInputError,
    Store,
    is_valid_share_id,
    new_share_id,
    run_to_json,
    stats_to_csv,
    stats_to_json,
    trace_to_csv,
    trace_to_json,
)


def open_store(url: str | None = None, *, echo: bool = False) -> Store:
    """Open (creating if needed) the database at url or $DATABASE_URL and migrate it to head."""
    from storage import db

    engine = db.make_engine(url, echo=echo)
    try:
        db.upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return Store(engine)


__all__ = [
    "GroupStats",
    "NewSession",
    "RankRate",
    "RunRecord",
    "RunRecorder",
    "SessionRecord",
    "SessionSummary",
    "StorageInputError",
    "Store",
    "is_valid_share_id",
    "new_share_id",
    "open_store",
    "run_to_json",
    "stats_to_csv",
    "stats_to_json",
    "trace_to_csv",
    "trace_to_json",
]
