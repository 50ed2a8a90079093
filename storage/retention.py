"""Retention: how long stored sessions are kept and how large the store may grow, and the command
that shows it: `python -m storage.retention [--dry-run] [--max-age-days D] [--max-mb M] [--url URL]`.

Why: a public server stores every run (4 visitors wrote about 0.95 GB an hour) and never
deleted any. The policy deletes whole sessions (a share link then says the session is not
stored), oldest first: those older than `max_age_days`, then, while the store is over `max_bytes`,
the oldest others, except sessions younger than `KEEP_NEWEST_SECONDS` (a link just shared
always works). Deleting a session removes its runs, steps and statistics rows (ON DELETE CASCADE)
in one short write transaction per batch, so it is safe beside writers on SQLite and PostgreSQL.

The library keeps everything (`Retention()` has no limits); the public server (`python -m app`)
applies `Retention.from_env()` every INFILL_RETENTION_PERIOD seconds: INFILL_RETENTION_DAYS
(default 30) and INFILL_RETENTION_MB (default 2048); 0 switches one off.

Size is the database's own measure of the bytes its tables use (SQLite: pages in use, which
deleted rows free for reuse, so the file stops growing rather than shrinks; PostgreSQL: the
tables' total relation size). Which sessions bring it under the limit is estimated from their
share of the stored steps, which hold nearly all of the bytes."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, func, select, text

from engine.envvars import env_limit
from storage import db
from storage.models import RunRow, SessionRow, StepRow, utcnow

log = logging.getLogger("storage")

DEFAULT_DAYS = 30.0
DEFAULT_MB = 2048.0
DEFAULT_PERIOD = 600.0
KEEP_NEWEST_SECONDS = 3600.0
BATCH = 200
TABLES = ("sessions", "runs", "steps", "rank_stats", "round_stats")


@dataclass(frozen=True)
class Retention:
    """Limits on the store: sessions older than `max_age_days`, and the oldest sessions while the
    store uses more than `max_bytes`, are deleted. None: no limit (the library's default)."""

    max_age_days: float | None = None
    max_bytes: int | None = None

    @classmethod
    def from_env(cls) -> Retention:
        """The public server's policy: INFILL_RETENTION_DAYS (default 30) and INFILL_RETENTION_MB
        (default 2048); 0 switches one off."""
        days = env_limit("INFILL_RETENTION_DAYS", DEFAULT_DAYS)
        mb = env_limit("INFILL_RETENTION_MB", DEFAULT_MB)
        return cls(days, None if mb is None else int(mb * 2**20))

    @property
    def active(self) -> bool:
        """Whether the policy can delete anything."""
        return self.max_age_days is not None or self.max_bytes is not None


@dataclass(kw_only=True)
class Plan:
    """What the store holds and what the policy would delete."""

    sessions: int
    runs: int
    steps: int
    bytes_used: int
    by_age: list[str] = field(default_factory=list)  # share ids, oldest first
    by_size: list[str] = field(default_factory=list)
    bytes_freed: int = 0  # estimated

    @property
    def share_ids(self) -> list[str]:
        """Every session the policy deletes, oldest first."""
        return self.by_age + self.by_size

    def report(self, policy: Retention, dry_run: bool) -> str:
        """A few lines an operator reads."""
        mb = lambda b: f"{b / 2**20:,.1f} MB"  # noqa: E731
        age = "off" if policy.max_age_days is None else f"{policy.max_age_days:g} days"
        size = "off" if policy.max_bytes is None else mb(policy.max_bytes)
        verb = "would delete" if dry_run else "deleted"
        return (f"store: {self.sessions:,} sessions, {self.runs:,} runs, {self.steps:,} steps, {mb(self.bytes_used)} used\n"
                f"retention: max age {age}, max size {size}\n"
                f"{verb}: {len(self.by_age):,} sessions older than the max age, {len(self.by_size):,} more to get "
                f"under the max size (about {mb(self.bytes_freed)})")


def bytes_used(engine: Engine) -> int:
    """The bytes the store's tables use, by the database's own measure."""
    with engine.connect() as c:
        if engine.dialect.name == "sqlite":
            page = c.exec_driver_sql("PRAGMA page_size").scalar() or 0
            count = c.exec_driver_sql("PRAGMA page_count").scalar() or 0
            free = c.exec_driver_sql("PRAGMA freelist_count").scalar() or 0
            return int(page * (count - free))
        if engine.dialect.name == "postgresql":
            q = " + ".join(f"coalesce(pg_total_relation_size(to_regclass('{t}')), 0)" for t in TABLES)
            return int(c.execute(text(f"SELECT {q}")).scalar() or 0)
    return 0


def plan(engine: Engine, policy: Retention, now: datetime | None = None) -> Plan:
    """What `policy` would delete now (nothing is changed)."""
    now = now or utcnow()
    with db.read_session(engine) as s:
        n_sessions = s.scalar(select(func.count(SessionRow.id))) or 0
        n_runs = s.scalar(select(func.count(RunRow.id))) or 0
        n_steps = s.scalar(select(func.count()).select_from(StepRow)) or 0
        used = bytes_used(engine)
        out = Plan(sessions=n_sessions, runs=n_runs, steps=n_steps, bytes_used=used)
        if not policy.active or n_sessions == 0:
            return out
        steps_per = (select(RunRow.session_id, func.count().label("n"))
                     .join(StepRow, StepRow.run_id == RunRow.id).group_by(RunRow.session_id).subquery())
        rows = s.execute(select(SessionRow.share_id, SessionRow.created_at, func.coalesce(steps_per.c.n, 0))
                         .outerjoin(steps_per, steps_per.c.session_id == SessionRow.id)
                         .order_by(SessionRow.created_at, SessionRow.id)).all()
    per_step = used / max(1, n_steps + n_sessions)  # bytes a stored step (or bare session) takes, on average
    excess = used - policy.max_bytes if policy.max_bytes is not None else 0
    age_cut = now - timedelta(days=policy.max_age_days) if policy.max_age_days is not None else None
    keep_cut = now - timedelta(seconds=KEEP_NEWEST_SECONDS)
    for share_id, created, steps in rows:
        size = per_step * (steps + 1)
        if age_cut is not None and created < age_cut:
            out.by_age.append(share_id)
        elif excess - out.bytes_freed > 0 and created < keep_cut:
            out.by_size.append(share_id)
        else:
            continue
        out.bytes_freed += int(size)
    return out


def apply(engine: Engine, policy: Retention, now: datetime | None = None) -> Plan:
    """Delete what `plan` names, in short batches (each its own write transaction); returns the plan."""
    p = plan(engine, policy, now)
    ids = p.share_ids
    for i in range(0, len(ids), BATCH):
        with db.write_session(engine) as s:
            s.execute(delete(SessionRow).where(SessionRow.share_id.in_(ids[i:i + BATCH])))
    return p


class Pruner:
    """Applies a policy every `period` seconds in a daemon thread (the public server's upkeep)."""

    def __init__(self, engine_of, policy: Retention, period: float = DEFAULT_PERIOD):
        self.engine_of, self.policy, self.period = engine_of, policy, period
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="store-retention", daemon=True)

    def start(self) -> Pruner:
        """Start pruning (first right away); returns self."""
        if self.policy.active:
            self.thread.start()
        return self

    def stop(self) -> None:
        """Stop after the current pass."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                p = apply(self.engine_of(), self.policy)
                if p.share_ids:
                    log.info("retention deleted %d sessions (%d by age, %d by size)",
                             len(p.share_ids), len(p.by_age), len(p.by_size))
            except Exception:  # noqa: BLE001 - upkeep must never take the server down
                log.exception("retention pass failed")
            self._stop.wait(self.period)


def period() -> float:
    """Seconds between two retention passes of the public server (INFILL_RETENTION_PERIOD, default 600)."""
    return env_limit("INFILL_RETENTION_PERIOD", DEFAULT_PERIOD) or DEFAULT_PERIOD


def main(argv: list[str] | None = None) -> int:
    """Report the store's size and what the retention policy removes (deletes it without --dry-run)."""
    ap = argparse.ArgumentParser(prog="python -m storage.retention", description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    ap.add_argument("--max-age-days", type=float, default=None,
                    help="default $INFILL_RETENTION_DAYS or 30; 0 switches it off")
    ap.add_argument("--max-mb", type=float, default=None, help="default $INFILL_RETENTION_MB or 2048; 0 switches it off")
    ap.add_argument("--url", default=None, help="database URL (default $DATABASE_URL or the local SQLite file)")
    a = ap.parse_args(argv)
    env = Retention.from_env()
    days = env.max_age_days if a.max_age_days is None else (a.max_age_days or None)
    size = env.max_bytes if a.max_mb is None else (int(a.max_mb * 2**20) if a.max_mb > 0 else None)
    policy = Retention(days, size)
    from storage import open_store

    with open_store(a.url) as store:
        p = plan(store.engine, policy) if a.dry_run else apply(store.engine, policy)
    print(p.report(policy, a.dry_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
