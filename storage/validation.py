"""Everything the store checks before it writes: sizes, types, finite numbers, share-id format.
Kept apart from the queries so a refused input never opens a transaction, and so the rules can be
read in one place (every message says what to fix: StorageInputError)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.trace import Step, StepKind, decided_tokens, trace_counts
from storage.models import RUN_STATUSES, RunRow, utcnow
from storage.records import StorageInputError

#: refuse inputs above these sizes (characters)
MAX_TEXT_CHARS = 100_000
MAX_COMPLETED_CHARS = 200_000
MAX_PARAMS_CHARS = 2_000
MAX_SPANS_CHARS = 100_000
MAX_ERROR_CHARS = 10_000
MAX_STEPS = 1_000_000

#: share ids are secrets.token_urlsafe(16): 22 URL-safe base64 characters; accept 16..64
SHARE_ID_RE = re.compile(r"[A-Za-z0-9_-]{16,64}")


def is_valid_share_id(share_id: object) -> bool:
    """Format check done before any query, so junk never reaches the database."""
    return isinstance(share_id, str) and SHARE_ID_RE.fullmatch(share_id) is not None


def check_str(name: str, value: object, limit: int, *, allow_empty: bool = True) -> str:
    """`value` if it is a storable string (type, length, no NUL); StorageInputError otherwise."""
    if not isinstance(value, str):
        raise StorageInputError(f"{name} must be a string, got {type(value).__name__}.")
    if len(value) > limit:
        raise StorageInputError(f"{name} is too long: {len(value):,} characters; the limit is {limit:,}.")
    if not allow_empty and not value:
        raise StorageInputError(f"{name} must not be empty.")
    if "\x00" in value:
        raise StorageInputError(f"{name} contains a NUL character, which cannot be stored.")
    return value


def json_text(name: str, value: object, limit: int) -> str:
    """Canonical JSON of `value` (sorted keys, finite numbers only), refused above `limit` characters;
    the canonical form is also the grouping key of a run's parameters."""
    try:
        s = json.dumps(value, sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise StorageInputError(f"{name} must be JSON-serialisable with finite numbers: {e}") from e
    if len(s) > limit:
        raise StorageInputError(f"{name} is too large: {len(s):,} characters of JSON; limit {limit:,}.")
    return s


def finite_or_none(x: float | None) -> float | None:
    """NaN and infinities are stored as NULL, so every export stays valid JSON."""
    return None if x is None or not math.isfinite(x) else float(x)


def _seconds_or_none(x: object) -> float | None:
    """A duration to store: a finite number of seconds, not below 0, else NULL (unknown)."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise StorageInputError(f"compute_seconds must be a number of seconds, got {type(x).__name__}.")
    x = finite_or_none(x)
    return x if x is not None and x >= 0 else None


def step_row(seq: int, s: Step) -> dict[str, Any]:
    """The steps-table row of trace[seq], refusing anything but a Step with finite p and q."""
    if not isinstance(s, Step):
        raise StorageInputError(f"trace[{seq}] is a {type(s).__name__}, not an engine Step.")
    for name in ("p", "q"):
        for v in getattr(s, name):
            if v is not None and not math.isfinite(v):
                raise StorageInputError(f"trace[{seq}].{name} holds a non-finite value {v!r}.")
    return {
        "seq": seq,
        "kind": StepKind(s.kind).value,
        "round": int(s.round),
        "positions": [int(x) for x in s.positions],
        "tokens": [int(x) for x in s.tokens],
        "texts": [str(x) for x in s.texts],
        "p": [None if v is None else float(v) for v in s.p],
        "q": [None if v is None else float(v) for v in s.q],
        "calls": float(s.calls),
        "elapsed": float(s.elapsed),
        "note": s.note,
        "tested": bool(s.tested),
    }


def check_seed(seed: object) -> str | None:
    """A seed as stored (decimal text: 64-bit seeds do not fit a signed BIGINT), or None."""
    if seed is not None and not (isinstance(seed, int) and -(2**63) <= seed < 2**64):
        raise StorageInputError("seed must be an int in [-2**63, 2**64) or None.")
    return None if seed is None else str(seed)


def check_status(status: object, error: str | None) -> tuple[str, str | None]:
    """A known run status, and its error message made storable (NULs dropped, cut to its limit)."""
    if status not in RUN_STATUSES:
        raise StorageInputError(f"status must be one of {RUN_STATUSES}, got {status!r}.")
    if error is not None:
        error = check_str("error", error.replace("\x00", ""), 10**9)[:MAX_ERROR_CHARS]
    return str(status), error


@dataclass(frozen=True, kw_only=True)
class CheckedRun:
    """A run that passed every check, with the columns derived from its trace (calls, rounds and
    the accepted / rejected / resampled counts come from engine.trace.trace_counts, so they cannot
    disagree with the steps)."""

    sampler: str
    params_key: str
    seed: str | None
    status: str
    error: str | None
    completed_text: str
    masked_tokens: int
    wall_seconds: float
    compute_seconds: float | None
    logprob: float | None
    trace: list[Step]
    step_rows: list[dict[str, Any]]
    counts: dict[str, float]

    def row(self, session_id: int) -> RunRow:
        """The runs-table row of this run in session `session_id`."""
        c = self.counts
        return RunRow(
            session_id=session_id, sampler=self.sampler, params=json.loads(self.params_key),
            params_key=self.params_key, seed=self.seed, status=self.status, error=self.error,
            completed_text=self.completed_text, calls=float(c["calls"]), rounds=int(c["rounds"]),
            masked_tokens=self.masked_tokens, wall_seconds=self.wall_seconds, compute_seconds=self.compute_seconds,
            accepted=int(c["accepted"]),
            rejected=int(c["rejected"]), resampled=int(c["resampled"]), logprob=self.logprob,
            created_at=utcnow(),
        )


def check_run(
    sampler: str, params: object, seed: int | None, trace: Sequence[Step], *, completed_text: str,
    masked_tokens: int | None, wall_seconds: float, logprob: float | None, status: str, error: str | None,
    compute_seconds: float | None = None,
) -> CheckedRun:
    """Check a run's fields and trace (StorageInputError says what is wrong) and derive its counts;
    masked_tokens defaults to the number of distinct positions the trace decided."""
    check_str("sampler", sampler, 64, allow_empty=False)
    if not isinstance(params, dict):
        raise StorageInputError(f"params must be a dict, got {type(params).__name__}.")
    params_key = json_text("params", params, MAX_PARAMS_CHARS)
    stored_seed = check_seed(seed)
    check_str("completed_text", completed_text, MAX_COMPLETED_CHARS)
    status, error = check_status(status, error)
    trace = list(trace)
    if len(trace) > MAX_STEPS:
        raise StorageInputError(f"trace has {len(trace):,} steps; the limit is {MAX_STEPS:,}.")
    step_rows = [step_row(i, st) for i, st in enumerate(trace)]
    if masked_tokens is None:
        masked_tokens = len(decided_tokens(trace))
    return CheckedRun(
        sampler=sampler, params_key=params_key, seed=stored_seed, status=status, error=error,
        completed_text=completed_text, masked_tokens=int(masked_tokens),
        wall_seconds=finite_or_none(wall_seconds) or 0.0, compute_seconds=_seconds_or_none(compute_seconds),
        logprob=finite_or_none(logprob), trace=trace,
        step_rows=step_rows, counts=trace_counts(trace),
    )
