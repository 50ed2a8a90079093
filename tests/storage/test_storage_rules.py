"""The store's write path checked row by row against hand-written references (issue 29).

What a run, its steps and its per-run aggregates hold after one write (literal rows read back with
plain SQL, not through the store), what the recorder hands its sink for every way a stream can end,
what is refused with which message and leaves nothing behind, and the read-back helpers the write
path relies on. Fast: one migrated SQLite template copied per test; the recorder's own rules run
against a sink that only records what it is given.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import event, text

import storage.recorder as recorder_mod
from engine.budget import BudgetExceededError
from engine.trace import Step, StepKind
from storage import NewSession, RunRecorder, StorageInputError, Store, new_share_id, open_store
from storage import db as sdb
from storage.recorder import RunGroup

K = StepKind
NASTY = "x'); DROP TABLE runs; --\"<b>"

# A hand-made two-round ASSD trace. Round 0: the first draft is kept untested (exact row), the
# second is rejected and resampled. Round 1: both drafts pass the test, then a bonus token.
TRACE = [
    Step(kind=K.DRAFT_PASS, round=0, calls=1.0, elapsed=0.125),
    Step(
        kind=K.DRAFT,
        round=0,
        positions=[4, 5],
        tokens=[11, 12],
        texts=["a", "b"],
        p=[0.5, 0.25],
        q=[None, None],
        calls=1.0,
        elapsed=0.25,
        note="n",
    ),
    Step(kind=K.DENSITY_PASS, round=0, calls=2.0, elapsed=0.375),
    Step(
        kind=K.ACCEPT,
        round=0,
        positions=[4],
        tokens=[11],
        texts=["a"],
        p=[0.5],
        q=[0.75],
        calls=2.0,
        elapsed=0.5,
        note="exact",
        tested=False,
    ),
    Step(kind=K.REJECT, round=0, positions=[5], tokens=[12], texts=["b"], p=[0.25], q=[0.125], calls=2.0, elapsed=0.625),
    Step(
        kind=K.RESAMPLE,
        round=0,
        positions=[5],
        tokens=[13],
        texts=["c"],
        p=[None],
        q=[0.5],
        calls=2.0,
        elapsed=0.75,
        note="residual",
    ),
    Step(kind=K.DRAFT_PASS, round=1, calls=3.0, elapsed=0.875),
    Step(
        kind=K.DRAFT,
        round=1,
        positions=[6, 7],
        tokens=[14, 15],
        texts=["d", "e"],
        p=[0.5, 0.5],
        q=[None, None],
        calls=3.0,
        elapsed=1.0,
    ),
    Step(kind=K.DENSITY_PASS, round=1, calls=4.0, elapsed=1.125),
    Step(kind=K.ACCEPT, round=1, positions=[6], tokens=[14], texts=["d"], p=[0.5], q=[0.5], calls=4.0, elapsed=1.25),
    Step(kind=K.ACCEPT, round=1, positions=[7], tokens=[15], texts=["e"], p=[0.5], q=[0.5], calls=4.0, elapsed=1.375),
    Step(
        kind=K.BONUS, round=1, positions=[8], tokens=[16], texts=["f"], p=[None], q=[0.25], calls=4.0, elapsed=1.5, note="bonus"
    ),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A migrated, empty database file (migrating once per module, not per test)."""
    path = tmp_path_factory.mktemp("tpl") / "studio.db"
    open_store(f"sqlite:///{path}").close()
    return path


@pytest.fixture
def store(template: Path, tmp_path: Path):
    """A store on a fresh copy of the template. SQLite hands back the rows of a query without ORDER BY
    in reverse (PRAGMA reverse_unordered_selects), so an order the store promises but does not ask
    for shows up as wrong instead of passing by the accident of insertion order."""
    path = tmp_path / "studio.db"
    shutil.copy(template, path)
    engine = sdb.make_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", lambda dbapi_conn, _rec: dbapi_conn.execute("PRAGMA reverse_unordered_selects=ON"))
    st = Store(engine)
    yield st
    st.close()


def rows(st: Store, sql: str, **params: Any) -> list[tuple]:
    with st.engine.connect() as c:
        return [tuple(r) for r in c.execute(text(sql), params)]


def count(st: Store, table: str) -> int:
    return rows(st, f"SELECT COUNT(*) FROM {table}")[0][0]


def session(st: Store, text_: str = "The [MASK:2] fox") -> str:
    return st.create_session("text", "m1", text_, [{"start": 4, "end": 12}])


# ----------------------------------------------------------------------------- ids and sessions


def test_share_ids_are_22_url_safe_characters_and_never_repeat():
    ids = [new_share_id() for _ in range(300)]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) for i in ids), ids[:3]
    assert len(set(ids)) == 300


def test_create_session_stores_the_input_verbatim(store: Store):
    before = datetime.now(UTC)
    a = store.create_session("code", NASTY, NASTY, [NASTY, {"start": 1}])
    b = store.create_session("text", "m", "", [])
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", a) and a != b
    got = rows(store, "SELECT share_id, domain, model, text, spans FROM sessions ORDER BY id")
    assert [r[:4] for r in got] == [(a, "code", NASTY, NASTY), (b, "text", "m", "")]
    assert [json.loads(r[4]) for r in got] == [[NASTY, {"start": 1}], []]
    rec = store.get_session(a)
    assert (rec.share_id, rec.domain, rec.model, rec.text, rec.spans, rec.runs) == (
        a, "code", NASTY, NASTY, [NASTY, {"start": 1}], [])
    assert before - timedelta(seconds=1) <= rec.created_at <= datetime.now(UTC)
    with pytest.raises(StorageInputError, match="domain must not be empty"):
        store.create_session("", "m", "x", [])
    assert count(store, "sessions") == 2


# ----------------------------------------------------------------------------- one run, row by row


def test_a_run_is_stored_with_its_steps_and_aggregates_row_by_row(store: Store):
    sid = session(store)
    rid = store.record_run(sid, NASTY, {"temperature": 0.5, "k": 2}, 2**64 - 1, TRACE,
                           completed_text="The brown fox", wall_seconds=1.5, logprob=-2.25)
    (sess_id,) = rows(store, "SELECT id FROM sessions WHERE share_id = :s", s=sid)[0]
    run = rows(store, "SELECT session_id, sampler, params, params_key, seed, status, error, completed_text, calls,"
                      " rounds, masked_tokens, wall_seconds, accepted, rejected, resampled, logprob FROM runs")
    assert len(run) == 1
    assert json.loads(run[0][2]) == {"k": 2, "temperature": 0.5}
    assert run[0][:2] + run[0][3:] == (
        sess_id, NASTY, '{"k":2,"temperature":0.5}', "18446744073709551615", "ok", None, "The brown fox",
        4.0,  # calls: the last step's counter
        2,  # rounds 0 and 1
        5,  # masked tokens: positions 4, 5, 6, 7, 8 decided
        1.5, 3, 1, 1, -2.25)  # wall, accepted (4, 6, 7), rejected (5), resampled (5), logprob
    steps = rows(store, "SELECT run_id, seq, kind, round, positions, tokens, texts, p, q, calls, elapsed, note, tested"
                        " FROM steps ORDER BY seq")
    assert [r[:4] for r in steps] == [(rid, i, s.kind.value, s.round) for i, s in enumerate(TRACE)]
    assert [tuple(json.loads(x) for x in r[4:9]) for r in steps][:2] == [
        ([], [], [], [], []), ([4, 5], [11, 12], ["a", "b"], [0.5, 0.25], [None, None])]
    assert [tuple(json.loads(x) for x in r[4:9]) for r in steps][5] == ([5], [13], ["c"], [None], [0.5])
    assert [r[9:] for r in steps] == [
        (1.0, 0.125, "", 1), (1.0, 0.25, "n", 1), (2.0, 0.375, "", 1), (2.0, 0.5, "exact", 0),
        (2.0, 0.625, "", 1), (2.0, 0.75, "residual", 1), (3.0, 0.875, "", 1), (3.0, 1.0, "", 1),
        (4.0, 1.125, "", 1), (4.0, 1.25, "", 1), (4.0, 1.375, "", 1), (4.0, 1.5, "bonus", 1)]
    # rank in the round -> tested drafts: round 0's rank 0 was untested, its rank 1 rejected;
    # round 1 accepted ranks 0 and 1
    assert rows(store, "SELECT run_id, rank, accepted, rejected FROM rank_stats ORDER BY rank") == [
        (rid, 0, 1, 0), (rid, 1, 1, 1)]
    # round -> tokens decided (accept + resample; 2 accepts + bonus), calls spent (2 - 0, 4 - 2)
    assert rows(store, "SELECT run_id, round, tokens, calls FROM round_stats ORDER BY round") == [
        (rid, 0, 2, 2.0), (rid, 1, 3, 2.0)]
    # and read back through the store, as the engine's steps again (tested=False kept)
    back = store.get_run(rid)
    assert back.steps == TRACE and back.steps[3].tested is False and back.steps[4].tested is True
    assert all(type(s.kind) is StepKind for s in back.steps)
    assert (back.id, back.share_id, back.sampler, back.params, back.seed, back.status, back.error) == (
        rid, sid, NASTY, {"k": 2, "temperature": 0.5}, 2**64 - 1, "ok", None)
    assert (back.completed_text, back.calls, back.rounds, back.masked_tokens, back.wall_seconds) == (
        "The brown fox", 4.0, 2, 5, 1.5)
    assert (back.accepted, back.rejected, back.resampled, back.logprob) == (3, 1, 1, -2.25)
    assert store.get_session(sid).runs == [back]


def test_run_defaults_and_an_empty_trace(store: Store):
    sid = session(store)
    rid = store.record_run(sid, "sequential", {}, None, [])
    assert rows(store, "SELECT params_key, seed, status, error, completed_text, calls, rounds, masked_tokens,"
                       " wall_seconds, accepted, rejected, resampled, logprob FROM runs") == [
        ("{}", None, "ok", None, "", 0.0, 0, 0, 0.0, 0, 0, 0, None)]
    assert (count(store, "steps"), count(store, "rank_stats"), count(store, "round_stats")) == (0, 0, 0)
    run = store.get_run(rid)
    assert run.seed is None and run.steps == [] and run.params == {}
    # seed 0 is a seed, not "no seed"
    assert store.get_run(store.record_run(sid, "sequential", {}, 0, [])).seed == 0


def test_every_result_field_is_passed_to_the_row(store: Store):
    sid = session(store)
    rid = store.record_run(sid, "assd", {"k": 1}, -5, TRACE[:6], completed_text="ab", masked_tokens=9,
                           wall_seconds=0.75, logprob=-1.0, status="stopped", error="over budget")
    assert rows(store, "SELECT seed, status, error, completed_text, masked_tokens, wall_seconds, logprob, calls,"
                       " rounds, accepted, rejected, resampled FROM runs WHERE id = :r", r=rid) == [
        ("-5", "stopped", "over budget", "ab", 9, 0.75, -1.0, 2.0, 1, 1, 1, 1)]
    assert rows(store, "SELECT rank, accepted, rejected FROM rank_stats") == [(1, 0, 1)]
    assert rows(store, "SELECT round, tokens, calls FROM round_stats") == [(0, 2, 2.0)]


def test_runs_of_two_sessions_keep_apart(store: Store):
    a, b = session(store), session(store)
    r1 = store.record_run(a, "assd", {}, 1, TRACE[:3])
    r2 = store.record_run(b, "sequential", {}, 2, [Step(kind=K.SAMPLE, round=0, positions=[1], tokens=[2], texts=["x"], p=[None],
                                                        q=[0.5], calls=1.0)])
    r3 = store.record_run(a, "mdm", {}, 3, [])
    assert r1 < r2 < r3
    assert [r.id for r in store.get_session(a).runs] == [r1, r3]
    assert [r.id for r in store.get_session(b).runs] == [r2]
    assert store.get_run(r2).share_id == b
    assert rows(store, "SELECT run_id, seq FROM steps ORDER BY run_id, seq") == [(r1, 0), (r1, 1), (r1, 2), (r2, 0)]


# ----------------------------------------------------------------------------- refusals leave nothing


def test_unknown_and_malformed_share_ids_are_refused_with_their_message(store: Store):
    with pytest.raises(LookupError, match=r"^unknown session \(malformed share id\)$"):
        store.record_run("short", "assd", {}, 1, TRACE)
    with pytest.raises(LookupError, match=r"^unknown session 'AAAAAAAAAAAAAAAAAAAAAA'$"):
        store.record_run("A" * 22, "assd", {}, 1, TRACE)
    # a malformed id is refused even with a NewSession that would otherwise create it
    with pytest.raises(LookupError, match="malformed"):
        store.record_run("short", "assd", {}, 1, TRACE, session=NewSession(domain="text", model="m", text="x", spans=[]))
    assert (count(store, "sessions"), count(store, "runs"), count(store, "steps")) == (0, 0, 0)


def test_a_new_session_is_written_with_its_first_run_only(store: Store):
    sid = new_share_id()
    new = NewSession(domain="code", model="m2", text="def f(): [MASK:3]", spans=[{"start": 9, "end": 17}])
    rid = store.record_run(sid, "assd", {}, 1, TRACE, session=new)
    assert rows(store, "SELECT share_id, domain, model, text FROM sessions") == [(sid, "code", "m2", "def f(): [MASK:3]")]
    got = store.get_session(sid)
    assert got.spans == [{"start": 9, "end": 17}] and [r.id for r in got.runs] == [rid]
    # a second run with a (different) NewSession for the same id joins the stored session, untouched
    rid2 = store.record_run(sid, "assd", {}, 2, [], session=NewSession(domain="text", model="other", text="y", spans=[]))
    assert rows(store, "SELECT share_id, domain, model, text FROM sessions") == [(sid, "code", "m2", "def f(): [MASK:3]")]
    assert [r.id for r in store.get_session(sid).runs] == [rid, rid2]
    # a refused run does not create its session either
    other = new_share_id()
    with pytest.raises(StorageInputError, match="status must be one of"):
        store.record_run(other, "assd", {}, 1, [], status="weird",
                         session=NewSession(domain="text", model="m", text="x", spans=[]))
    assert store.get_session(other) is None and count(store, "sessions") == 1


def test_a_database_error_midway_rolls_back_session_run_and_steps(store: Store, monkeypatch):
    monkeypatch.setattr("storage.repository.round_counts", lambda trace: {0: (None, None)})  # NOT NULL
    sid = new_share_id()
    with pytest.raises(Exception, match="(?i)not null"):
        store.record_run(sid, "assd", {}, 1, TRACE, session=NewSession(domain="text", model="m", text="x", spans=[]))
    assert [count(store, t) for t in ("sessions", "runs", "steps", "rank_stats", "round_stats")] == [0, 0, 0, 0, 0]


def test_bad_runs_are_refused_before_any_write(store: Store):
    sid = session(store)
    cases = [
        (dict(sampler=""), "sampler must not be empty"),
        (dict(params=[1]), "params must be a dict, got list"),
        (dict(seed=2**64), r"seed must be an int in \[-2\*\*63, 2\*\*64\) or None"),
        (dict(trace=[{"kind": "accept"}]), r"trace\[0\] is a dict, not an engine Step"),
        (dict(completed_text=None), "completed_text must be a string, got NoneType"),
        (dict(status="done"), "status must be one of"),
    ]
    for change, message in cases:
        kw = dict(sampler="assd", params={}, seed=1, trace=TRACE)
        kw.update(change)
        extra = {k: kw.pop(k) for k in ("completed_text", "status") if k in kw}
        with pytest.raises(StorageInputError, match=message):
            store.record_run(sid, kw["sampler"], kw["params"], kw["seed"], kw["trace"], **extra)
    assert (count(store, "runs"), count(store, "steps")) == (0, 0)


def test_record_runs_stores_a_session_and_its_runs_in_order_row_by_row(store: Store):
    """A comparison's runs (Store.record_runs, what RunGroup.commit calls): the session and every run
    in one transaction, in the order given, each run's fields as record_run stores them, the ones a
    run leaves out at record_run's defaults."""
    sid = new_share_id()
    new = NewSession(domain="compare", model="m4", text="a [MASK:2]", spans=[{"start": 2, "end": 10}])
    ids = store.record_runs(sid, [
        dict(sampler="assd", params={"k": 2}, seed=7, trace=TRACE, completed_text="a b", masked_tokens=9,
             wall_seconds=1.5, logprob=-2.0, status="stopped", error="over budget"),
        dict(sampler="sequential", params={}, seed=None, trace=[]),  # every field left at its default
        dict(sampler="mdm", params={"steps": 3}, seed=0, trace=TRACE[:6], status="failed", error="E: x"),
    ], session=new)
    assert rows(store, "SELECT share_id, domain, model, text FROM sessions") == [(sid, "compare", "m4", "a [MASK:2]")]
    assert store.get_session(sid).spans == [{"start": 2, "end": 10}]
    assert ids[0] < ids[1] < ids[2]
    assert rows(store, "SELECT id, sampler, params_key, seed, status, error, completed_text, masked_tokens,"
                       " wall_seconds, logprob, calls, rounds, accepted, rejected, resampled FROM runs ORDER BY id") == [
        (ids[0], "assd", '{"k":2}', "7", "stopped", "over budget", "a b", 9, 1.5, -2.0, 4.0, 2, 3, 1, 1),
        (ids[1], "sequential", "{}", None, "ok", None, "", 0, 0.0, None, 0.0, 0, 0, 0, 0),
        (ids[2], "mdm", '{"steps":3}', "0", "failed", "E: x", "", 2, 0.0, None, 2.0, 1, 1, 1, 1)]
    assert rows(store, "SELECT run_id, COUNT(*) FROM steps GROUP BY run_id ORDER BY run_id") == [
        (ids[0], len(TRACE)), (ids[2], 6)]
    assert rows(store, "SELECT run_id, rank, accepted, rejected FROM rank_stats ORDER BY run_id, rank") == [
        (ids[0], 0, 1, 0), (ids[0], 1, 1, 1), (ids[2], 1, 0, 1)]  # an untested draft is not counted
    assert rows(store, "SELECT run_id, round, tokens, calls FROM round_stats ORDER BY run_id, round") == [
        (ids[0], 0, 2, 2.0), (ids[0], 1, 3, 2.0), (ids[2], 0, 2, 2.0)]
    assert [r.id for r in store.get_session(sid).runs] == ids
    assert store.get_run(ids[0]).steps == TRACE
    # a stored session is joined, untouched by another NewSession; no session given: the same
    more = store.record_runs(sid, [dict(sampler="x", params={}, seed=1, trace=[])],
                             session=NewSession(domain="text", model="other", text="y", spans=[]))
    again = store.record_runs(sid, [dict(sampler="y", params={}, seed=2, trace=[])])
    assert [r.id for r in store.get_session(sid).runs] == ids + more + again and more[0] < again[0]
    assert count(store, "sessions") == 1 and store.get_session(sid).model == "m4"


def test_record_runs_writes_nothing_unless_every_run_and_the_session_are_good(store: Store):
    """One bad run refuses them all, before anything is written, session included; an unknown or
    malformed share id is refused with record_run's messages."""
    good = dict(sampler="assd", params={}, seed=1, trace=TRACE)
    new = NewSession(domain="compare", model="m", text="x", spans=[])
    sid = new_share_id()
    for bad, message in [(dict(sampler=""), "sampler must not be empty"),
                         (dict(status="done"), "status must be one of"),
                         (dict(completed_text=None), "completed_text must be a string")]:
        with pytest.raises(StorageInputError, match=message):
            store.record_runs(sid, [good, {**good, **bad}], session=new)
    with pytest.raises(LookupError, match=r"^unknown session \(malformed share id\)$"):
        store.record_runs("short", [good], session=new)
    with pytest.raises(LookupError, match=rf"^unknown session '{sid}'$"):
        store.record_runs(sid, [good])  # no session given, none stored
    assert [count(store, t) for t in ("sessions", "runs", "steps", "rank_stats", "round_stats")] == [0, 0, 0, 0, 0]


def test_user_text_is_bound_not_spliced(store: Store):
    sid = store.create_session("text", "m", "x", [])
    evil = "1' OR '1'='1"
    store.record_run(sid, evil, {evil: evil}, 1, [Step(kind=K.SAMPLE, round=0, positions=[1], tokens=[2], texts=[evil], p=[None],
                                                       q=[1.0], calls=1.0, elapsed=0.0, note=evil)],
                     completed_text=evil, status="failed", error=evil)
    run = store.get_session(sid).runs[0]
    assert (run.sampler, run.params, run.completed_text, run.error, run.steps[0].texts, run.steps[0].note) == (
        evil, {evil: evil}, evil, evil, [evil], evil)
    assert store.list_sessions(10, domain=evil) == [] and store.get_session(evil) is None
    assert store.delete_session(evil) is False and count(store, "sessions") == 1


# ----------------------------------------------------------------------------- the recorder


class Sink:
    """A RunSink that records what it is given and hands back run id 41."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def record_run(self, *args: Any, **kw: Any) -> int:
        self.calls.append((args, kw))
        return 41

    def record_runs(self, share_id: str, runs: list[dict[str, Any]], session: Any = None) -> list[int]:
        self.calls.append(((share_id, runs), {"session": session}))
        return [41 + i for i in range(len(runs))]


@pytest.fixture
def clock(monkeypatch):
    """storage.recorder's perf_counter, scripted: 100.0 on entering, 102.5 on leaving (and again)."""
    ticks = itertools.cycle([100.0, 102.5])
    monkeypatch.setattr(recorder_mod, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))


def test_recorder_hands_the_sink_the_finished_run(clock):
    sink, new = Sink(), NewSession(domain="text", model="m", text="x", spans=[])
    with RunRecorder(store=sink, share_id="SID", sampler="assd", params={"k": 2}, seed=7, session=new) as rec:
        shown = list(rec.wrap(iter(TRACE[:3])))
        rec.add(TRACE[3])
        rec.finish(completed_text="abc", masked_tokens=3, logprob=-1.5, wall_seconds=0.0)
    assert shown == TRACE[:3]
    assert sink.calls == [(("SID", "assd", {"k": 2}, 7, TRACE[:4]), {
        "status": "ok", "error": None, "session": new, "completed_text": "abc", "masked_tokens": 3,
        "logprob": -1.5, "wall_seconds": 0.0})]  # a given wall time, even 0.0, is kept
    assert sink.calls[0][1]["session"] is new and rec.run_id == 41


def test_recorder_measures_the_wall_time_when_none_is_given(clock):
    sink = Sink()
    with RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=None) as rec:
        rec.finish()
    assert sink.calls == [(("SID", "assd", {}, None, []), {
        "status": "ok", "error": None, "session": None, "completed_text": "", "masked_tokens": None,
        "logprob": None, "wall_seconds": 2.5})]


def test_recorder_without_finish_is_cancelled(clock):
    sink = Sink()
    with RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=3) as rec:
        for _ in rec.wrap(TRACE):
            break
    assert sink.calls == [(("SID", "assd", {}, 3, TRACE[:1]),
                           {"status": "cancelled", "error": None, "session": None, "wall_seconds": 2.5})]


@pytest.mark.parametrize("exc, status, error", [
    (KeyboardInterrupt(), "cancelled", "KeyboardInterrupt"),
    (GeneratorExit(), "cancelled", "GeneratorExit"),
    (BudgetExceededError("spent 3 calls"), "stopped", "spent 3 calls"),
    (type("Halt", (Exception,), {"run_status": "cancelled"})("halted"), "cancelled", "halted"),
    (type("Odd", (Exception,), {"run_status": "paused"})("odd"), "failed", "Odd: odd"),
    (ValueError("model blew up"), "failed", "ValueError: model blew up"),
], ids=["keyboard-interrupt", "generator-exit", "budget-stop", "own-status", "unknown-status", "error"])
def test_recorder_stores_how_the_stream_ended_and_lets_the_error_through(clock, exc, status, error):
    sink = Sink()
    with pytest.raises(type(exc)), RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=1) as rec:
        rec.add(TRACE[0])
        rec.finish(completed_text="so far")  # fields given before the error are kept
        raise exc
    assert sink.calls == [(("SID", "assd", {}, 1, TRACE[:1]), {
        "status": status, "error": error, "session": None, "completed_text": "so far", "masked_tokens": None,
        "logprob": None, "wall_seconds": 2.5})]
    assert rec.run_id == 41


def test_a_discarded_recorder_stores_nothing(clock):
    sink = Sink()
    with RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=1) as rec:
        rec.add(TRACE[0])
        rec.discard()
        rec.finish()
    assert sink.calls == [] and rec.run_id is None and rec.discarded is True
    with pytest.raises(RuntimeError), RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=1) as rec2:
        rec2.discard()
        raise RuntimeError("cancelled before it showed anything")
    assert sink.calls == [] and rec2.run_id is None
    fresh = RunRecorder(store=sink, share_id="SID", sampler="assd", params={}, seed=1)
    assert (fresh.discarded, fresh.steps, fresh.run_id) == (False, [], None)


def test_a_group_stores_every_side_once_in_side_order_with_its_seed_and_result(clock):
    """A comparison's sides (RunGroup): nothing reaches the sink until every side has ended and
    commit() is called; then one record_runs call, in side order whatever order they ended in, each
    side with its own seed, status and result fields; each recorder learns its run id; a second
    commit() stores nothing more."""
    sink, new = Sink(), NewSession(domain="compare", model="m", text="x", spans=[])
    group = RunGroup(store=sink, share_id="SID", sides=2, session=new)
    b = group.recorder(1, "sequential", {}, 5)
    a = group.recorder(0, "assd", {"k": 2}, 7)
    with b:  # side B ends first, without finish(): cancelled, its wall time measured
        b.add(TRACE[0])
    assert group.commit() is None and sink.calls == [] and b.run_id is None  # side A has not ended
    with a:
        assert list(a.wrap(iter(TRACE[:3]))) == TRACE[:3]
        a.finish(completed_text="abc", masked_tokens=3, logprob=-1.5, wall_seconds=0.0)
    assert sink.calls == []  # both ended: still nothing stored before commit()
    assert group.commit() == [41, 42]
    assert sink.calls == [(("SID", [
        {"sampler": "assd", "params": {"k": 2}, "seed": 7, "trace": TRACE[:3], "status": "ok", "error": None,
         "completed_text": "abc", "masked_tokens": 3, "logprob": -1.5, "wall_seconds": 0.0},
        {"sampler": "sequential", "params": {}, "seed": 5, "trace": TRACE[:1], "status": "cancelled",
         "error": None, "wall_seconds": 2.5}]), {"session": new})]
    assert sink.calls[0][1]["session"] is new
    assert (a.run_id, b.run_id) == (41, 42)
    assert group.commit() is None and len(sink.calls) == 1  # stored once: a second commit writes nothing


def test_store_recorder_writes_one_run_and_creates_its_session(store: Store):
    sid = new_share_id()
    new = NewSession(domain="text", model="m3", text="a [MASK:1]", spans=[])
    rec = store.recorder(sid, "assd", {"k": 2}, 9, session=new)
    assert (rec.store, rec.share_id, rec.sampler, rec.params, rec.seed, rec.session) == (
        store, sid, "assd", {"k": 2}, 9, new)
    with rec:
        for _ in rec.wrap(TRACE):
            pass
        rec.finish(completed_text="a b", logprob=-0.5)
    (run,) = store.get_session(sid).runs
    assert (run.id, run.sampler, run.params, run.seed, run.status, run.completed_text, run.logprob) == (
        rec.run_id, "assd", {"k": 2}, 9, "ok", "a b", -0.5)
    assert run.steps == TRACE and run.masked_tokens == 5 and run.wall_seconds >= 0.0
    assert rows(store, "SELECT model FROM sessions WHERE share_id = :s", s=sid) == [("m3",)]
    assert store.recorder(sid, "x", {}, None).session is None


# ----------------------------------------------------------------------------- reading back


def test_get_run_and_get_session_refuse_what_is_not_an_id(store: Store):
    sid = session(store)
    rid = store.record_run(sid, "assd", {}, 1, [])
    assert rid == 1 and store.get_run(1).id == 1
    for bad in (True, "1", 1.0, None):
        assert store.get_run(bad) is None
    assert store.get_run(2) is None
    for bad in (None, 12, "A" * 15, "A" * 22 + "?"):
        assert store.get_session(bad) is None
    assert store.get_session("A" * 22) is None


def test_export_run_formats(store: Store):
    sid = session(store)
    rid = store.record_run(sid, "assd", {"k": 2}, 4, TRACE[:2])
    assert store.export_run(rid).startswith("{") and json.loads(store.export_run(rid))["seed"] == 4
    assert json.loads(store.export_run(rid, "json"))["steps"][1]["positions"] == [4, 5]
    assert store.export_run(rid, "csv") == (
        "seq,kind,round,positions,tokens,texts,p,q,calls,elapsed,note,tested\n"
        "0,draft_pass,0,[],[],[],[],[],1.0,0.125,,true\n"
        '1,draft,0,"[4, 5]","[11, 12]","[""a"", ""b""]","[0.5, 0.25]","[null, null]",1.0,0.25,n,true\n')
    assert store.export_run(rid + 1, "csv") is None and store.export_run(rid + 1, "xml") is None
    with pytest.raises(StorageInputError, match=r"^fmt must be 'csv' or 'json', got 'xml'\.$"):
        store.export_run(rid, "xml")


def test_list_sessions_order_preview_counts_and_filters(store: Store):
    a = store.create_session("text", "m", "a" * 150 + "b" * 150, [])
    b = store.create_session("code", "m", "short", [])
    c = store.create_session("text", "m", "third", [])
    store.record_run(b, "sequential", {}, 1, [])
    store.record_run(a, "mdm", {}, 1, [])
    store.record_run(a, "assd", {}, 2, [])
    listed = store.list_sessions()
    assert [(s.share_id, s.domain, s.model, s.run_count, s.samplers) for s in listed] == [
        (c, "text", "m", 0, []), (b, "code", "m", 1, ["sequential"]), (a, "text", "m", 2, ["mdm", "assd"])]
    assert listed[2].text_preview == "a" * 150 + "b" * 50 and listed[1].text_preview == "short"
    assert [s.share_id for s in store.list_sessions(2)] == [c, b]
    assert [s.share_id for s in store.list_sessions("2")] == [c, b]
    assert store.list_sessions(0) == [] and store.list_sessions(-4) == []
    assert [s.share_id for s in store.list_sessions(10, offset=1)] == [b, a]
    assert [s.share_id for s in store.list_sessions(10, offset=-3)] == [c, b, a]
    assert [s.share_id for s in store.list_sessions(1, offset="2")] == [a]
    assert [s.share_id for s in store.list_sessions(10, domain="text")] == [c, a]
    assert [s.share_id for s in store.list_sessions(10, share_ids=[a, "bad id", b])] == [b, a]
    assert store.list_sessions(10, share_ids=["bad id", 7]) == []
    assert store.list_sessions(10, share_ids=[new_share_id()]) == []
    assert store.list_sessions(10, domain="code", share_ids=[a]) == []
    created = {x: store.get_session(x).created_at for x in (a, b, c)}
    assert [s.created_at for s in listed] == [created[c], created[b], created[a]]
    assert created[a] < created[b] < created[c] and listed[0].created_at.tzinfo is not None
    # newest first by creation time, not by id: a made newer than c comes first
    with sdb.write_session(store.engine) as s:
        s.execute(text("UPDATE sessions SET created_at = '2030-01-01 00:00:00.000000' WHERE share_id = :a"), {"a": a})
    assert [s.share_id for s in store.list_sessions()] == [a, c, b]
    # the same creation time: the later insert (higher id) first, also when the ids are looked up
    # by share id (their index order, A < B < C, is the insert order)
    with sdb.write_session(store.engine) as s:
        s.execute(text("UPDATE sessions SET created_at = '2026-01-01 00:00:00.000000'"))
        for old, new in ((a, "A" * 22), (b, "B" * 22), (c, "C" * 22)):
            s.execute(text("UPDATE sessions SET share_id = :new WHERE share_id = :old"), {"old": old, "new": new})
    assert [s.share_id for s in store.list_sessions()] == ["C" * 22, "B" * 22, "A" * 22]
    assert [s.share_id for s in store.list_sessions(share_ids=["A" * 22, "B" * 22, "C" * 22])] == [
        "C" * 22, "B" * 22, "A" * 22]
    assert [s.share_id for s in store.list_sessions(domain="text")] == ["C" * 22, "A" * 22]


def test_list_sessions_caps(store: Store):
    ids = [new_share_id() for _ in range(1001)]
    with sdb.write_session(store.engine) as s:
        s.execute(text("INSERT INTO sessions (share_id, domain, model, text, spans, created_at)"
                       " VALUES (:i, 'text', 'm', 'x', '[]', :t)"),
                  [{"i": i, "t": f"2026-01-01 00:{n // 60:02d}:{n % 60:02d}.000000"} for n, i in enumerate(ids)])
    assert len(store.list_sessions(5000)) == 1000 and store.list_sessions(5000)[0].share_id == ids[-1]
    assert [s.share_id for s in store.list_sessions()] == ids[:-51:-1]  # 50 by default, newest first
    # at most the first 1000 ids asked for are looked up
    assert [s.share_id for s in store.list_sessions(10, share_ids=ids[:1000] + [ids[1000]])] == ids[999:989:-1]
    assert [s.share_id for s in store.list_sessions(10, share_ids=[ids[1000]] + ids[:999])][0] == ids[1000]


def test_delete_session_cascades_to_its_runs_only(store: Store):
    a, b = session(store), session(store)
    store.record_run(a, "assd", {}, 1, TRACE)
    keep = store.record_run(b, "assd", {}, 2, TRACE[:6])
    assert store.delete_session(a) is True and store.delete_session(a) is False
    assert store.delete_session("A" * 22) is False and store.delete_session(None) is False
    assert rows(store, "SELECT share_id FROM sessions") == [(b,)]
    assert rows(store, "SELECT DISTINCT run_id FROM steps") == [(keep,)]
    assert rows(store, "SELECT run_id, rank FROM rank_stats") == [(keep, 1)]
    assert rows(store, "SELECT run_id, round FROM round_stats") == [(keep, 0)]


def test_stats_forwards_every_filter(store: Store):
    a = store.create_session("text", "m1", "x", [])
    b = store.create_session("code", "m2", "y", [])
    store.record_run(a, "assd", {"k": 2}, 1, TRACE)
    store.record_run(b, "sequential", {}, 1, [Step(kind=K.SAMPLE, round=0, positions=[1], tokens=[2], texts=["x"], p=[None],
                                                   q=[0.5], calls=1.0)])
    assert sorted(g.model for g in store.stats()) == ["m1", "m2"]
    assert [g.model for g in store.stats(domain="code")] == ["m2"]
    assert [g.model for g in store.stats(model="m1")] == ["m1"]
    assert [g.sampler for g in store.stats(sampler="sequential")] == ["sequential"]
    now = datetime.now(UTC)
    assert store.stats(since=now + timedelta(hours=1)) == []
    assert store.stats(until=now - timedelta(hours=1)) == []
    (g,) = store.stats(model="m1")
    assert (g.runs, g.masked_tokens, g.calls, g.rounds) == (1, 5, 4.0, 2)
    assert [(r.rank, r.accepted, r.rejected) for r in g.acceptance_by_rank] == [(0, 1, 0), (1, 1, 1)]
    assert g.tokens_per_round == {2: 1, 3: 1}


def test_store_as_a_context_manager_releases_its_connections(template: Path, tmp_path: Path):
    path = tmp_path / "cm.db"
    shutil.copy(template, path)
    engine = sdb.make_engine(f"sqlite:///{path}")
    with Store(engine) as st:
        assert st.engine is engine
        session(st)
        pool = engine.pool
        assert pool.checkedin() >= 1
    assert engine.pool is not pool  # dispose() replaced the pool
