"""ORM schema: sessions -> runs -> steps, plus two small per-run aggregate tables.

The trace (``steps``) is the record; ``rank_stats`` and ``round_stats`` are derived from it in the
same transaction that writes it, so the statistics queries are plain GROUP BYs over a few rows per
run instead of re-reading every step. Deletes cascade in the database (ON DELETE CASCADE), so a
Core ``DELETE FROM sessions`` removes everything below it without loading it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: run statuses; a run that raised is 'failed', one the caller stopped is 'cancelled', one that
#: used up its budget (engine.budget) is 'stopped'
RUN_STATUSES = ("ok", "failed", "cancelled", "stopped")

# Explicit constraint names so that Alembic batch mode (SQLite) and PostgreSQL agree on them.
NAMING = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    SQLite has no timezone type and SQLAlchemy's SQLite DATETIME drops tzinfo, so values are
    normalised to UTC before binding and tagged UTC when read back; comparisons are then correct.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        """Store every datetime as UTC (a naive one is taken as UTC already)."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        """Read every datetime back as an aware UTC datetime, whatever the backend returns."""
        if value is None:
            return None
        return (
            value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        )


def utcnow() -> datetime:
    """The current time, aware and in UTC (every stored timestamp)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """The declarative base with a naming convention, so constraints have stable names across backends and migrations."""

    metadata = MetaData(naming_convention=NAMING)


class SessionRow(Base):
    """An input: the text, its masked spans and the model; shared by its unguessable share_id."""

    __tablename__ = "sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    share_id: Mapped[str] = mapped_column(String(64), unique=True)
    domain: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)
    spans: Mapped[object] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    runs: Mapped[list[RunRow]] = relationship(
        back_populates="session",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="RunRow.id",
    )

    __table_args__ = (
        Index("ix_sessions_domain_created", "domain", "created_at"),
        Index("ix_sessions_model", "model"),
        Index("ix_sessions_created", "created_at"),
    )


class RunRow(Base):
    """One sampler execution on a session; the counters are derived from its trace."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE")
    )
    sampler: Mapped[str] = mapped_column(String(64))
    params: Mapped[object] = mapped_column(JSON)
    # canonical JSON of params (sorted keys): JSON columns cannot be grouped on portably
    params_key: Mapped[str] = mapped_column(String(2000))
    # text, not BIGINT: torch seeds go up to 2**64 - 1
    seed: Mapped[str | None] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    completed_text: Mapped[str] = mapped_column(Text, default="")
    calls: Mapped[float] = mapped_column(Float, default=0.0)
    rounds: Mapped[int] = mapped_column(Integer, default=0)
    masked_tokens: Mapped[int] = mapped_column(Integer, default=0)
    wall_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    # seconds inside the sampler (engine.api's compute_seconds: what Compare shows, since its two
    # sides alternate and each side's wall time counts the other's rounds); NULL for runs stored
    # before it was kept (migration 0004)
    compute_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    accepted: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)
    resampled: Mapped[int] = mapped_column(Integer, default=0)
    logprob: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    session: Mapped[SessionRow] = relationship(back_populates="runs")
    steps: Mapped[list[StepRow]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="StepRow.seq"
    )

    __table_args__ = (
        CheckConstraint("status IN ('ok', 'failed', 'cancelled', 'stopped')", name="status"),
        Index("ix_runs_session", "session_id"),
        Index("ix_runs_sampler_params", "sampler", "params_key"),
        Index("ix_runs_created", "created_at"),
    )


class StepRow(Base):
    """One trace event; (run_id, seq) keeps the order and is the primary key."""

    __tablename__ = "steps"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    round: Mapped[int] = mapped_column(Integer)
    positions: Mapped[list] = mapped_column(JSON)
    tokens: Mapped[list] = mapped_column(JSON)
    texts: Mapped[list] = mapped_column(JSON)
    p: Mapped[list] = mapped_column(JSON)
    q: Mapped[list] = mapped_column(JSON)
    calls: Mapped[float] = mapped_column(Float)
    elapsed: Mapped[float] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text, default="")
    # ACCEPT / REJECT: the draft went through the speculative test (engine.trace.Step.tested)
    tested: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())


class RankStatRow(Base):
    """Accepted / rejected drafts of one run at one rank within a round (derived from steps)."""

    __tablename__ = "rank_stats"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    accepted: Mapped[int] = mapped_column(Integer, default=0)
    rejected: Mapped[int] = mapped_column(Integer, default=0)


class RoundStatRow(Base):
    """Tokens decided and calls spent in one round of one run (derived from steps)."""

    __tablename__ = "round_stats"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    round: Mapped[int] = mapped_column(Integer, primary_key=True)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    calls: Mapped[float] = mapped_column(Float, default=0.0)
