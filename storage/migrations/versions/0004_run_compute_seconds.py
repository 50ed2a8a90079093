"""runs.compute_seconds: the seconds a run spent inside its sampler

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

A comparison's two sides alternate round by round, so each side's wall time counts the other's
rounds too; the live Compare table shows each side's compute seconds, and a share link showed the
stored wall seconds instead (about 4x worse for the same runs). Runs stored before this revision
keep NULL: their compute seconds were never measured, and the page says it shows wall time then.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Move the schema to this revision (Alembic calls it when a Store starts on an older database)."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("compute_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    """Return the schema to the previous revision, keeping every stored run readable."""
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("compute_seconds")
