"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Sessions, runs, steps (the trace) and the per-run aggregates rank_stats and round_stats.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _create_sessions() -> None:
    """The `sessions` table and its indexes."""
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("share_id", sa.String(length=64), nullable=False),
        sa.Column("domain", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("spans", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
        sa.UniqueConstraint("share_id", name=op.f("uq_sessions_share_id")),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_created", ["created_at"], unique=False)
        batch_op.create_index(
            "ix_sessions_domain_created", ["domain", "created_at"], unique=False
        )
        batch_op.create_index("ix_sessions_model", ["model"], unique=False)


def _create_runs() -> None:
    """The `runs` table and its indexes."""
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("sampler", sa.String(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("params_key", sa.String(length=2000), nullable=False),
        sa.Column("seed", sa.String(length=32), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("completed_text", sa.Text(), nullable=False),
        sa.Column("calls", sa.Float(), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("masked_tokens", sa.Integer(), nullable=False),
        sa.Column("wall_seconds", sa.Float(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.Column("resampled", sa.Integer(), nullable=False),
        sa.Column("logprob", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'failed', 'cancelled')", name=op.f("ck_runs_status")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_runs_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_created", ["created_at"], unique=False)
        batch_op.create_index(
            "ix_runs_sampler_params", ["sampler", "params_key"], unique=False
        )
        batch_op.create_index("ix_runs_session", ["session_id"], unique=False)


def _create_rank_stats() -> None:
    """The `rank_stats` table."""
    op.create_table(
        "rank_stats",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_rank_stats_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "rank", name=op.f("pk_rank_stats")),
    )


def _create_round_stats() -> None:
    """The `round_stats` table."""
    op.create_table(
        "round_stats",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("calls", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_round_stats_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "round", name=op.f("pk_round_stats")),
    )


def _create_steps() -> None:
    """The `steps` table."""
    op.create_table(
        "steps",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("positions", sa.JSON(), nullable=False),
        sa.Column("tokens", sa.JSON(), nullable=False),
        sa.Column("texts", sa.JSON(), nullable=False),
        sa.Column("p", sa.JSON(), nullable=False),
        sa.Column("q", sa.JSON(), nullable=False),
        sa.Column("calls", sa.Float(), nullable=False),
        sa.Column("elapsed", sa.Float(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_steps_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_steps")),
    )


def upgrade() -> None:
    """Move the schema to this revision (Alembic calls it when a Store starts on an older database)."""
    _create_sessions()
    _create_runs()
    _create_rank_stats()
    _create_round_stats()
    _create_steps()


def downgrade() -> None:
    """Drop every table: the database is empty again (and every stored run gone)."""
    op.drop_table("steps")
    op.drop_table("round_stats")
    op.drop_table("rank_stats")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_session")
        batch_op.drop_index("ix_runs_sampler_params")
        batch_op.drop_index("ix_runs_created")

    op.drop_table("runs")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_model")
        batch_op.drop_index("ix_sessions_domain_created")
        batch_op.drop_index("ix_sessions_created")

    op.drop_table("sessions")
