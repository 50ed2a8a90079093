"""run status 'stopped' (a run that used up its budget)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Move the schema to this revision (Alembic calls it when a Store starts on an older database)."""
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_runs_status"), type_="check")
        batch_op.create_check_constraint(op.f("ck_runs_status"), "status IN ('ok', 'failed', 'cancelled', 'stopped')")


def downgrade() -> None:
    """Return the schema to the previous revision, keeping every stored run readable."""
    op.execute("UPDATE runs SET status = 'failed' WHERE status = 'stopped'")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint(op.f("ck_runs_status"), type_="check")
        batch_op.create_check_constraint(op.f("ck_runs_status"), "status IN ('ok', 'failed', 'cancelled')")
