"""A public demo that stays up for weeks (issue 28, serving half): one test per defect.

1 memory: visitor sessions capped and expired, freed heap handed back, the body limit sized to
  the longest legitimate request; 2 fair scheduling: admission (a few runs per visitor, long runs
  bounded, seats only small runs reach) and aging priorities, checked by rule and by a simulation
  in virtual time (no timing is asserted); 3 disk: the retention policy and its command, one CSV
  file per filter a minute, Gradio's cache pruned every few minutes; 8 stopped and disconnected
  runs reachable by link and listed, with no trailing step in a cancelled trace."""

from __future__ import annotations

import datetime
import threading
import time
from collections import OrderedDict
from types import SimpleNamespace

import pytest

from app.run import streaming
from app.serving import admission as adm_mod
from app.serving import slots as sl
from app.serving.admission import Admission, Busy
from app.serving.slots import AGE_RATE, AgingClock, Cancelled, Slots, aged_priority, level
from app.stored import replay
from app.stored import store as app_store
from app.timing import speedup
from tests.support.studio import TEXT, form, tiny_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """Tiny random models and a temp store (tests/support/studio.py)."""
    with tiny_studio(tmp_path_factory.mktemp("serving")) as store:
        yield store


_form = form


# ----------------------------------------------------------------------------- 2: aging priorities


def test_a_run_that_waited_long_enough_moves_up_a_level():
    # 0.8 s of service is level 1: a newly arrived run (level 0, later arrival) goes first...
    assert aged_priority(0.8, 0.0, 1) == (1, 1) > aged_priority(0.0, 0.0, 9)
    # ...until it has earned 0.3 s of aging credit: then it is level 0 again, and its earlier
    # arrival puts it ahead of every newer run; credit never takes service below zero
    assert aged_priority(0.8, 0.29, 1)[0] == 1
    assert aged_priority(0.8, 0.31, 1) == (0, 1) < aged_priority(0.0, 0.0, 9)
    assert aged_priority(3.0, 1e9, 4) == (0, 4) and aged_priority(3.0, 0.0, 4)[0] == level(3.0) == 2
    # the aging credit, AGE_RATE x slots a second, goes to the first arrived of the runs still past
    # level 0; once it is back at level 0 the next one gets it: never more than that in all
    c = AgingClock(2, now=0.0)
    first, second = (SimpleNamespace(arrival=a, virtual=0.8, credit=0.0) for a in (3, 7))
    c.advance(0.4, [second, first])
    assert first.credit == pytest.approx(0.4 * AGE_RATE * 2) and second.credit == 0.0
    c.advance(1.0, [second, first])  # first reached level 0 at 0.6 s; the interval goes to it whole
    c.advance(2.0, [second, first])
    assert second.credit == pytest.approx(AGE_RATE * 2) and first.credit == pytest.approx(AGE_RATE * 2)
    c.advance(9.0, [])  # nobody waiting: no credit anywhere
    assert first.credit + second.credit == pytest.approx(2 * AGE_RATE * 2)


def _queue(s: Slots, n: int, **kw) -> threading.Thread:
    """A thread waiting for a slot of `s` (joined by the caller), once it is in line."""
    got = []
    t = threading.Thread(target=lambda: (s.acquire(None, **kw), got.append(kw["arrival"])), daemon=True)
    t.got = got
    t.start()
    deadline = time.monotonic() + 10
    while len(s._waiters) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(s._waiters) == n
    return t


def test_the_slots_hand_over_by_aged_priority():
    now = [0.0]
    s = Slots(1, clock=lambda: now[0])
    s.acquire((0, 0))  # a run computes on the only slot
    long_run = _queue(s, 1, arrival=1, virtual=0.8)  # level 1, waiting since t = 0
    now[0] = 1.0  # 1 s later a new small run arrives
    small = _queue(s, 2, arrival=9, virtual=0.0)
    assert s.better_waiting((1, 5))
    s.release()  # at t = 1 the long run has aged 0.25 s: still level 1, the small run goes first
    small.join(10)
    assert small.got == [9] and long_run.got == []
    now[0] = 1.3  # another small run queues; the long run has now waited 1.3 s: level 0, earlier arrival
    small2 = _queue(s, 2, arrival=10, virtual=0.0)
    s.release()
    long_run.join(10)
    assert long_run.got == [1] and small2.got == []
    s.release()
    small2.join(10)
    assert small2.got == [10]


def test_a_run_handed_a_slot_by_aging_keeps_its_credit_while_it_computes():
    now = [0.0]
    s = Slots(1, clock=lambda: now[0])
    s.acquire((0, 0))
    t = sl.Turns(s)
    t.attained = t.virtual = 0.8  # a long run back in line at level 1
    th = threading.Thread(target=t._hold, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while not s._waiters and time.monotonic() < deadline:
        time.sleep(0.005)
    now[0] = 2.0  # alone in line for 2 s: 2 x AGE_RATE seconds forgiven
    s.release()
    th.join(10)
    # its level while it computes counts the credit, so a newly arrived short run does not take
    # the slot back at the next pass: it computes until it has used the credit up
    assert t.virtual == pytest.approx(0.8 - 2 * AGE_RATE) and t.priority()[0] == 0
    assert t.attained == 0.8  # the budget and the estimate still count every second computed


def _simulate(longs: list[float], small_every: float, horizon: float = 120.0, quantum: float = 0.05,
              settle: float = 0.0):
    """One slot in virtual time. Long runs needing `longs` seconds of computing arrive at t = 0;
    a short run (one `quantum` of computing) arrives every `small_every` seconds. Between two
    passes (each a quantum) the slot goes to the best waiter by the module's own rules
    (aged_priority with AgingClock credit, as Slots hands it over and Turns.preempt gives it up).
    Returns (finish time of each long run or None, the worst latency of a short run arriving
    after `settle` seconds, finished or still waiting at the end)."""
    clock = AgingClock(1, now=0.0)
    runs = {i: SimpleNamespace(arrival=i, need=need, virtual=0.0, credit=0.0, ages=False, t0=0.0)
            for i, need in enumerate(longs)}
    arrival, next_small, t = len(longs), 0.0, 0.0
    done: dict[int, float] = {}
    worst_small = 0.0
    while t < horizon and len(done) < len(longs):
        while next_small <= t:
            runs[arrival] = SimpleNamespace(arrival=arrival, need=quantum, virtual=0.0, credit=0.0, ages=False,
                                            t0=next_small)
            arrival, next_small = arrival + 1, next_small + small_every
        clock.advance(t, [r for r in runs.values() if r.ages])
        r = min(runs.values(), key=lambda r: aged_priority(r.virtual, r.credit if r.ages else 0.0, r.arrival))
        if r.ages:
            r.virtual, r.credit = max(0.0, r.virtual - r.credit), 0.0
        r.virtual += quantum
        r.need -= quantum
        t += quantum
        clock.advance(t, [w for w in runs.values() if w.ages and w is not r])
        if r.need <= 1e-9:
            del runs[r.arrival]
            if r.arrival < len(longs):
                done[r.arrival] = t
            elif r.t0 >= settle:
                worst_small = max(worst_small, t - r.t0)
        else:
            r.ages = level(r.virtual) > 0  # back in line
    waiting = [t - r.t0 for r in runs.values() if r.arrival >= len(longs) and r.t0 >= settle]
    return [done.get(i) for i in range(len(longs))], max([worst_small, *waiting])


def test_no_run_waits_unboundedly_behind_a_stream_of_short_runs():
    # issue 28 (b): a 0.8 s run while short runs keep the slot busy all the time
    (done,), _ = _simulate([0.8], small_every=0.05)
    # a lone long run earns AGE_RATE of the slot: 0.8 s of work ends within about
    # (1 + 1 / AGE_RATE) x 0.8 s, plus the short runs already in line
    assert done is not None and done <= (1 + 1 / AGE_RATE) * 0.8 + 2.0, done


def test_many_long_runs_aging_do_not_crowd_out_short_ones():
    # issue 28 (a): eight long runs wait together while short runs use half of the slot
    done, worst_small = _simulate([2.0] * 8, small_every=0.1, horizon=400.0, settle=15.0)
    assert all(d is not None for d in done), done  # every long run ends (16 s of work in < 400 s)
    # once their first half second each (level 0, as for any new run) and the short runs it held
    # up are through, the long runs together earn at most AGE_RATE of the slot, so a short run
    # waits at most for one quantum of each of them (8 x 0.05 s), not for the long runs to end
    assert worst_small <= 1.0, worst_small


# ----------------------------------------------------------------------------- 2: admission


def test_a_visitor_may_hold_only_a_few_runs():
    adm = Admission(seats=4, line=0, per_visitor=2)
    with adm.enter("v1", long=False), adm.enter("v1", long=True):
        with pytest.raises(Busy, match="already have 2 runs"), adm.enter("v1", long=False):
            pass
        with adm.enter("v2", long=False):  # another visitor is not affected
            assert adm.in_progress("v2") == 1
    assert adm.in_progress("v1") == 0 and adm.long == 0
    with adm.enter("v1", long=False):  # once they end, the visitor may run again
        pass


def test_small_runs_are_never_refused_or_held_by_long_ones():
    adm = Admission(seats=2, line=1, per_visitor=2)
    held = [adm.enter(f"heavy-{i}", long=True) for i in range(2)]
    for cm in held:
        cm.__enter__()
    third = adm.enter("heavy-2", long=True)  # kept referenced: it holds its seat once admitted
    waiting = threading.Thread(target=third.__enter__, daemon=True)
    waiting.start()
    deadline = time.monotonic() + 10
    while not adm._line and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(adm._line) == 1
    # seats and line full: a further long run is refused at once, with what to do instead
    with pytest.raises(Busy, match="mask at most"), adm.enter("heavy-3", long=True):
        pass
    # a small run is admitted at once, whatever the long runs do
    with adm.enter("small", long=False):
        assert adm.in_progress("small") == 1
    # a leaving long run hands its seat to the first in line
    held[0].__exit__(None, None, None)
    waiting.join(10)
    assert not waiting.is_alive() and adm.long == 2 and not adm._line
    # and Gradio's concurrency leaves seats that only small runs can reach
    assert adm_mod.run_seats() == sl.active_runs() + adm_mod.long_run_line() + adm_mod.small_run_seats()
    assert adm_mod.small_run_seats() > 0


def test_a_long_run_cancelled_in_line_leaves_it():
    adm = Admission(seats=1, line=2, per_visitor=2)
    with adm.enter("a", long=True):
        flag = threading.Event()
        with pytest.raises(Cancelled):
            threading.Timer(0.2, flag.set).start()
            with adm.enter("b", long=True, cancelled=flag.is_set):
                pass
        assert not adm._line and adm.in_progress("b") == 0
    assert adm.long == 0


def test_the_app_refuses_a_third_run_of_one_visitor_and_stores_nothing(studio, monkeypatch):
    monkeypatch.setattr(adm_mod, "_admission", Admission(seats=4, line=0, per_visitor=2))
    lives = [streaming.start(_form(seed=i), owner="visitor") for i in range(3)]
    its = [streaming.rounds(lv) for lv in lives[:2]]
    for it in its:
        next(it)  # two runs under way
    with pytest.raises(Busy):
        next(streaming.rounds(lives[2]))
    assert app_store.store().get_session(lives[2].share_id) is None
    for it in its:
        for _ in it:
            pass
    assert adm_mod._admission.in_progress("visitor") == 0
    assert all(lv.run_id is not None for lv in lives[:2])


def test_the_app_classifies_long_runs_by_masked_tokens(studio, monkeypatch):
    adm = Admission(seats=1, line=0, per_visitor=4)
    monkeypatch.setattr(adm_mod, "_admission", adm)
    monkeypatch.setenv("INFILL_SMALL_RUN_TOKENS", "8")
    first = streaming.rounds(streaming.start(_form(text="[MASK:20] x"), owner="a"))
    next(first)  # a long run holds the only long seat
    assert adm.long == 1
    with pytest.raises(Busy):
        next(streaming.rounds(streaming.start(_form(text="[MASK:20] y"), owner="b")))
    small = streaming.start(_form(text="ab [MASK:6] c"), owner="c")
    for _ in streaming.rounds(small):
        pass
    assert small.run_id is not None and small.result is not None
    first.close()
    assert adm.long == 0


def test_the_speedup_run_is_admitted_like_any_run(studio, monkeypatch):
    monkeypatch.setenv("INFILL_SPEEDUP", "1")
    monkeypatch.setenv("INFILL_SMALL_RUN_TOKENS", "4")
    adm = Admission(seats=1, line=0, per_visitor=4)
    monkeypatch.setattr(adm_mod, "_admission", adm)
    live = streaming.start(_form(text="ab [MASK:8] c"), owner="a")
    for _ in streaming.rounds(live):
        pass
    assert speedup.speedup_applies(live)
    with adm.enter("b", long=True):  # the only long-run seat is taken: no second run, no line
        assert speedup.speedup_line(live) == ""
    assert "vs cached sequential" in speedup.speedup_line(live) and adm.long == 0


def test_the_speedup_timing_is_not_counted_as_the_visitors_run(studio, monkeypatch):
    """Run, then Compare at once: the Compare's two runs must not be refused because the server is
    still timing cached sequential for the first run (the browser test of the bundled models)."""
    monkeypatch.setenv("INFILL_SPEEDUP", "1")
    adm = Admission(seats=4, line=0, per_visitor=2)
    monkeypatch.setattr(adm_mod, "_admission", adm)
    live = streaming.start(_form(text="ab [MASK:8] c"), owner="a")
    for _ in streaming.rounds(live):
        pass
    with adm.enter("a", long=False), adm.enter("a", long=False):  # the visitor's Compare, two runs
        assert "vs cached sequential" in speedup.speedup_line(live)


# ----------------------------------------------------------------------------- 8: stopped / disconnected runs


def test_a_budget_stopped_run_gets_its_link_and_replay(studio, monkeypatch):
    from app.tabs import player

    monkeypatch.setenv("INFILL_RUN_MAX_CALLS", "3")
    frames = list(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 3, 32, 0.05, "cosine", 1))
    last = frames[-1]
    status, link, trace = last["status"], last["link"], last["trace_state"]
    sid = link.split("?s=")[-1]
    assert "budget" in status and sid
    stored = app_store.store().get_session(sid)
    assert [r.status for r in stored.runs] == ["stopped"]
    assert trace is not None and len(trace["steps"]) == len(stored.runs[0].steps) > 0
    # the chained step lists it in the browser's own list
    ids, _ = player.remembering_run(lambda link, ids: ([link.split("?s=")[-1], *ids], ""))(link, sid, [])
    assert ids == [sid]


def test_a_run_whose_stream_broke_off_is_listed_from_its_session(studio):
    from app.tabs import player

    live = streaming.start(_form(text="[MASK:10] x", sampler="sequential"))
    it = streaming.rounds(live)
    next(it)
    it.close()  # the visitor's connection dropped: no last update, so no link on the page
    seen = []
    player.remembering_run(lambda link, ids: (seen.append(link), ([], ""))[1])("", live.share_id, [])
    assert seen and seen[0].endswith(f"?s={live.share_id}")
    # a session never stored is not listed
    seen.clear()
    player.remembering_run(lambda link, ids: (seen.append(link), ([], ""))[1])("", "never-stored-id-xxxxxx", [])
    assert seen == [""]


def test_a_disconnected_run_stores_only_the_steps_it_showed(studio):
    live = streaming.start(_form(text="[MASK:12] x", sampler="sequential"))
    it = streaming.rounds(live)
    for _ in range(3):
        next(it)
    it.close()  # GeneratorExit at the round boundary, as when Gradio drops a disconnected job
    assert live.run_id is not None
    run = app_store.store().get_run(live.run_id)
    assert run.status == "cancelled"
    # no step read after the last update: the replay counts the calls the visitor saw
    assert [(s.kind, s.round, s.positions) for s in run.steps] == [(s.kind, s.round, s.positions) for s in live.steps]
    assert run.rounds == live.state.round + 1


def test_the_player_state_holds_the_run_id_not_the_trace(studio):
    from app.tabs import playback, player

    frames = list(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 5, 32, 0.05, "cosine", 1))
    link, trace = frames[-1]["link"], frames[-1]["trace_state"]
    assert isinstance(trace, replay.StoredTrace)  # a visitor's session keeps an id and the input's view
    assert not hasattr(trace, "__dict__") and set(trace.__slots__) == {"run_id", "view", "title"}
    stored = app_store.store().get_session(link.split("?s=")[-1]).runs[0]
    assert trace.run_id == stored.id and list(trace["steps"]) == stored.steps
    # the player reads it like the dict it used to hold
    shown = playback.frame(trace, 2)
    assert shown["scrub_sl"] == 2 and "step 2/" in shown["counters"]


# ----------------------------------------------------------------------------- 1: memory


class _Holder:
    """The parts of Gradio's StateHolder that app.serving.memory touches."""

    def __init__(self):
        self.session_data, self.time_last_used, self.lock = OrderedDict(), {}, threading.Lock()


def test_idle_visitor_sessions_are_dropped():
    from app.serving.memory import drop_idle_sessions

    h = _Holder()
    now = datetime.datetime(2026, 1, 1, 12, 0, 0)
    for i, age in enumerate((5, 300, 900, 4000)):
        h.session_data[f"s{i}"] = object()
        h.time_last_used[f"s{i}"] = now - datetime.timedelta(seconds=age)
    h.session_data["new"] = object()  # being created (Gradio stamps its last use just after): kept
    assert drop_idle_sessions(h, 600, now) == 2
    assert list(h.session_data) == ["s0", "s1", "new"] and set(h.time_last_used) == {"s0", "s1"}


def test_the_server_caps_and_sweeps_visitor_sessions(monkeypatch):
    from app.serving import address_sessions, limits, memory

    monkeypatch.setenv("INFILL_SESSIONS_MAX", "5")
    kw = limits.launch_limits()
    assert kw["state_session_capacity"] == 5 + 16  # bounded (Gradio's default is 10,000), above the record's own cap
    assert kw["app_kwargs"]["lifespan"] is memory.lifespan
    monkeypatch.delenv("INFILL_SESSIONS_MAX")
    assert address_sessions.sessions_max() <= 128 and memory.session_idle_seconds() <= 3600
    assert memory.trim() in (True, False)  # callable here (glibc) or a no-op elsewhere


def test_the_body_limit_fits_the_longest_legitimate_request_and_no_more():
    import json

    from app.run.inputs import MAX_INPUT_CHARS
    from app.serving.limits import max_body_bytes

    longest = json.dumps({"data": ["text", "text-asarm", "\U0001F600" * MAX_INPUT_CHARS, "assd", 5, 1, 0, 32,
                                   0.05, "cosine", 1], "fn_index": 0, "session_hash": "abcdefgh"}).encode()
    assert len(longest) < max_body_bytes() <= 2 * len(longest)  # a 1 MB text no longer reaches Gradio


@pytest.mark.slow
def test_sessions_stay_capped_on_a_running_server(studio, monkeypatch):
    """Through the real routes: one address opening session after session keeps at most
    INFILL_SESSIONS_PER_ADDRESS of them (its own least recently used goes: strangers' readers are
    never evicted, app.serving.address_sessions), within INFILL_SESSIONS_MAX, and idle ones are
    swept away."""
    import uuid

    from gradio_client import Client

    from app.serving import memory
    from tools.tiny_models import launch_for_tests

    monkeypatch.setenv("INFILL_SESSIONS_MAX", "4")
    monkeypatch.setenv("INFILL_SESSIONS_PER_ADDRESS", "3")
    monkeypatch.setattr("app.serving.address_sessions._sessions", None)  # the record reads them when made
    demo, url = launch_for_tests()
    try:
        c = Client(url, verbose=False)
        for i in range(10):
            c.session_hash = str(uuid.uuid4())
            c.submit("text", "text-asarm", "x" * 30_000, "assd", 4, 1.0, i, 32, 0.05, "cosine", 1,
                     api_name="/infill").result(timeout=60)
        assert len(demo.state_holder.session_data) <= 3
        # the server's sweep (app.serving.memory.lifespan) drops sessions idle for longer than the setting
        monkeypatch.setenv("INFILL_SESSION_IDLE_SECONDS", "1")
        deadline = time.monotonic() + 3 * memory.SWEEP_SECONDS
        while demo.state_holder.session_data and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not demo.state_holder.session_data
    finally:
        demo.close()


# ----------------------------------------------------------------------------- 3: disk


def _session(store, created: datetime.datetime, steps: int = 3) -> str:
    from engine.trace import Step, StepKind
    from storage import NewSession, new_share_id
    from storage.models import SessionRow

    sid = new_share_id()
    trace = [Step(kind=StepKind.ACCEPT, round=i, positions=[i], tokens=[1], texts=["a"], p=[0.5], q=[0.5],
                  calls=float(i + 1), elapsed=0.0) for i in range(steps)]
    store.record_run(sid, "assd", {"k": 4, "model": "m"}, 0, trace,
                     session=NewSession(domain="text", model="m", text="x", spans={}))
    from sqlalchemy import update

    from storage import db

    with db.write_session(store.engine) as s:
        s.execute(update(SessionRow).where(SessionRow.share_id == sid).values(created_at=created))
    return sid


def check_retention(store) -> None:
    """Age first, then size (oldest first, never the newest hour), cascading to runs, steps and
    statistics; shared with tests/storage/test_storage_postgres.py."""
    from sqlalchemy import text

    from storage.retention import Retention, apply, bytes_used, plan

    now = datetime.datetime.now(datetime.UTC)
    old = [_session(store, now - datetime.timedelta(days=40 + i)) for i in range(3)]
    mid = [_session(store, now - datetime.timedelta(days=5 - i), steps=50) for i in range(3)]
    new = _session(store, now - datetime.timedelta(minutes=5), steps=50)
    assert bytes_used(store.engine) > 0
    # the library's default keeps everything
    assert plan(store.engine, Retention()).share_ids == []
    p = plan(store.engine, Retention(max_age_days=30))
    assert sorted(p.by_age) == sorted(old) and p.by_size == [] and p.sessions == 7
    assert len(store.list_sessions(100)) == 7  # a plan changes nothing
    # a size limit below the store: the oldest remaining go, never one younger than an hour
    p = plan(store.engine, Retention(max_age_days=30, max_bytes=1))
    assert p.by_size == mid  # oldest first
    apply(store.engine, Retention(max_age_days=30, max_bytes=1))
    assert [s.share_id for s in store.list_sessions(100)] == [new]
    with store.engine.connect() as c:  # runs, steps and statistics went with their sessions
        assert c.execute(text("SELECT count(*) FROM runs")).scalar() == 1
        assert c.execute(text("SELECT count(*) FROM steps")).scalar() == 50
        assert c.execute(text("SELECT count(*) FROM round_stats")).scalar() == 50


def test_retention_deletes_old_sessions_then_the_oldest_over_the_size(tmp_path):
    from storage import open_store

    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        check_retention(store)
    finally:
        store.close()


def test_pruning_beside_concurrent_writers_keeps_the_store_whole(tmp_path):
    from sqlalchemy import text

    from engine.trace import Step, StepKind
    from storage import NewSession, new_share_id, open_store
    from storage.retention import Retention, apply

    store = open_store(f"sqlite:///{tmp_path / 'w.db'}")
    now = datetime.datetime.now(datetime.UTC)
    for i in range(30):
        _session(store, now - datetime.timedelta(days=60 + i))
    errors, written = [], []

    def writer(w: int) -> None:
        try:
            for i in range(15):
                sid = new_share_id()
                trace = [Step(kind=StepKind.ACCEPT, round=0, positions=[0], tokens=[1], texts=["a"], p=[0.5],
                              q=[0.5], calls=1.0, elapsed=0.0)]
                store.record_run(
                    sid, "assd", {"k": w}, i, trace, session=NewSession(domain="text", model="m", text="x", spans={})
                )
                written.append(sid)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for _ in range(5):
        apply(store.engine, Retention(max_age_days=30))
    for t in threads:
        t.join(60)
    assert not errors, errors
    kept = {s.share_id for s in store.list_sessions(1000)}
    assert kept == set(written)  # every new session written whole, every old one gone
    with store.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM runs WHERE session_id NOT IN (SELECT id FROM sessions)")).scalar() == 0
        assert c.execute(text("SELECT count(*) FROM steps WHERE run_id NOT IN (SELECT id FROM runs)")).scalar() == 0
        assert c.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    store.close()


def test_retention_is_on_for_the_server_by_env_and_the_command_reports(tmp_path, monkeypatch, capsys):
    from storage import open_store
    from storage.retention import Retention, main

    monkeypatch.delenv("INFILL_RETENTION_DAYS", raising=False)
    monkeypatch.delenv("INFILL_RETENTION_MB", raising=False)
    assert Retention.from_env().active and Retention.from_env().max_age_days == 30
    monkeypatch.setenv("INFILL_RETENTION_DAYS", "0")
    monkeypatch.setenv("INFILL_RETENTION_MB", "0")
    assert not Retention.from_env().active
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = open_store(url)
    now = datetime.datetime.now(datetime.UTC)
    _session(store, now - datetime.timedelta(days=100))
    keep = _session(store, now)
    assert main(["--dry-run", "--max-age-days", "30", "--url", url]) == 0
    out = capsys.readouterr().out
    assert "2 sessions" in out and "would delete: 1 sessions older" in out
    assert len(store.list_sessions(10)) == 2
    main(["--max-age-days", "30", "--url", url])
    assert [s.share_id for s in store.list_sessions(10)] == [keep]
    store.close()


def test_the_server_starts_the_pruner_and_the_library_does_not(monkeypatch):
    import app as app_pkg
    from storage import retention

    started = []
    monkeypatch.setattr(retention.Pruner, "start", lambda self: started.append(self.policy) or self)
    monkeypatch.setattr(app_pkg, "create", lambda: SimpleNamespace(launch=lambda **kw: kw))
    monkeypatch.delenv("INFILL_RETENTION_DAYS", raising=False)
    app_pkg.serve("127.0.0.1", 0)
    assert started and started[0].active
    # opening a store (the library) prunes nothing on its own: no policy, no thread
    assert not retention.Retention().active


def test_one_csv_file_per_filter_a_minute(studio, tmp_path, monkeypatch):
    import tempfile

    from app.serving import limits
    from app.stored import exports

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(exports, "_cached", OrderedDict())
    now = [0.0]
    made = []

    def text():
        made.append(1)
        return f"model,runs\nm,{len(made)}\n"  # the statistics change with every stored run

    paths = {exports.cached_export(("stats", None), "s", text, clock=lambda: now[0]) for _ in range(20)}
    assert len(paths) == 1 and len(made) == 1  # 20 downloads within a minute: one file, one query
    now[0] = exports.EXPORT_TTL + 1
    assert exports.cached_export(("stats", None), "s", text, clock=lambda: now[0]) not in paths
    assert exports.cached_export(("stats", "text"), "s", text, clock=lambda: now[0])  # another filter
    assert len(made) == 3
    # the Statistics tab goes through it: a new run between two downloads, the same file
    from app.tabs import statistics

    monkeypatch.setattr(exports, "_cached", OrderedDict())
    store = studio
    sid = store.create_session("text", "text-asarm", "x", {})
    paths = set()
    for i in range(3):
        store.record_run(sid, "assd", {"k": i, "model": "text-asarm"}, 0, [])  # new statistics every call
        paths.add(statistics.stats("all", "all", "all")["csv_btn"]["value"])
    assert len(paths) == 1
    # Gradio's cache (where each served file is copied) is pruned every few minutes, not hourly
    freq, age = limits.DELETE_CACHE
    assert freq <= 300 and age <= 600
