"""The store's size bound at every moment, not only at the retention pass.

Why: retention (storage.retention) deletes old sessions every INFILL_RETENTION_PERIOD seconds and
never one younger than an hour, so between passes nothing bounded the store: one address at ~6
small runs a second wrote about 0.4 GB an hour. So every run (and exactness check) that would
store something is admitted here first, before it computes:

- each address may store INFILL_STORE_MB_PER_HOUR (default 32) in a moving hour (kept by the
  `limits` package, in kB); a run is charged its estimated bytes once it is stored, so an address
  can go over by the runs it had in progress at most;
- the whole store is refused new runs once its size (the database's own measure, read at most once
  a second, plus what was charged since) plus a reserve of RUN_RESERVE_BYTES for each run in
  progress reaches INFILL_STORE_MAX_MB (default 2560, above the retention's 2048 target), or when
  the SQLite file's disk has less than INFILL_STORE_MIN_FREE_MB free (default 256).

A refused run computes and stores nothing; its visitor reads one sentence; the log gets one line
per burst (app.serving.call_limits.note_refusal). `0` switches a limit off; the library keeps
no budget."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from limits import RateLimitItemPerHour
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from engine.envvars import env_limit
from engine.errors import InfillError

#: bytes a run in progress may still write, reserved against the global cap until it is stored (a
#: run is bounded by its budget, engine.budget: 1,024 calls; measured runs store 5-500 kB)
RUN_RESERVE_BYTES = 8 << 20
#: seconds the store's measured size is reused (each read is a few queries)
SIZE_TTL = 1.0


class StoreFull(InfillError):
    """A run refused because storing it would break a bound of the store."""


def run_bytes(steps, text: str = "") -> int:
    """A run's stored size, estimated from its trace as JSON (the steps hold nearly all of it) and
    its text, with the rows' overhead."""
    from storage.exports import trace_to_json

    return int(1.5 * len(trace_to_json(steps))) + len(text.encode()) + 1024


class StoreBudget:
    """Admits the runs that will store something, and charges what they stored."""

    def __init__(self, *, size_of, free_of=None, cap_mb: float | None = None, per_address_mb: float | None = None,
                 min_free_mb: float | None = None, clock=time.monotonic):
        self.size_of, self.free_of, self.clock = size_of, free_of, clock
        self.cap = None if cap_mb is None else int(cap_mb * 2**20)
        self.min_free = None if min_free_mb is None else int(min_free_mb * 2**20)
        self.per_address_kb = None if per_address_mb is None else max(1, int(per_address_mb * 1024))
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._lock = threading.Lock()
        self._admit_lock = threading.Lock()
        self._measured: tuple[float, int] | None = None  # (when, bytes)
        self._since = 0  # bytes charged since the measurement
        self._in_progress = 0

    @classmethod
    def from_env(cls, engine_of) -> StoreBudget:
        """The public server's budget over the store `engine_of()` returns."""
        from storage.retention import bytes_used

        def free():
            engine = engine_of()
            path = engine.url.database if engine.dialect.name == "sqlite" else None
            return shutil.disk_usage(Path(path).resolve().parent).free if path else None

        return cls(size_of=lambda: bytes_used(engine_of()), free_of=free, cap_mb=env_limit("INFILL_STORE_MAX_MB", 2560),
                   per_address_mb=env_limit("INFILL_STORE_MB_PER_HOUR", 32),
                   min_free_mb=env_limit("INFILL_STORE_MIN_FREE_MB", 256))

    def _item(self):
        return RateLimitItemPerHour(self.per_address_kb) if self.per_address_kb else None

    def size(self) -> int:
        """The store's bytes as last measured (at most SIZE_TTL old) plus what was charged since."""
        now = self.clock()
        with self._lock:
            fresh = self._measured is not None and now - self._measured[0] < SIZE_TTL
            if fresh:
                return self._measured[1] + self._since
        used = self.size_of()
        with self._lock:
            self._measured, self._since = (now, used), 0
        return used

    def admit(self, address: str) -> None:
        """Raise StoreFull when a run of `address` may not store; else reserve room for it (the
        caller then calls charge() once it is stored, or release() when it stored nothing)."""
        from app.serving.call_limits import call_limits

        item = self._item()
        if item is not None:
            stats = self._limiter.get_window_stats(item, "store", address)
            if stats.remaining <= 0:
                minutes = max(1, round((stats.reset_time - time.time()) / 60))
                call_limits().note_refusal(address, "store", "over its hourly write budget")
                raise StoreFull(f"Your address has stored {self.per_address_kb / 1024:g} MB of runs in the last "
                                f"hour, this server's limit per address: new runs are refused for about "
                                f"{minutes} min.")
        with self._admit_lock:  # check and reserve in one step: concurrent admits cannot all see room for one
            if self.cap is not None or self.min_free is not None:
                with self._lock:
                    reserved = self._in_progress * RUN_RESERVE_BYTES
                full = self.cap is not None and self.size() + reserved + RUN_RESERVE_BYTES > self.cap
                free = self.free_of() if (self.min_free is not None and self.free_of is not None) else None
                if full or (free is not None and free < self.min_free):
                    call_limits().note_refusal(address, "store", "the store is full")
                    raise StoreFull("The studio's store is full: new runs are refused until old sessions are "
                                    "deleted (retention runs every few minutes). Stored runs still open.")
            with self._lock:
                self._in_progress += 1

    def charge(self, address: str, nbytes: int) -> None:
        """A run of `address` admitted before is stored: count its bytes (its reserve is freed)."""
        self.release()
        with self._lock:
            self._since += nbytes
        item = self._item()
        if item is not None:
            kb = max(1, -(-nbytes // 1024))
            left = self._limiter.get_window_stats(item, "store", address).remaining
            if left > 0:  # the window saturates at the budget: the next run of this address is refused
                self._limiter.hit(item, "store", address, cost=min(kb, left))

    def release(self) -> None:
        """A run admitted before has ended (stored or not): its reserve is freed."""
        with self._lock:
            self._in_progress = max(0, self._in_progress - 1)


_budget: StoreBudget | None = None
_budget_lock = threading.Lock()


def store_budget() -> StoreBudget:
    """This process's budget over the app's store (created on first use from the environment)."""
    global _budget
    with _budget_lock:
        if _budget is None:
            from app.stored.store import store

            _budget = StoreBudget.from_env(lambda: store().engine)
        return _budget
