"""The repository: the one storage module the rest of the project calls.

Everything returned is a plain dataclass (no ORM object outlives its short transaction), and every
write is one transaction: a run, its whole trace and its aggregates are stored together or not at
all. Steps are collected in memory while a sampler streams and written once at the end
(`Store.recorder`), so no database session is held open across a streaming generator.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Engine, delete, func, or_, select
from sqlalchemy.orm import selectinload

from engine.trace import Step, StepKind, decided_tokens, trace_counts
from storage import db
from storage.models import (
    RUN_STATUSES,
    RankStatRow,
    RoundStatRow,
    RunRow,
    SessionRow,
    StepRow,
    utcnow,
)

#: refuse inputs above these sizes (characters)
MAX_TEXT_CHARS = 100_000
MAX_COMPLETED_CHARS = 200_000
MAX_PARAMS_CHARS = 2_000
MAX_SPANS_CHARS = 100_000
MAX_ERROR_CHARS = 10_000
MAX_STEPS = 1_000_000

#: share ids are secrets.token_urlsafe(16): 22 URL-safe base64 characters; accept 16..64
SHARE_ID_RE = re.compile(r"[A-Za-z0-9_-]{16,64}")
SHARE_ID_BYTES = 16

_DECISION_RANKED = (StepKind.ACCEPT, StepKind.REJECT)
_DECIDING = {
    StepKind.ACCEPT,
    StepKind.RESAMPLE,
    StepKind.BONUS,
    StepKind.SAMPLE,
    StepKind.REVEAL,
}


class StorageInputError(ValueError):
    """Input the store refuses (too large, wrong type, not JSON); the message says what to fix."""


# ----------------------------------------------------------------------------- plain results


@dataclass
class RunRecord:
    """A stored run with its trace (steps in order, as engine Step objects)."""

    id: int
    share_id: str
    sampler: str
    params: dict[str, Any]
    seed: int | None
    status: str
    error: str | None
    completed_text: str
    calls: float
    rounds: int
    masked_tokens: int
    wall_seconds: float
    accepted: int
    rejected: int
    resampled: int
    logprob: float | None
    created_at: datetime
    steps: list[Step] = field(default_factory=list)


@dataclass
class SessionRecord:
    """A stored input with all its runs."""

    share_id: str
    domain: str
    model: str
    text: str
    spans: Any
    created_at: datetime
    runs: list[RunRecord] = field(default_factory=list)


@dataclass
class SessionSummary:
    """A row of the session list: enough to show and link, without the runs."""

    share_id: str
    domain: str
    model: str
    created_at: datetime
    text_preview: str
    run_count: int


@dataclass
class RankRate:
    """Acceptance at one rank within a round (rank 0 = first draft of the round)."""

    rank: int
    accepted: int
    rejected: int

    @property
    def rate(self) -> float | None:
        n = self.accepted + self.rejected
        return self.accepted / n if n else None


@dataclass
class GroupStats:
    """Statistics of the 'ok' runs of one model x sampler x parameters group."""

    model: str
    sampler: str
    params: dict[str, Any]
    runs: int
    masked_tokens: int
    calls: float
    rounds: int
    acceptance_by_rank: list[RankRate]
    #: one value per run: masked tokens / calls
    tokens_per_call: list[float]
    #: tokens decided in a round -> number of rounds that decided that many
    tokens_per_round: dict[int, int]
    #: one (masked tokens, calls) pair per run, in run order
    calls_vs_masked: list[tuple[int, float]]

    @property
    def mean_tokens_per_call(self) -> float | None:
        """Pooled: all masked tokens over all calls (not the mean of per-run ratios)."""
        return self.masked_tokens / self.calls if self.calls else None

    @property
    def mean_tokens_per_round(self) -> float | None:
        n = sum(self.tokens_per_round.values())
        return sum(k * v for k, v in self.tokens_per_round.items()) / n if n else None


# ----------------------------------------------------------------------------- validation


def is_valid_share_id(share_id: object) -> bool:
    """Format check done before any query, so junk never reaches the database."""
    return isinstance(share_id, str) and SHARE_ID_RE.fullmatch(share_id) is not None


def _check_str(
    name: str, value: object, limit: int, *, allow_empty: bool = True
) -> str:
    if not isinstance(value, str):
        raise StorageInputError(f"{name} must be a string, got {type(value).__name__}.")
    if len(value) > limit:
        raise StorageInputError(
            f"{name} is too long: {len(value):,} characters; the limit is {limit:,}."
        )
    if not allow_empty and not value:
        raise StorageInputError(f"{name} must not be empty.")
    if "\x00" in value:
        raise StorageInputError(
            f"{name} contains a NUL character, which cannot be stored."
        )
    return value


def _json_text(name: str, value: object, limit: int) -> str:
    try:
        s = json.dumps(value, sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise StorageInputError(
            f"{name} must be JSON-serialisable with finite numbers: {e}"
        ) from e
    if len(s) > limit:
        raise StorageInputError(
            f"{name} is too large: {len(s):,} characters of JSON; limit {limit:,}."
        )
    return s


def _finite_or_none(x: float | None) -> float | None:
    """NaN and infinities are stored as NULL, so every export stays valid JSON."""
    return None if x is None or not math.isfinite(x) else float(x)


def _step_row(seq: int, s: Step) -> dict[str, Any]:
    if not isinstance(s, Step):
        raise StorageInputError(
            f"trace[{seq}] is a {type(s).__name__}, not an engine Step."
        )
    for name in ("p", "q"):
        for v in getattr(s, name):
            if v is not None and not math.isfinite(v):
                raise StorageInputError(
                    f"trace[{seq}].{name} holds a non-finite value {v!r}."
                )
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
    }


def _step_from_row(r: StepRow) -> Step:
    return Step(
        kind=StepKind(r.kind),
        round=r.round,
        positions=list(r.positions),
        tokens=list(r.tokens),
        texts=list(r.texts),
        p=list(r.p),
        q=list(r.q),
        calls=r.calls,
        elapsed=r.elapsed,
        note=r.note,
    )


# ----------------------------------------------------------------------------- derived aggregates


def rank_counts(trace: Sequence[Step]) -> dict[int, list[int]]:
    """rank within the round -> [accepted, rejected].

    The rank of an ACCEPT/REJECT position is its index in the same round's most recent DRAFT
    step (drafted positions are listed in rank order). Decisions with no matching draft are
    not counted.
    """
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    draft_rank: dict[int, dict[int, int]] = {}
    for s in trace:
        if s.kind == StepKind.DRAFT:
            draft_rank[s.round] = {pos: i for i, pos in enumerate(s.positions)}
        elif s.kind in _DECISION_RANKED:
            ranks = draft_rank.get(s.round, {})
            for pos in s.positions:
                if pos in ranks:
                    out[ranks[pos]][0 if s.kind == StepKind.ACCEPT else 1] += 1
    return dict(out)


def round_counts(trace: Sequence[Step]) -> dict[int, tuple[int, float]]:
    """round -> (tokens decided in it, calls spent in it).

    Calls of a round = the calls counter at its last step minus the counter at the previous
    round's last step (steps carry the running total).
    """
    tokens: dict[int, int] = defaultdict(int)
    last_calls: dict[int, float] = {}
    for s in trace:
        tokens[s.round] += len(s.positions) if s.kind in _DECIDING else 0
        last_calls[s.round] = s.calls
    out: dict[int, tuple[int, float]] = {}
    prev = 0.0
    for r in sorted(last_calls):
        out[r] = (tokens[r], last_calls[r] - prev)
        prev = last_calls[r]
    return out


# ----------------------------------------------------------------------------- the store


def new_share_id() -> str:
    """A fresh share id (unguessable, URL-safe); nothing is stored until a run is."""
    return secrets.token_urlsafe(SHARE_ID_BYTES)


class NewSession:
    """A session not stored yet: `record_run(..., session=NewSession(...))` inserts it in the same
    transaction as its first run, so a process killed mid-run (or mid-write) never leaves a
    session without runs. Checked on construction."""

    def __init__(self, domain: str, model: str, text: str, spans: Any) -> None:
        _check_str("domain", domain, 32, allow_empty=False)
        _check_str("model", model, 200, allow_empty=False)
        _check_str("text", text, MAX_TEXT_CHARS)
        _json_text("spans", spans, MAX_SPANS_CHARS)
        self.domain, self.model, self.text = domain, model, text
        self.spans = json.loads(json.dumps(spans))

    def row(self, share_id: str) -> SessionRow:
        return SessionRow(share_id=share_id, domain=self.domain, model=self.model, text=self.text,
                          spans=self.spans, created_at=utcnow())


class Store:
    """Sessions, runs and statistics on one database (SQLite file or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sessions

    def create_session(self, domain: str, model: str, text: str, spans: Any) -> str:
        """Store an input; returns its share id (unguessable, URL-safe)."""
        new = NewSession(domain, model, text, spans)
        share_id = new_share_id()
        with db.write_session(self.engine) as s:
            s.add(new.row(share_id))
        return share_id

    def get_session(self, share_id: object) -> SessionRecord | None:
        """The session with its runs and steps, or None for an unknown or malformed id."""
        if not is_valid_share_id(share_id):
            return None
        with db.read_session(self.engine) as s:
            row = s.scalars(
                select(SessionRow)
                .where(SessionRow.share_id == share_id)
                .options(selectinload(SessionRow.runs).selectinload(RunRow.steps))
            ).one_or_none()
            if row is None:
                return None
            return SessionRecord(
                share_id=row.share_id,
                domain=row.domain,
                model=row.model,
                text=row.text,
                spans=row.spans,
                created_at=row.created_at,
                runs=[self._run_record(r, row.share_id) for r in row.runs],
            )

    def list_sessions(
        self, limit: int = 50, domain: str | None = None, offset: int = 0,
        share_ids: Sequence[object] | None = None,
    ) -> list[SessionSummary]:
        """Newest first; only the given share ids when `share_ids` is not None (invalid ones are ignored)."""
        limit = max(0, min(int(limit), 1000))
        counts = (
            select(RunRow.session_id, func.count(RunRow.id).label("n"))
            .group_by(RunRow.session_id)
            .subquery()
        )
        q = (
            select(
                SessionRow.share_id,
                SessionRow.domain,
                SessionRow.model,
                SessionRow.created_at,
                func.substr(SessionRow.text, 1, 200),
                func.coalesce(counts.c.n, 0),
            )
            .outerjoin(counts, counts.c.session_id == SessionRow.id)
            .order_by(SessionRow.created_at.desc(), SessionRow.id.desc())
            .limit(limit)
            .offset(max(0, int(offset)))
        )
        if domain is not None:
            q = q.where(SessionRow.domain == domain)
        if share_ids is not None:
            wanted = [i for i in share_ids if is_valid_share_id(i)][:1000]
            if not wanted:
                return []
            q = q.where(SessionRow.share_id.in_(wanted))
        with db.read_session(self.engine) as s:
            return [SessionSummary(*row) for row in s.execute(q).all()]

    def delete_session(self, share_id: object) -> bool:
        """Delete a session and (by ON DELETE CASCADE) its runs and steps; False if unknown."""
        if not is_valid_share_id(share_id):
            return False
        with db.write_session(self.engine) as s:
            res = s.execute(delete(SessionRow).where(SessionRow.share_id == share_id))
            return bool(res.rowcount)

    # ---- runs

    def record_run(
        self,
        share_id: str,
        sampler: str,
        params: dict[str, Any],
        seed: int | None,
        trace: Sequence[Step],
        *,
        completed_text: str = "",
        masked_tokens: int | None = None,
        wall_seconds: float = 0.0,
        logprob: float | None = None,
        status: str = "ok",
        error: str | None = None,
        session: NewSession | None = None,
    ) -> int:
        """Store a run and its whole trace in one transaction; returns the run id. With `session`,
        an unknown share id is created in that same transaction (see NewSession).

        calls, rounds and the accepted / rejected / resampled counts are derived from the trace
        (engine.trace.trace_counts), so they cannot disagree with it. masked_tokens defaults to
        the number of distinct positions the trace decided. Raises StorageInputError for bad
        input and LookupError for an unknown session.
        """
        if not is_valid_share_id(share_id):
            raise LookupError("unknown session (malformed share id)")
        _check_str("sampler", sampler, 64, allow_empty=False)
        if not isinstance(params, dict):
            raise StorageInputError(
                f"params must be a dict, got {type(params).__name__}."
            )
        params_key = _json_text("params", params, MAX_PARAMS_CHARS)
        if seed is not None and not (
            isinstance(seed, int) and -(2**63) <= seed < 2**64
        ):
            raise StorageInputError("seed must be an int in [-2**63, 2**64) or None.")
        _check_str("completed_text", completed_text, MAX_COMPLETED_CHARS)
        if status not in RUN_STATUSES:
            raise StorageInputError(
                f"status must be one of {RUN_STATUSES}, got {status!r}."
            )
        if error is not None:
            error = _check_str("error", error.replace("\x00", ""), 10**9)[
                :MAX_ERROR_CHARS
            ]
        trace = list(trace)
        if len(trace) > MAX_STEPS:
            raise StorageInputError(
                f"trace has {len(trace):,} steps; the limit is {MAX_STEPS:,}."
            )
        step_rows = [_step_row(i, st) for i, st in enumerate(trace)]
        counts = trace_counts(trace)
        if masked_tokens is None:
            masked_tokens = len(decided_tokens(trace))
        ranks = rank_counts(trace)
        rounds = round_counts(trace)

        with db.write_session(self.engine) as s:
            session_id = s.scalar(
                select(SessionRow.id).where(SessionRow.share_id == share_id)
            )
            if session_id is None and session is not None:
                row = session.row(share_id)
                s.add(row)
                s.flush()
                session_id = row.id
            if session_id is None:
                raise LookupError(f"unknown session {share_id!r}")
            run = RunRow(
                session_id=session_id,
                sampler=sampler,
                params=json.loads(params_key),
                params_key=params_key,
                seed=None if seed is None else str(seed),
                status=status,
                error=error,
                completed_text=completed_text,
                calls=float(counts["calls"]),
                rounds=int(counts["rounds"]),
                masked_tokens=int(masked_tokens),
                wall_seconds=_finite_or_none(wall_seconds) or 0.0,
                accepted=int(counts["accepted"]),
                rejected=int(counts["rejected"]),
                resampled=int(counts["resampled"]),
                logprob=_finite_or_none(logprob),
                created_at=utcnow(),
            )
            s.add(run)
            s.flush()
            rid = run.id
            if step_rows:
                s.execute(
                    StepRow.__table__.insert(),
                    [{"run_id": rid, **r} for r in step_rows],
                )
            if ranks:
                s.execute(
                    RankStatRow.__table__.insert(),
                    [
                        {"run_id": rid, "rank": k, "accepted": a, "rejected": r}
                        for k, (a, r) in ranks.items()
                    ],
                )
            if rounds:
                s.execute(
                    RoundStatRow.__table__.insert(),
                    [
                        {"run_id": rid, "round": k, "tokens": t, "calls": c}
                        for k, (t, c) in rounds.items()
                    ],
                )
        return rid

    def recorder(
        self, share_id: str, sampler: str, params: dict[str, Any], seed: int | None,
        session: NewSession | None = None,
    ) -> RunRecorder:
        """Context manager that records a streamed run once, at the end (see RunRecorder)."""
        return RunRecorder(self, share_id, sampler, params, seed, session)

    def get_run(self, run_id: int) -> RunRecord | None:
        """A run with its steps, or None."""
        if not isinstance(run_id, int) or isinstance(run_id, bool):
            return None
        with db.read_session(self.engine) as s:
            row = s.scalars(
                select(RunRow)
                .where(RunRow.id == run_id)
                .options(selectinload(RunRow.steps))
            ).one_or_none()
            if row is None:
                return None
            share_id = s.scalar(
                select(SessionRow.share_id).where(SessionRow.id == row.session_id)
            )
            return self._run_record(row, share_id or "")

    @staticmethod
    def _run_record(r: RunRow, share_id: str) -> RunRecord:
        return RunRecord(
            id=r.id,
            share_id=share_id,
            sampler=r.sampler,
            params=dict(r.params),
            seed=None if r.seed is None else int(r.seed),
            status=r.status,
            error=r.error,
            completed_text=r.completed_text,
            calls=r.calls,
            rounds=r.rounds,
            masked_tokens=r.masked_tokens,
            wall_seconds=r.wall_seconds,
            accepted=r.accepted,
            rejected=r.rejected,
            resampled=r.resampled,
            logprob=r.logprob,
            created_at=r.created_at,
            steps=[_step_from_row(x) for x in r.steps],
        )

    def export_run(self, run_id: int, fmt: str = "json") -> str | None:
        """A run's trace as CSV or JSON text, or None if there is no such run."""
        run = self.get_run(run_id)
        if run is None:
            return None
        if fmt == "csv":
            return trace_to_csv(run.steps)
        if fmt == "json":
            return run_to_json(run)
        raise StorageInputError(f"fmt must be 'csv' or 'json', got {fmt!r}.")

    # ---- statistics

    def stats(
        self,
        *,
        domain: str | None = None,
        model: str | None = None,
        sampler: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[GroupStats]:
        """Statistics of 'ok' runs grouped per model x sampler x parameters.

        The model is the one the run really used (its params' "model" when recorded, else the
        session's): a compare session of two models counts each run under its own model.
        since / until filter on the run's creation time (since <= created_at < until; naive
        datetimes are taken as UTC).
        """
        conds = [RunRow.status == "ok"]
        if domain is not None:
            conds.append(SessionRow.domain == domain)
        if model is not None:  # narrowed in SQL, decided exactly per run below
            conds.append(or_(SessionRow.model == model, SessionRow.model.contains(model, autoescape=True)))
        if sampler is not None:
            conds.append(RunRow.sampler == sampler)
        if since is not None:
            conds.append(RunRow.created_at >= since)
        if until is not None:
            conds.append(RunRow.created_at < until)
        gcols = (SessionRow.model, RunRow.sampler, RunRow.params_key)
        base = (
            select(RunRow.id)
            .join(SessionRow, RunRow.session_id == SessionRow.id)
            .where(*conds)
        )
        ids = base.subquery()

        def key(m: str, smp: str, pk: str) -> tuple[str, str, str] | None:
            ran = json.loads(pk).get("model")
            eff = ran if isinstance(ran, str) and ran else m
            if model is not None and eff != model:
                return None
            return eff, smp, pk

        groups: dict[tuple[str, str, str], GroupStats] = {}
        with db.read_session(self.engine) as s:
            runs_q = (
                select(*gcols, RunRow.masked_tokens, RunRow.calls, RunRow.rounds)
                .join(SessionRow, RunRow.session_id == SessionRow.id)
                .where(*conds)
                .order_by(*gcols, RunRow.id)
            )
            for m, smp, pk, masked, calls, rounds in s.execute(runs_q):
                kk = key(m, smp, pk)
                if kk is None:
                    continue
                g = groups.get(kk)
                if g is None:
                    g = groups[kk] = GroupStats(
                        kk[0], smp, json.loads(pk), 0, 0, 0.0, 0, [], [], {}, []
                    )
                g.runs += 1
                g.masked_tokens += masked
                g.calls += calls
                g.rounds += rounds
                g.calls_vs_masked.append((masked, calls))
                if calls > 0:
                    g.tokens_per_call.append(masked / calls)

            def grouped(stat_table, *extra):
                return (
                    select(*gcols, *extra)
                    .select_from(stat_table)
                    .join(RunRow, RunRow.id == stat_table.c.run_id)
                    .join(SessionRow, RunRow.session_id == SessionRow.id)
                    .where(stat_table.c.run_id.in_(select(ids.c.id)))
                    .group_by(*gcols, extra[0])
                    .order_by(*gcols, extra[0])
                )

            rt = RankStatRow.__table__
            by_rank: dict[tuple[str, str, str], dict[int, list[int]]] = {}
            for m, smp, pk, rank, acc, rej in s.execute(
                grouped(rt, rt.c.rank, func.sum(rt.c.accepted), func.sum(rt.c.rejected))
            ):
                kk = key(m, smp, pk)
                if kk is None or kk not in groups:
                    continue
                tot = by_rank.setdefault(kk, {}).setdefault(int(rank), [0, 0])
                tot[0] += int(acc)
                tot[1] += int(rej)
            for kk, ranks in by_rank.items():
                groups[kk].acceptance_by_rank.extend(
                    RankRate(r, a, j) for r, (a, j) in sorted(ranks.items())
                )

            rd = RoundStatRow.__table__
            for m, smp, pk, tokens, n in s.execute(
                grouped(rd, rd.c.tokens, func.count())
            ):
                kk = key(m, smp, pk)
                if kk is None or kk not in groups:
                    continue
                tpr = groups[kk].tokens_per_round
                tpr[int(tokens)] = tpr.get(int(tokens), 0) + int(n)
        return list(groups.values())


class RunRecorder:
    """Collects a streamed trace in memory and stores it once, however the stream ends.

    Usage::

        with store.recorder(share_id, "assd", {"k": 5}, seed) as rec:
            for step in rec.wrap(sampler_steps):   # yields the steps through
                show(step)
            rec.finish(completed_text=text, masked_tokens=n, logprob=lp)
        rec.run_id  # the stored run

    Exit after finish(): status 'ok'. Exit without finish() (the caller stopped early), or by
    KeyboardInterrupt / GeneratorExit: 'cancelled'. Exit by an exception with a `run_status`
    attribute (engine.budget.BudgetExceededError: 'stopped'): that status and its message. Exit
    by any other exception: 'failed' with the error message; the exception propagates. In every
    case the steps seen so far are stored in one transaction, so a run is never half-written;
    unless discard() was called (a job cancelled before it showed anything): then nothing is.
    """

    def __init__(
        self,
        store: Store,
        share_id: str,
        sampler: str,
        params: dict[str, Any],
        seed: int | None,
        session: NewSession | None = None,
    ) -> None:
        self.store, self.share_id, self.sampler, self.params, self.seed = (
            store,
            share_id,
            sampler,
            params,
            seed,
        )
        self.session = session
        self.discarded = False
        self.steps: list[Step] = []
        self.run_id: int | None = None
        self._result: dict[str, Any] | None = None
        self._t0 = 0.0

    def __enter__(self) -> Self:
        import time

        self._t0 = time.perf_counter()
        return self

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def wrap(self, steps: Iterable[Step]) -> Iterator[Step]:
        """Yield each step through, keeping it."""
        for st in steps:
            self.steps.append(st)
            yield st

    def discard(self) -> None:
        """Store nothing on exit (the run never reached anyone)."""
        self.discarded = True

    def finish(
        self,
        *,
        completed_text: str = "",
        masked_tokens: int | None = None,
        logprob: float | None = None,
        wall_seconds: float | None = None,
    ) -> None:
        """Mark the run complete with its result fields (stored on exit)."""
        self._result = {
            "completed_text": completed_text,
            "masked_tokens": masked_tokens,
            "logprob": logprob,
            "wall_seconds": wall_seconds,
        }

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import time

        res = dict(self._result or {})
        if res.get("wall_seconds") is None:
            res["wall_seconds"] = time.perf_counter() - self._t0
        if exc is None:
            status, error = ("ok" if self._result is not None else "cancelled"), None
        elif isinstance(exc, KeyboardInterrupt | GeneratorExit):
            status, error = "cancelled", type(exc).__name__
        elif getattr(exc, "run_status", None) in RUN_STATUSES:
            status, error = exc.run_status, str(exc)
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        if self.discarded:
            return
        self.run_id = self.store.record_run(
            self.share_id,
            self.sampler,
            self.params,
            self.seed,
            self.steps,
            status=status,
            error=error,
            session=self.session,
            **res,
        )


# ----------------------------------------------------------------------------- export

TRACE_COLUMNS = (
    "seq",
    "kind",
    "round",
    "positions",
    "tokens",
    "texts",
    "p",
    "q",
    "calls",
    "elapsed",
    "note",
)


def trace_to_csv(steps: Sequence[Step]) -> str:
    """One row per step; list cells hold JSON arrays (lossless, and parseable back)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TRACE_COLUMNS)
    for i, s in enumerate(steps):
        w.writerow(
            [
                i,
                StepKind(s.kind).value,
                s.round,
                *(
                    json.dumps(getattr(s, c))
                    for c in ("positions", "tokens", "texts", "p", "q")
                ),
                repr(float(s.calls)),
                repr(float(s.elapsed)),
                s.note,
            ]
        )
    return buf.getvalue()


def trace_to_json(steps: Sequence[Step]) -> str:
    """A JSON array of Step.to_dict() (Step.from_dict reads each back)."""
    return json.dumps([s.to_dict() for s in steps])


def run_to_json(run: RunRecord) -> str:
    """The run's fields and its trace, as one JSON object."""
    d = asdict(run)
    d["created_at"] = run.created_at.isoformat()
    d["steps"] = [s.to_dict() for s in run.steps]
    return json.dumps(d)


def stats_to_json(groups: Sequence[GroupStats]) -> str:
    out = []
    for g in groups:
        d = asdict(g)
        d["acceptance_by_rank"] = [
            {
                "rank": r.rank,
                "accepted": r.accepted,
                "rejected": r.rejected,
                "rate": r.rate,
            }
            for r in g.acceptance_by_rank
        ]
        d["tokens_per_round"] = {
            str(k): v for k, v in sorted(g.tokens_per_round.items())
        }
        d["calls_vs_masked"] = [list(x) for x in g.calls_vs_masked]
        d["mean_tokens_per_call"] = g.mean_tokens_per_call
        d["mean_tokens_per_round"] = g.mean_tokens_per_round
        out.append(d)
    return json.dumps(out)


STATS_COLUMNS = ("model", "sampler", "params", "metric", "key", "value", "count")


def stats_to_csv(groups: Sequence[GroupStats]) -> str:
    """Long format, one measurement per row: model, sampler, params, metric, key, value, count.

    metrics: runs, tokens_per_call (pooled), acceptance_rate (key = rank, count = decisions),
    tokens_per_round (key = tokens, count = rounds), run (key = masked tokens, value = calls).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(STATS_COLUMNS)
    for g in groups:
        head = [g.model, g.sampler, json.dumps(g.params, sort_keys=True)]
        w.writerow([*head, "runs", "", g.runs, ""])
        w.writerow([*head, "tokens_per_call", "", _num(g.mean_tokens_per_call), g.runs])
        for r in g.acceptance_by_rank:
            w.writerow(
                [
                    *head,
                    "acceptance_rate",
                    r.rank,
                    _num(r.rate),
                    r.accepted + r.rejected,
                ]
            )
        for k, v in sorted(g.tokens_per_round.items()):
            w.writerow([*head, "tokens_per_round", k, "", v])
        for masked, calls in g.calls_vs_masked:
            w.writerow([*head, "run", masked, _num(calls), 1])
    return buf.getvalue()


def _num(x: float | None) -> str:
    return "" if x is None else repr(float(x))
