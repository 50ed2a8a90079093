"""Scale-out: two app processes on different ports against one PostgreSQL database. Visitors are
spread across both, a share link made on one opens on the other, nothing is lost.

Runs when TEST_DATABASE_URL points at a PostgreSQL server (`bash tools/ci_postgres.sh` starts one;
.ci/run sets it); the test creates its own database there (the storage tests drop and recreate
the tables of TEST_DATABASE_URL's) and drops it at the end. Skipped with the reason otherwise."""

from __future__ import annotations

import os
import threading

import pytest

URL = os.environ.get("TEST_DATABASE_URL", "").strip()
if not URL.startswith("postgresql") and os.environ.get("INFILL_REQUIRE_SERVICES") == "1":  # CI: must not skip
    pytest.fail("TEST_DATABASE_URL does not name a PostgreSQL server but INFILL_REQUIRE_SERVICES=1 (.ci/run)",
                pytrace=False)
if not URL.startswith("postgresql"):
    pytest.skip(reason="TEST_DATABASE_URL does not name a PostgreSQL server (start one with tools/ci_postgres.sh)",
                allow_module_level=True)

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

TEXT = "The old man walked to the [MASK:6] and looked at the sea."


@pytest.fixture(scope="module")
def replicas_db():
    name = f"infill_replicas_{os.getpid()}"
    admin = create_engine(URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(URL).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="module")
def two_replicas(replicas_db):
    from tools.loadtest import ONE_ADDRESS_MANY_VISITORS, start_server, stop_server

    # the six visitors all come from the loopback: lift the per-address limits, as the load test does
    env = {"DATABASE_URL": replicas_db, "INFILL_UI_MIN_INTERVAL": "0", **ONE_ADDRESS_MANY_VISITORS}
    procs = []
    try:
        for _ in range(2):  # started together: the schema migration is serialised by an advisory lock
            procs.append(start_server(env))
        yield [url for _, url in procs]
    finally:
        for proc, _ in procs:
            stop_server(proc)


def test_two_replicas_share_one_store(two_replicas, replicas_db):
    from gradio_client import Client

    from storage import open_store
    from tools.loadtest import classify, form

    a, b = two_replicas
    results: dict[int, tuple] = {}

    def visit(i: int) -> None:
        c = Client((a, b)[i % 2], verbose=False, httpx_kwargs={"timeout": 120})
        results[i] = c.submit(*form(TEXT, "assd", i), api_name="/infill").result(timeout=240)

    threads = [threading.Thread(target=visit, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert sorted(results) == list(range(6))
    assert all(classify(r)[0] == "ok" for r in results.values()), [r[0] for r in results.values()]
    links = [r[5] for r in results.values()]
    assert all("?s=" in link for link in links)

    # a share link made on replica A opens on replica B (and the other way round)
    made_on_a, made_on_b = results[0][5].split("?s=")[1], results[1][5].split("?s=")[1]
    for share_id, other in ((made_on_a, b), (made_on_b, a)):
        restored = Client(other, verbose=False).predict(share_id, api_name="/load_share")
        assert restored[2] == TEXT, str(restored)[:300]  # the input box, restored from the shared store

    # nothing lost: six sessions, one stored run each, all ok
    store = open_store(replicas_db)
    try:
        sessions = store.list_sessions(100)
        assert len(sessions) == 6 and all(s.run_count == 1 for s in sessions)
        assert {r.status for s in sessions for r in store.get_session(s.share_id).runs} == {"ok"}
    finally:
        store.close()
