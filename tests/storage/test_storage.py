"""Storage layer: round trip, concurrency, faults, bad input, statistics, migrations.

Fast: temporary SQLite files only. tests/storage/test_storage_postgres.py reruns the core tests here
against PostgreSQL (they take the `store` fixture, which that module overrides).
"""

from __future__ import annotations

import csv
import io
import json
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

import storage
from engine.trace import Step, StepKind, trace_counts
from storage import StorageInputError, Store, open_store
from storage import db as sdb

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studio.db'}"


@pytest.fixture
def store(db_url: str):
    st = open_store(db_url)
    yield st
    st.close()


def assd_trace(
    seed: int, n_masked: int = 12, k: int = 3, first_pos: int = 4, tag: str = ""
) -> list[Step]:
    """A realistic ASSD-shaped trace: per round draft pass, draft, density pass, decisions.

    The first draft of a round is always accepted; a rejection ends the round with a resample;
    a fully accepted round earns a bonus token. calls is the running total, like the samplers.
    """
    rng = random.Random(seed)
    todo = list(range(first_pos, first_pos + n_masked))
    steps: list[Step] = []
    calls, t, rnd = 0.0, 0.0, 0

    def tick() -> float:
        nonlocal t
        t += rng.uniform(0.001, 0.01)
        return round(t, 6)

    while todo:
        drafted = todo[:k]
        toks = [rng.randrange(50_000) for _ in drafted]
        ps = [rng.random() for _ in drafted]
        calls += 1
        steps.append(Step(kind=StepKind.DRAFT_PASS, round=rnd, calls=calls, elapsed=tick()))
        steps.append(
            Step(
                kind=StepKind.DRAFT,
                round=rnd,
                positions=list(drafted),
                tokens=toks,
                texts=[f"t{x}{tag}" for x in toks],
                p=ps,
                q=[None] * len(drafted),
                calls=calls,
                elapsed=tick(),
                note=tag,
            )
        )
        if len(todo) == 1:
            steps.append(
                Step(
                    kind=StepKind.ACCEPT,
                    round=rnd,
                    positions=[drafted[0]],
                    tokens=[toks[0]],
                    texts=[f"t{toks[0]}{tag}"],
                    p=[ps[0]],
                    q=[None],
                    calls=calls,
                    elapsed=tick(),
                    note="last token",
                )
            )
            todo.pop(0)
            break
        calls += 1
        steps.append(Step(kind=StepKind.DENSITY_PASS, round=rnd, calls=calls, elapsed=tick()))
        done = 0
        for i, (pos, tok, p) in enumerate(zip(drafted, toks, ps, strict=True)):
            q = rng.random()
            accepted = i == 0 or rng.random() < 0.6
            steps.append(Step(kind=StepKind.ACCEPT if accepted else StepKind.REJECT, round=rnd, positions=[pos],
                              tokens=[tok], texts=[f"t{tok}{tag}"], p=[p], q=[q], calls=calls, elapsed=tick()))
            if accepted:
                done += 1
            else:
                new = rng.randrange(50_000)
                steps.append(
                    Step(
                        kind=StepKind.RESAMPLE,
                        round=rnd,
                        positions=[pos],
                        tokens=[new],
                        texts=[f"t{new}{tag}"],
                        p=[None],
                        q=[q / 2],
                        calls=calls,
                        elapsed=tick(),
                        note="residual",
                    )
                )
                done += 1
                break
        else:
            if len(todo) > done:
                pos = todo[done]
                tok = rng.randrange(50_000)
                steps.append(
                    Step(
                        kind=StepKind.BONUS,
                        round=rnd,
                        positions=[pos],
                        tokens=[tok],
                        texts=[f"t{tok}{tag}"],
                        p=[None],
                        q=[rng.random()],
                        calls=calls,
                        elapsed=tick(),
                        note="bonus",
                    )
                )
                done += 1
        del todo[:done]
        rnd += 1
    return steps


def new_session(st: Store, domain: str = "text", model: str = "tiny-asarm") -> str:
    return st.create_session(
        domain, model, "The quick [MASK:3] fox.", [{"start": 10, "end": 17}]
    )


# ----------------------------------------------------------------------------- round trip


def test_round_trip(store: Store) -> None:
    sid = new_session(store)
    trace = assd_trace(1, n_masked=30, k=4)
    trace.append(
        Step(
            kind=StepKind.SAMPLE,
            round=99,
            positions=[1],
            tokens=[2],
            texts=['ünïcødé "q" \n<b>\''],
            p=[None],
            q=[1e-300],
            calls=1e9,
            elapsed=0.5,
            note="x",
        )
    )
    rid = store.record_run(
        sid,
        "assd",
        {"k": 4, "temperature": 0.7},
        2**64 - 1,
        trace,
        completed_text="The quick brown fox.",
        wall_seconds=1.25,
        logprob=-12.5,
    )
    got = store.get_session(sid)
    assert got is not None and got.share_id == sid
    assert (
        got.spans == [{"start": 10, "end": 17}]
        and got.text == "The quick [MASK:3] fox."
    )
    assert got.created_at.tzinfo is not None
    (run,) = got.runs
    assert run.id == rid and run.status == "ok" and run.error is None
    assert run.steps == trace
    assert all(isinstance(s.kind, StepKind) for s in run.steps)
    assert run.seed == 2**64 - 1 and run.params == {"k": 4, "temperature": 0.7}
    counts = trace_counts(trace)
    assert (run.calls, run.rounds, run.accepted, run.rejected, run.resampled) == (
        counts["calls"],
        counts["rounds"],
        counts["accepted"],
        counts["rejected"],
        counts["resampled"],
    )
    assert run.masked_tokens == 31  # 30 masked + the extra SAMPLE position
    assert (run.completed_text, run.wall_seconds, run.logprob) == (
        "The quick brown fox.",
        1.25,
        -12.5,
    )
    assert store.get_run(rid) == run


def test_exports_parse_back(store: Store) -> None:
    sid = new_session(store)
    trace = assd_trace(2)
    rid = store.record_run(sid, "assd", {"k": 3}, 7, trace)
    as_json = json.loads(store.export_run(rid, "json"))
    assert [Step.from_dict(d) for d in as_json["steps"]] == trace
    assert as_json["seed"] == 7
    rows = list(csv.DictReader(io.StringIO(store.export_run(rid, "csv"))))
    back = [
        Step(
            kind=StepKind(r["kind"]),
            round=int(r["round"]),
            **{c: json.loads(r[c]) for c in ("positions", "tokens", "texts", "p", "q")},
            calls=float(r["calls"]),
            elapsed=float(r["elapsed"]),
            note=r["note"],
        )
        for r in rows
    ]
    assert back == trace
    assert store.export_run(10**9, "csv") is None
    assert json.loads(storage.stats_to_json(store.stats()))[0]["runs"] == 1
    assert storage.stats_to_csv(store.stats()).startswith(
        "model,sampler,params,metric,key,value,count\n"
    )


def test_infinite_numbers_keep_exports_valid_json(store: Store) -> None:
    sid = new_session(store)
    run_id = store.record_run(sid, "assd", {}, 1, assd_trace(3), logprob=float("-inf"), wall_seconds=float("inf"))
    run = store.get_run(run_id)
    assert run.logprob is None and run.wall_seconds == 0.0
    json.loads(storage.run_to_json(run), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_list_and_delete(store: Store) -> None:
    a = new_session(store, domain="text")
    b = new_session(store, domain="code")
    store.record_run(b, "sequential", {}, 1, assd_trace(3))
    listed = store.list_sessions(10)
    assert [s.share_id for s in listed] == [b, a]
    assert [s.run_count for s in listed] == [1, 0]
    assert [s.samplers for s in listed] == [["sequential"], []]
    store.record_run(b, "assd", {}, 2, assd_trace(4))  # a compare session: both samplers, oldest first
    assert store.list_sessions(1)[0].samplers == ["sequential", "assd"]
    assert [s.share_id for s in store.list_sessions(10, domain="code")] == [b]
    # a visitor's own history: only the ids asked for; malformed ones are ignored, not queried
    assert [s.share_id for s in store.list_sessions(10, share_ids=[a, "'; DROP TABLE sessions; --"])] == [a]
    assert store.list_sessions(10, share_ids=[]) == []
    assert store.delete_session(b) is True
    assert store.delete_session(b) is False
    assert store.get_session(b) is None
    with sdb.read_session(
        store.engine
    ) as s:  # the cascade reached runs, steps and aggregates
        for table in ("runs", "steps", "rank_stats", "round_stats"):
            assert s.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar() == 0


# ----------------------------------------------------------------------------- concurrency


def test_sixteen_concurrent_writers(store: Store) -> None:
    """16 threads record at once: no 'database is locked', nothing lost or interleaved."""
    n_threads, n_runs = 16, 4
    sids = [new_session(store) for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []
    written: dict[int, list[Step]] = {}
    lock = threading.Lock()

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for r in range(n_runs):
                trace = assd_trace(1000 * t + r, n_masked=20, k=3, tag=f"@{t}.{r}")
                rid = store.record_run(sids[t], "assd", {"k": 3, "thread": t}, r, trace)
                store.get_session(sids[t])  # readers interleaved with writers
                with lock:
                    written[rid] = trace
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]
    assert len(written) == n_threads * n_runs
    for t, sid in enumerate(sids):
        runs = store.get_session(sid).runs
        assert len(runs) == n_runs
        for run in runs:
            assert run.steps == written[run.id]  # exactly its own steps, in order
            assert {s.note for s in run.steps if s.kind == StepKind.DRAFT} == {
                f"@{t}.{run.seed}"
            }


# ----------------------------------------------------------------------------- faults


def test_exception_midway_stores_failed_run_with_its_steps(store: Store) -> None:
    """Design: a sampler that raises is stored as 'failed' with the steps it produced, and the
    exception still reaches the caller."""
    sid = new_session(store)
    full = assd_trace(4)

    def sampler():
        for i, st in enumerate(full):
            if i == 7:
                raise RuntimeError("model blew up")
            yield st

    with (
        pytest.raises(RuntimeError, match="blew up"),
        store.recorder(sid, "assd", {"k": 3}, 4) as rec,
    ):
        for _ in rec.wrap(sampler()):
            pass
        rec.finish(completed_text="never")
    (run,) = store.get_session(sid).runs
    assert run.id == rec.run_id
    assert run.status == "failed" and run.error == "RuntimeError: model blew up"
    assert run.steps == full[:7] and run.completed_text == ""


def test_recorder_ok_and_cancelled(store: Store) -> None:
    sid = new_session(store)
    trace = assd_trace(5)
    with store.recorder(sid, "assd", {"k": 3}, 5) as rec:
        for _ in rec.wrap(iter(trace)):
            pass
        rec.finish(completed_text="done", masked_tokens=12, logprob=-3.0)
    with store.recorder(sid, "assd", {"k": 3}, 6) as rec2:
        for i, _ in enumerate(rec2.wrap(iter(trace))):
            if i == 3:
                break  # the user pressed stop
    ok, cancelled = store.get_session(sid).runs
    assert (ok.status, ok.completed_text, ok.masked_tokens, ok.logprob) == (
        "ok",
        "done",
        12,
        -3.0,
    )
    assert ok.steps == trace and ok.wall_seconds >= 0
    assert cancelled.status == "cancelled" and cancelled.steps == trace[:4]


def test_database_error_midway_leaves_no_partial_run(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the steps were inserted rolls the whole run back: never half-written."""
    sid = new_session(store)
    # a NULL in a NOT NULL column of the last table written makes the database raise
    monkeypatch.setattr(
        "storage.repository.rank_counts", lambda trace: {0: [None, None]}
    )
    with pytest.raises(Exception, match="(?i)null"):
        store.record_run(sid, "assd", {}, 1, assd_trace(6))
    with sdb.read_session(store.engine) as s:
        assert s.execute(text("SELECT COUNT(*) FROM runs")).scalar() == 0
        assert s.execute(text("SELECT COUNT(*) FROM steps")).scalar() == 0
    assert store.get_session(sid).runs == []


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from sqlalchemy import event
    from storage import open_store
    from tests.storage.test_storage import assd_trace
    st = open_store({url!r})
    sid = st.create_session("text", "m", "x", [])
    for i in range(2):
        st.record_run(sid, "assd", {{"k": 3}}, i, assd_trace(i, n_masked=200, k=3))
    print("ready", flush=True)

    @event.listens_for(st.engine, "after_cursor_execute")
    def hold(conn, cursor, statement, *args):  # steps inserted, transaction still open: get killed here
        if statement.lstrip().upper().startswith("INSERT INTO STEPS"):
            print("writing", flush=True)
            time.sleep(30)

    st.record_run(sid, "assd", {{"k": 3}}, 2, assd_trace(2, n_masked=200, k=3))
    """
)


def test_sigkill_during_writes_leaves_a_sound_database(
    db_url: str, tmp_path: Path
) -> None:
    script = KILL_SCRIPT.format(repo=str(REPO), url=db_url)
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=REPO
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        assert proc.stdout.readline().strip() == b"writing"  # killed in the middle of a run's write
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    path = tmp_path / "studio.db"
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    st = open_store(db_url)
    try:
        (sess,) = st.list_sessions()
        runs = st.get_session(sess.share_id).runs
        assert sorted(int(r.seed) for r in runs) == [0, 1]  # the run being written is not there at all
        for run in runs:  # every run that is there is whole
            assert run.steps == assd_trace(run.seed, n_masked=200, k=3)
    finally:
        st.close()


# ----------------------------------------------------------------------------- bad input

NASTY = "'; DROP TABLE sessions; --<script>alert(1)</script>"


@pytest.mark.parametrize(
    "share_id",
    [
        "",
        "nope",
        "A" * 22 + "!",
        "A" * 65,
        NASTY,
        "x" * 22 + "' OR '1'='1",
        None,
        42,
        b"A" * 22,
        ["A" * 22],
        "AAAAAAAAAAAAAAAAAAAAAA\n",
        "ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ",
    ],
)
def test_malformed_share_ids_are_harmless(store: Store, share_id: object) -> None:
    sid = new_session(store)
    assert store.get_session(share_id) is None
    assert store.delete_session(share_id) is False
    with pytest.raises(LookupError):
        store.record_run(share_id, "assd", {}, 1, [])  # type: ignore[arg-type]
    assert store.get_session(sid) is not None  # the table is still there, with its row
    assert "sessions" in inspect(store.engine).get_table_names()


def test_unknown_well_formed_share_id(store: Store) -> None:
    assert store.get_session("A" * 22) is None
    assert store.delete_session("A" * 22) is False
    with pytest.raises(LookupError):
        store.record_run("A" * 22, "assd", {}, 1, [])


def test_metacharacters_are_stored_verbatim(store: Store) -> None:
    sid = store.create_session("text", NASTY, NASTY, [NASTY])
    got = store.get_session(sid)
    assert (got.model, got.text, got.spans) == (NASTY, NASTY, [NASTY])
    assert len(store.list_sessions()) == 1


def test_oversized_and_malformed_input_refused(store: Store) -> None:
    with pytest.raises(
        StorageInputError,
        match="text is too long: 100,001 characters; the limit is 100,000",
    ):
        store.create_session("text", "m", "x" * 100_001, [])
    assert isinstance(StorageInputError("x"), ValueError)
    store.create_session("text", "m", "x" * 100_000, [])  # the limit itself is fine
    with pytest.raises(StorageInputError, match="JSON"):
        store.create_session("text", "m", "x", [object()])
    with pytest.raises(StorageInputError, match="NUL"):
        store.create_session("text", "m", "a\x00b", [])
    with pytest.raises(StorageInputError, match="domain"):
        store.create_session("", "m", "x", [])
    sid = new_session(store)
    with pytest.raises(StorageInputError, match="non-finite"):
        store.record_run(
            sid,
            "assd",
            {},
            1,
            [Step(kind=StepKind.ACCEPT, round=0, positions=[1], tokens=[1], texts=["a"], p=[float("nan")], q=[0.5])],
        )
    with pytest.raises(StorageInputError, match="status"):
        store.record_run(sid, "assd", {}, 1, [], status="weird")
    with pytest.raises(StorageInputError, match="completed_text"):
        store.record_run(sid, "assd", {}, 1, [], completed_text="x" * 200_001)
    with pytest.raises(StorageInputError, match="params"):
        store.record_run(sid, "assd", {"big": "x" * 5000}, 1, [])
    assert store.get_session(sid).runs == []


# ----------------------------------------------------------------------------- statistics


def S(kind: str, rnd: int, pos: list[int], calls: float) -> Step:
    return Step(
        kind=StepKind(kind),
        round=rnd,
        positions=pos,
        tokens=[7] * len(pos),
        texts=["w"] * len(pos),
        p=[0.5] * len(pos),
        q=[0.5] * len(pos),
        calls=calls,
    )


# Run A: round 0 accepts both drafts; round 1 accepts rank 0, rejects rank 1 and resamples.
RUN_A = [
    S("draft_pass", 0, [], 1),
    S("draft", 0, [10, 11], 1),
    S("density_pass", 0, [], 2),
    S("accept", 0, [10], 2),
    S("accept", 0, [11], 2),
    S("draft_pass", 1, [], 3),
    S("draft", 1, [12, 13], 3),
    S("density_pass", 1, [], 4),
    S("accept", 1, [12], 4),
    S("reject", 1, [13], 4),
    S("resample", 1, [13], 4),
]
# Run B: round 0 rejects rank 0 (possible for non-ASSD drafters) and resamples; round 1 accepts.
RUN_B = [
    S("draft_pass", 0, [], 1),
    S("draft", 0, [20, 21], 1),
    S("density_pass", 0, [], 2),
    S("reject", 0, [20], 2),
    S("resample", 0, [20], 2),
    S("draft", 1, [21], 2),
    S("density_pass", 1, [], 3),
    S("accept", 1, [21], 3),
]
RUN_SEQ = [S("sample", 0, [5], 1), S("sample", 1, [6], 2), S("sample", 2, [7], 3)]


def stats_dataset(store: Store) -> dict[str, object]:
    s1 = store.create_session("text", "m1", "a", [])
    s2 = store.create_session("code", "m2", "b", [])
    store.record_run(s1, "assd", {"k": 2}, 1, RUN_A)
    store.record_run(s1, "assd", {"k": 2}, 2, RUN_B)
    store.record_run(
        s1, "assd", {"k": 2}, 3, RUN_A[:5], status="failed", error="boom"
    )  # excluded
    store.record_run(s1, "sequential", {}, 4, RUN_SEQ)
    store.record_run(s2, "assd", {"k": 2}, 5, RUN_A)
    time.sleep(0.01)
    cut = datetime.now(UTC)
    time.sleep(0.01)
    store.record_run(s1, "assd", {"k": 3}, 6, RUN_B)
    return {"cut": cut}


def test_statistics_by_hand(store: Store) -> None:
    cut = stats_dataset(store)["cut"]
    groups = {(g.model, g.sampler, json.dumps(g.params)): g for g in store.stats()}
    assert set(groups) == {
        ("m1", "assd", '{"k": 2}'),
        ("m1", "sequential", "{}"),
        ("m2", "assd", '{"k": 2}'),
        ("m1", "assd", '{"k": 3}'),
    }
    g = groups[("m1", "assd", '{"k": 2}')]
    assert g.runs == 2  # the failed run is not counted
    # rank 0: A accepts 10 and 12, B accepts 21, B rejects 20 -> 3/4; rank 1: A 11 ok, 13 rejected
    assert [(r.rank, r.accepted, r.rejected, r.rate) for r in g.acceptance_by_rank] == [
        (0, 3, 1, 0.75),
        (1, 1, 1, 0.5),
    ]
    # tokens per round: A 2, 2; B 1, 1
    assert g.tokens_per_round == {1: 2, 2: 2} and g.mean_tokens_per_round == 1.5
    # A: 4 tokens / 4 calls, B: 2 tokens / 3 calls; pooled 6 / 7
    assert sorted(g.tokens_per_call) == pytest.approx([2 / 3, 1.0])
    assert g.mean_tokens_per_call == pytest.approx(6 / 7)
    assert sorted(g.calls_vs_masked) == [(2, 3.0), (4, 4.0)]
    assert (g.masked_tokens, g.calls, g.rounds) == (6, 7.0, 4)
    seq = groups[("m1", "sequential", "{}")]
    assert seq.acceptance_by_rank == [] and seq.tokens_per_round == {1: 3}
    assert seq.tokens_per_call == [1.0] and seq.calls_vs_masked == [(3, 3.0)]

    # filters
    assert [g.model for g in store.stats(domain="code")] == ["m2"]
    assert {g.sampler for g in store.stats(model="m1")} == {"assd", "sequential"}
    assert {g.model for g in store.stats(sampler="sequential")} == {"m1"}
    late = store.stats(since=cut)
    assert [(g.params, g.runs) for g in late] == [({"k": 3}, 1)]
    assert late[0].acceptance_by_rank[0].rejected == 1
    early = store.stats(until=cut)
    assert sum(g.runs for g in early) == 4
    naive = cut.replace(tzinfo=None)  # naive datetimes mean UTC
    assert sum(g.runs for g in store.stats(since=naive)) == 1
    assert store.stats(since=cut + timedelta(days=1)) == []
    assert store.stats(domain="'; DROP TABLE runs; --") == []


def test_statistics_export(store: Store) -> None:
    stats_dataset(store)
    groups = store.stats(model="m1", sampler="assd")
    rows = list(csv.DictReader(io.StringIO(storage.stats_to_csv(groups))))
    k2 = [r for r in rows if r["params"] == '{"k": 2}']
    acc = {
        r["key"]: (float(r["value"]), int(r["count"]))
        for r in k2
        if r["metric"] == "acceptance_rate"
    }
    assert acc == {"0": (0.75, 4), "1": (0.5, 2)}
    tpr = {r["key"]: int(r["count"]) for r in k2 if r["metric"] == "tokens_per_round"}
    assert tpr == {"1": 2, "2": 2}
    data = {
        json.dumps(d["params"]): d for d in json.loads(storage.stats_to_json(groups))
    }
    assert data['{"k": 2}']["acceptance_by_rank"][0] == {
        "rank": 0,
        "accepted": 3,
        "rejected": 1,
        "rate": 0.75,
    }
    assert data['{"k": 2}']["mean_tokens_per_call"] == pytest.approx(6 / 7)


# ----------------------------------------------------------------------------- migrations


def test_fresh_database_is_at_head_and_reopens(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from storage.models import Base

    for _ in range(2):
        st = open_store(db_url)
        try:
            assert sdb.current_revision(st.engine) == sdb.head_revision()
            with st.engine.connect() as conn:  # the migration and the models agree
                assert (
                    compare_metadata(MigrationContext.configure(conn), Base.metadata)
                    == []
                )
        finally:
            st.close()


def test_older_database_is_upgraded_on_open(db_url: str) -> None:
    from alembic import command

    st = open_store(db_url)
    with (
        st.engine.begin() as conn
    ):  # simulate a database from before the schema existed
        command.downgrade(sdb.alembic_config(conn), "base")
    st.close()
    engine = sdb.make_engine(db_url)
    try:
        assert sdb.current_revision(engine) is None
        assert "sessions" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    st = open_store(db_url)
    try:
        assert sdb.current_revision(st.engine) == sdb.head_revision()
        new_session(st)
    finally:
        st.close()


def test_sqlite_pragmas_and_default_url(
    store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path / "d"))
    assert sdb.database_url() == f"sqlite:///{(tmp_path / 'd' / 'studio.db').resolve()}"
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert sdb.database_url() == "postgresql+psycopg://u@h/db"


def test_migrations_keep_every_step_of_existing_runs(tmp_path):
    """A SQLite batch migration recreates a table; with foreign keys on, dropping the old `runs`
    would cascade into steps and statistics. Down to the first revision and up again loses nothing."""
    import sqlalchemy as sa

    from engine.trace import Step, StepKind
    from storage import db as sdb

    url = f"sqlite:///{tmp_path / 'mig.db'}"
    st = open_store(url)
    sid = st.create_session("text", "m", "x [MASK:2]", [])
    trace = [Step(kind=StepKind.DRAFT, round=0, positions=[1, 2], tokens=[5, 6], texts=["a", "b"], p=[0.5, 0.5], q=[None, None]),
             Step(kind=StepKind.ACCEPT, round=0, positions=[1], tokens=[5], texts=["a"], p=[0.5], q=[0.5], tested=False),
             Step(kind=StepKind.REJECT, round=0, positions=[2], tokens=[6], texts=["b"], p=[0.5], q=[0.1])]
    st.record_run(sid, "assd", {"k": 2}, 0, trace)
    st.close()

    def count(engine, table):
        with engine.connect() as c:
            return c.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()

    engine = sdb.make_engine(url)
    before = count(engine, "steps"), count(engine, "rank_stats")
    assert before[0] == 3 and before[1] >= 1
    sdb.downgrade(engine, "0001")
    assert count(engine, "steps") == 3
    sdb.upgrade(engine)
    assert (count(engine, "steps"), count(engine, "rank_stats")) == before
    engine.dispose()
