"""The repository: the one storage module the rest of the project calls (`Store`).

Everything returned is a plain dataclass (storage.records), and every write is one transaction: a
run, its whole trace and its aggregates are stored together or not at all. What is checked before
a write lives in storage.validation, the statistics queries in storage.stats, the text exports in
storage.exports and the streamed-run recorder in storage.recorder; the names are re-exported here
and from `storage`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Self

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session, selectinload

from engine.trace import Step, StepKind
from storage import db
from storage.aggregates import rank_counts, round_counts
from storage.exports import run_to_json, stats_to_csv, stats_to_json, trace_to_csv, trace_to_json
from storage.models import RankStatRow, RoundStatRow, RunRow, SessionRow, StepRow
from storage.new_session import NewSession
from storage.recorder import RunRecorder
from storage.records import (
    GroupStats,
    RankRate,
    RunRecord,
    SessionRecord,
    SessionSummary,
    StorageInputError,
)
from storage.stats import group_stats
from storage.validation import (
    MAX_SPANS_CHARS,
    CheckedRun,
    check_run,
    is_valid_share_id,
    json_text,
)

SHARE_ID_BYTES = 16

__all__ = [
    "GroupStats", "NewSession", "RankRate", "RunRecord", "RunRecorder", "SessionRecord", "SessionSummary",
    "StorageInputError", "Store", "is_valid_share_id", "new_share_id", "rank_counts", "round_counts",
    "run_to_json", "stats_to_csv", "stats_to_json", "trace_to_csv", "trace_to_json",
]


def new_share_id() -> str:
    """A fresh share id (unguessable, URL-safe); nothing is stored until a run is."""
    return secrets.token_urlsafe(SHARE_ID_BYTES)


def _step_from_row(r: StepRow) -> Step:
    """A stored step as the engine's Step again."""
    return Step(
        kind=StepKind(r.kind), round=r.round, positions=list(r.positions), tokens=list(r.tokens),
        texts=list(r.texts), p=list(r.p), q=list(r.q), calls=r.calls, elapsed=r.elapsed, note=r.note,
        tested=bool(r.tested),
    )


def _insert_run(s: Session, session_id: int, run: CheckedRun) -> int:
    """Write a checked run, its steps and its per-run aggregates (inside the caller's transaction)."""
    row = run.row(session_id)
    s.add(row)
    s.flush()
    rid = row.id
    ranks, rounds = rank_counts(run.trace), round_counts(run.trace)
    if run.step_rows:
        s.execute(StepRow.__table__.insert(), [{"run_id": rid, **r} for r in run.step_rows])
    if ranks:
        s.execute(RankStatRow.__table__.insert(),
                  [{"run_id": rid, "rank": k, "accepted": a, "rejected": r} for k, (a, r) in ranks.items()])
    if rounds:
        s.execute(RoundStatRow.__table__.insert(),
                  [{"run_id": rid, "round": k, "tokens": t, "calls": c} for k, (t, c) in rounds.items()])
    return rid


def _session_id(s: Session, share_id: str, session: NewSession | None) -> int:
    """The id of the session behind `share_id`, inserting `session` there when it is not stored yet."""
    session_id = s.scalar(select(SessionRow.id).where(SessionRow.share_id == share_id))
    if session_id is None and session is not None:
        row = session.row(share_id)
        s.add(row)
        s.flush()
        session_id = row.id
    if session_id is None:
        raise LookupError(f"unknown session {share_id!r}")
    return session_id


class Store:
    """Sessions, runs and statistics on one database (SQLite file or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sessions

    def create_session(self, domain: str, model: str, text: str, spans: Any) -> str:
        """Store an input; returns its share id (unguessable, URL-safe)."""
        new = NewSession(domain=domain, model=model, text=text, spans=spans)
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
                func.substr(SessionRow.text, 1, 200).label("text_preview"),
                func.coalesce(counts.c.n, 0).label("run_count"),
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
            rows = s.execute(q).all()
            samplers = self._samplers(s, [r[0] for r in rows])
        # the columns are labelled with SessionSummary's field names, so a row fills it by name
        return [SessionSummary(**row._asdict(), samplers=samplers.get(row.share_id, [])) for row in rows]

    @staticmethod
    def _samplers(s: Session, share_ids: list[str]) -> dict[str, list[str]]:
        """share id -> the samplers of its runs, oldest run first (one query for the whole list)."""
        if not share_ids:
            return {}
        q = (select(SessionRow.share_id, RunRow.sampler).join(RunRow, RunRow.session_id == SessionRow.id)
             .where(SessionRow.share_id.in_(share_ids)).order_by(RunRow.id))
        out: dict[str, list[str]] = {}
        for sid, sampler in s.execute(q):
            out.setdefault(sid, []).append(sampler)
        return out

    def annotate_session(self, share_id: object, key: str, value: Any) -> bool:
        """Add `key: value` to a stored session's spans (a dict; a session whose spans are not one
        is left alone), within the spans' size limit: what is learnt about a session after it was
        stored (a comparison's verdict). False for an unknown id or spans that are not a dict."""
        if not is_valid_share_id(share_id):
            return False
        with db.write_session(self.engine) as s:
            row = s.scalars(select(SessionRow).where(SessionRow.share_id == share_id)).one_or_none()
            if row is None or not isinstance(row.spans, dict):
                return False
            spans = {**row.spans, key: value}
            json_text("spans", spans, MAX_SPANS_CHARS)
            row.spans = spans  # a new dict: the JSON column sees the change
            return True

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
        compute_seconds: float | None = None,
    ) -> int:
        """Store a run and its whole trace in one transaction; returns the run id. With `session`,
        an unknown share id is created in that same transaction (see NewSession).

        calls, rounds and the accepted / rejected / resampled counts are derived from the trace
        (engine.trace.trace_counts), so they cannot disagree with it. masked_tokens defaults to
        the number of distinct positions the trace decided. Raises StorageInputError for bad
        input (storage.validation.check_run) and LookupError for an unknown session.
        """
        if not is_valid_share_id(share_id):
            raise LookupError("unknown session (malformed share id)")
        run = check_run(sampler, params, seed, trace, completed_text=completed_text, masked_tokens=masked_tokens,
                        wall_seconds=wall_seconds, logprob=logprob, status=status, error=error,
                        compute_seconds=compute_seconds)
        with db.write_session(self.engine) as s:
            return _insert_run(s, _session_id(s, share_id, session), run)

    def record_runs(self, share_id: str, runs: list[dict[str, Any]], session: NewSession | None = None) -> list[int]:
        """Store several runs (each a dict of record_run's arguments: sampler, params, seed, trace,
        and its fields) and, with `session`, their session, all in one transaction (a comparison:
        storage.recorder.RunGroup); their ids in order. Every run is checked before anything is written."""
        if not is_valid_share_id(share_id):
            raise LookupError("unknown session (malformed share id)")
        fields = {"completed_text": "", "masked_tokens": None, "wall_seconds": 0.0, "logprob": None, "status": "ok",
                  "error": None, "compute_seconds": None}
        checked = [check_run(r["sampler"], r["params"], r["seed"], r["trace"],
                             **{**fields, **{k: v for k, v in r.items() if k in fields}})
                   for r in runs]
        with db.write_session(self.engine) as s:
            session_id = _session_id(s, share_id, session)
            return [_insert_run(s, session_id, run) for run in checked]

    def recorder(
        self, share_id: str, sampler: str, params: dict[str, Any], seed: int | None,
        session: NewSession | None = None,
    ) -> RunRecorder:
        """Context manager that records a streamed run once, at the end (see RunRecorder)."""
        return RunRecorder(store=self, share_id=share_id, sampler=sampler, params=params, seed=seed, session=session)

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
            compute_seconds=r.compute_seconds,
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
        """Statistics of 'ok' runs grouped per model x sampler x parameters (storage.stats).

        The model is the one the run really used (its params' "model" when recorded, else the
        session's): a compare session of two models counts each run under its own model.
        since / until filter on the run's creation time (since <= created_at < until; naive
        datetimes are taken as UTC).
        """
        return group_stats(self.engine, domain=domain, model=model, sampler=sampler, since=since, until=until)
