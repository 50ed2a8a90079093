"""The core storage tests against a real PostgreSQL server.

Runs when TEST_DATABASE_URL is set (a *disposable* database: every test drops and recreates the
storage tables), e.g. ``export TEST_DATABASE_URL="$(bash tools/ci_postgres.sh)"``; skipped with
its reason otherwise.
"""

from __future__ import annotations

import os

import pytest

URL = os.environ.get("TEST_DATABASE_URL", "").strip()
if not URL and os.environ.get("INFILL_REQUIRE_SERVICES") == "1":  # CI: a missing server is a failure
    pytest.fail("TEST_DATABASE_URL is not set but INFILL_REQUIRE_SERVICES=1 (.ci/run): PostgreSQL was not set up",
                pytrace=False)
if not URL:
    pytest.skip(
        reason="TEST_DATABASE_URL is not set (start a server with tools/ci_postgres.sh)",
        allow_module_level=True,
    )

from sqlalchemy import text

from storage import Store, open_store
from storage import db as sdb
from storage.models import Base
from tests.storage.test_storage import (  # noqa: F401 - collected here with the fixture below
    test_database_error_midway_leaves_no_partial_run,
    test_exception_midway_stores_failed_run_with_its_steps,
    test_exports_parse_back,
    test_list_and_delete,
    test_malformed_share_ids_are_harmless,
    test_metacharacters_are_stored_verbatim,
    test_oversized_and_malformed_input_refused,
    test_recorder_ok_and_cancelled,
    test_round_trip,
    test_sixteen_concurrent_writers,
    test_statistics_by_hand,
    test_statistics_export,
    test_unknown_well_formed_share_id,
)


def _reset() -> None:
    """Drop the storage tables (only ours) so each test starts from an empty database."""
    engine = sdb.make_engine(URL)
    try:
        with engine.begin() as conn:
            Base.metadata.drop_all(conn)
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    finally:
        engine.dispose()


@pytest.fixture
def store():
    _reset()
    st = open_store(URL)
    yield st
    st.close()


def test_postgres_fresh_database_is_at_head() -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    _reset()
    for _ in range(2):
        st: Store = open_store(URL)
        try:
            assert st.engine.dialect.name == "postgresql"
            assert sdb.current_revision(st.engine) == sdb.head_revision()
            with st.engine.connect() as conn:
                assert (
                    compare_metadata(MigrationContext.configure(conn), Base.metadata)
                    == []
                )
        finally:
            st.close()


def test_retention_on_postgres(store: Store) -> None:
    """The retention policy (storage.retention) on PostgreSQL: size by pg_total_relation_size,
    deletes cascading (the same checks as on SQLite)."""
    from tests.app.serving.test_serving import check_retention

    check_retention(store)
