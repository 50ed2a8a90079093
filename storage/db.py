"""Engine, connections and migrations.

SQLite (default) is tuned for many short concurrent transactions: WAL (readers never block the
writer), a 30 s busy timeout, and ``BEGIN IMMEDIATE`` for write transactions so that a writer takes
the write lock up front and *waits* for it, instead of starting deferred, reading, and then failing
with "database is locked" when it tries to upgrade (SQLite cannot wait in that case). Read
transactions stay deferred so they never queue behind writers. The same code runs on PostgreSQL
(``postgresql+psycopg://``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

#: execution option that marks a connection's next transaction as a write transaction
WRITE_OPTION = "storage_write"

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
    "PRAGMA synchronous=NORMAL",
)


def data_dir() -> Path:
    """Where the default SQLite file lives: $INFILL_DATA_DIR or ./data."""
    return Path(os.environ.get("INFILL_DATA_DIR") or "data")


def database_url() -> str:
    """$DATABASE_URL, or a SQLite file in the data directory."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{(data_dir() / 'studio.db').resolve()}"


def _install_sqlite_listeners(engine: Engine) -> None:
    """The documented pysqlite recipe: take BEGIN away from the driver and emit it ourselves."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # the driver no longer emits BEGIN on its own
        cur = dbapi_conn.cursor()
        try:
            for pragma in SQLITE_PRAGMAS:
                cur.execute(pragma)
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_engine(url: str | None = None, *, echo: bool = False) -> Engine:
    """An Engine for url (default: database_url()), with the SQLite tuning applied."""
    url = url or database_url()
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        db = u.database
        if not db or db == ":memory:" or db.startswith("file:"):
            raise ValueError(
                "storage needs a SQLite *file* (WAL and concurrency); got " + url
            )
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            u,
            echo=echo,
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=8,
            max_overflow=24,
            pool_timeout=60,
        )
        _install_sqlite_listeners(engine)
        # SQLite has one writer at a time anyway; threads of this process queue on a lock
        # instead of sleep-polling SQLite's busy handler (other processes still use the latter)
        engine.info_write_lock = threading.Lock()  # type: ignore[attr-defined]
    else:
        engine = create_engine(
            u, echo=echo, pool_pre_ping=True, pool_size=8, max_overflow=24
        )
    return engine


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One short write transaction (BEGIN IMMEDIATE on SQLite); commits, or rolls back on error."""
    lock = getattr(engine, "info_write_lock", None)
    with lock if lock is not None else nullcontext(), engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with Session(bind=conn, expire_on_commit=False) as s, s.begin():
            yield s


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """One short read transaction; nothing is written and it never waits for the write lock."""
    with Session(engine, expire_on_commit=False) as s, s.begin():
        yield s


def alembic_config(connection: Connection | None = None):
    """Alembic configured in code (no alembic.ini): script location inside storage/."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest migration the code knows (what open_store upgrades to)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The migration a database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@contextmanager
def _migration_connection(engine: Engine) -> Iterator[Connection]:
    """A write connection for Alembic. On SQLite, foreign keys are off while it migrates: a batch
    ALTER recreates a table (copy, DROP, rename), and with foreign keys on, the DROP would cascade
    into every child row (a run's steps and statistics). The pragma only works outside a
    transaction, so it is set on the driver connection before BEGIN and restored after."""
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        raw = conn.connection.driver_connection if sqlite else None
        if raw is not None:
            raw.execute("PRAGMA foreign_keys=OFF")
        try:
            conn.execution_options(**{WRITE_OPTION: True})
            yield conn
        finally:
            if raw is not None:
                raw.execute("PRAGMA foreign_keys=ON")


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to revision (creates a new one) in one write transaction.

    Serialised against other processes starting at the same time: BEGIN IMMEDIATE on SQLite, a
    transaction-scoped advisory lock on PostgreSQL.
    """
    from alembic import command

    if current_revision(engine) == head_revision() and revision == "head":
        return
    with _migration_connection(engine) as conn, conn.begin():
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(74131)"))
        command.upgrade(alembic_config(conn), revision)
        _check_foreign_keys(conn)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the database back to an older revision (tests of migrations; operators via Alembic)."""
    from alembic import command

    with _migration_connection(engine) as conn, conn.begin():
        command.downgrade(alembic_config(conn), revision)
        _check_foreign_keys(conn)


def _check_foreign_keys(conn: Connection) -> None:
    """With the checks off during a SQLite migration, verify them before committing."""
    if conn.dialect.name == "sqlite":
        bad = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if bad:
            raise RuntimeError(f"migration left {len(bad)} rows whose parent is missing: {bad[:3]}")
