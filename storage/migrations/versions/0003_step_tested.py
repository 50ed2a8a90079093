"""steps.tested: whether an accept/reject went through the speculative test

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Before this flag the statistics counted a draft kept without a test (ASSD's first draft of a
round, the pipelined exact row, self-spec's first window slot) as accepted at rank 0. The flag is
backfilled from the notes those samplers wrote, and rank_stats is recomputed from the steps with
the same rule as engine.trace.acceptance_by_position (copied here: a migration is a snapshot).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNTESTED_NOTES = ("first draft", "exact row", "first draft: causal = non-causal")


def _list(v):
    return json.loads(v) if isinstance(v, str) else list(v or [])


def upgrade() -> None:
    """Move the schema to this revision (Alembic calls it when a Store starts on an older database)."""
    with op.batch_alter_table("steps") as batch:
        batch.add_column(sa.Column("tested", sa.Boolean(), nullable=False, server_default=sa.true()))
    bind = op.get_bind()
    steps = sa.table("steps", sa.column("run_id", sa.Integer), sa.column("seq", sa.Integer),
                     sa.column("kind", sa.String), sa.column("round", sa.Integer),
                     sa.column("positions", sa.JSON), sa.column("note", sa.Text),
                     sa.column("tested", sa.Boolean))
    ranks = sa.table("rank_stats", sa.column("run_id", sa.Integer), sa.column("rank", sa.Integer),
                     sa.column("accepted", sa.Integer), sa.column("rejected", sa.Integer))
    bind.execute(sa.update(steps).where(steps.c.kind == "accept", steps.c.note.in_(UNTESTED_NOTES))
                 .values(tested=False))
    affected = [r for (r,) in bind.execute(
        sa.select(steps.c.run_id).where(steps.c.tested.is_(False)).distinct())]
    for run_id in affected:
        counts: dict[int, list[int]] = {}
        where: dict[int, int] = {}
        rows = bind.execute(sa.select(steps.c.kind, steps.c.positions, steps.c.tested)
                            .where(steps.c.run_id == run_id).order_by(steps.c.seq))
        for kind, positions, tested in rows:
            positions = _list(positions)
            if kind == "draft":
                where = {p: i for i, p in enumerate(positions)}
            elif kind in ("accept", "reject") and tested:
                for p in positions:
                    if p in where:
                        counts.setdefault(where[p], [0, 0])[0 if kind == "accept" else 1] += 1
        bind.execute(sa.delete(ranks).where(ranks.c.run_id == run_id))
        if counts:
            bind.execute(sa.insert(ranks), [{"run_id": run_id, "rank": k, "accepted": a, "rejected": r}
                                            for k, (a, r) in sorted(counts.items())])


def downgrade() -> None:
    """Return the schema to the previous revision, keeping every stored run readable."""
    with op.batch_alter_table("steps") as batch:
        batch.drop_column("tested")
