"""Alembic environment: uses the connection handed over by storage.db.upgrade, or a URL.

Run from code (storage.db.upgrade / storage.open_store). For the CLI, use
``alembic -c storage/alembic.ini ...`` with DATABASE_URL set.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from storage.db import make_engine
from storage.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit the migration SQL without a connection (`alembic upgrade --sql`), for review by an operator."""
    from storage.db import database_url

    context.configure(
        url=config.get_main_option("sqlalchemy.url") or database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Apply migrations on the configured database (the path every Store takes at start-up)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or None)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
