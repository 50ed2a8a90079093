"""A public demo that one visitor cannot take down (issue 14): one test per failure the probe found.

1 body size bounded before parsing, 2 per-run budget, 3 no uploads, 4 /stats exports bounded,
5 exact 64-bit seeds, 6 the load test's accounting, 7 lone surrogates, 8 session and run in one
transaction and cancelled queued jobs leave nothing. The server-level checks (1, 3) run the app
in a child process, as it is deployed."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path

import pytest

from app import errors
from app.run import streaming
from app.run.form import prepare
from app.stored import store as app_store
from engine.budget import Budget, BudgetExceededError
from engine.errors import BadParameterError, UnrepresentableTextError
from tests.support.studio import TEXT, form, tiny_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """Tiny random models (every printable character is a token) and a temp store."""
    with tiny_studio(tmp_path_factory.mktemp("harden")) as store:
        yield store


_form = form


def _run_all(live):
    for _ in streaming.rounds(live):
        pass
    return live


# ----------------------------------------------------------------------------- 1 + 3: the server


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _post(port: int, path: str, body_chunks, headers: dict) -> int | None:
    """POST, tolerating a server that answers and closes before the whole body is sent."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest("POST", path)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        try:
            for chunk in body_chunks:
                conn.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            return conn.getresponse().status
        except (ConnectionResetError, http.client.RemoteDisconnected):
            return None
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("gradio")
    from tools.loadtest import start_server, stop_server

    root = tmp_path_factory.mktemp("server")
    proc, url = start_server({"DATABASE_URL": f"sqlite:///{root / 'studio.db'}"})
    yield proc, int(url.rstrip("/").rsplit(":", 1)[1])
    stop_server(proc)


def test_20_mb_bodies_are_refused_before_parsing_and_memory_stays_put(server):
    proc, port = server
    big = 20 * 2**20
    payload_head = b'{"data": ["text", "text-asarm", "'
    # a declared 20 MB body: refused from its headers alone, before one byte of it is read
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", "/gradio_api/queue/join")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(big))
    conn.endheaders()
    assert conn.getresponse().status == 413
    conn.close()

    rss0 = _rss_kib(proc.pid)
    chunk = b"a" * 2**16

    def body():
        yield payload_head
        for _ in range(big // len(chunk)):
            yield chunk

    statuses = []
    for _ in range(5):  # chunked: no length declared, so it is counted as it streams and cut off
        statuses.append(_post_chunked(port, body()))
    time.sleep(1)
    rss1 = _rss_kib(proc.pid)
    print(f"server RSS before {rss0 / 1024:.0f} MiB, after 5 x 20 MB chunked bodies {rss1 / 1024:.0f} MiB")
    assert all(s in (413, None) for s in statuses), statuses
    assert 413 in statuses
    assert rss1 - rss0 < 30 * 1024, (rss0, rss1)  # Gradio parsing them grew it by ~30 MB per body


def _post_chunked(port: int, chunks) -> int | None:
    def framed():
        for c in chunks:
            yield f"{len(c):x}\r\n".encode() + c + b"\r\n"
        yield b"0\r\n\r\n"

    return _post(port, "/gradio_api/queue/join", framed(),
                 {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})


def test_a_legitimate_longest_input_still_fits(server):
    """The limit is sized for the largest legitimate request: 20,000 characters, each as a
    JSON-escaped surrogate pair, passes the limit (Gradio then answers it normally)."""
    _, port = server
    from app.run.inputs import MAX_INPUT_CHARS

    text = "\U0001F600" * MAX_INPUT_CHARS
    body = json.dumps({"data": ["text", "text-asarm", text, "assd", 5, 1, 0, 32, 0.05, "cosine", 1],
                       "fn_index": 0, "session_hash": "abcdefgh"}).encode()
    assert len(body) > 200_000
    assert _post(port, "/gradio_api/queue/join", [body],
                 {"Content-Type": "application/json", "Content-Length": str(len(body))}) not in (413, None)


def test_uploads_are_refused(server):
    _, port = server
    body = b"--b\r\nContent-Disposition: form-data; name=\"files\"; filename=\"x.txt\"\r\n\r\nhello\r\n--b--\r\n"
    status = _post(port, "/gradio_api/upload", [body],
                   {"Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(len(body))})
    assert status == 403


# ----------------------------------------------------------------------------- 2: budgets


def test_budget_stops_a_run_inside_its_first_step_and_keeps_the_steps(studio, tiny_asarm):
    from engine.api import InfillRun

    # every network pass is a checkpoint: with no time at all the run stops before its first step
    run = InfillRun("ab[MASK:3]a", model=str(tiny_asarm.path), sampler="sequential", budget=Budget(max_seconds=1e-9))
    with pytest.raises(BudgetExceededError, match="budget"):
        list(run.stream())
    assert run.trace == []
    # a call budget stops it part way; the steps so far stay in the trace
    run = InfillRun("[MASK:5]a", model=str(tiny_asarm.path), sampler="sequential", budget=Budget(max_calls=2))
    with pytest.raises(BudgetExceededError, match="2 per run"):
        list(run.stream())
    assert 0 < len(run.trace) and run.trace[-1].calls <= 3
    # without a budget (library, CLI) the same run completes
    run = InfillRun("[MASK:5]a", model=str(tiny_asarm.path), sampler="sequential")
    list(run.stream())
    assert len(run.result().tokens) == 6


def test_app_run_over_budget_is_stored_as_stopped(studio, monkeypatch):
    monkeypatch.setenv("INFILL_RUN_MAX_CALLS", "3")
    live = streaming.start(_form(sampler="sequential"))
    with pytest.raises(BudgetExceededError) as ei:
        _run_all(live)
    assert "budget" in errors.readable(ei.value)
    sess = app_store.store().get_session(live.share_id)
    assert sess is not None and [r.status for r in sess.runs] == ["stopped"]
    assert sess.runs[0].steps and "budget" in sess.runs[0].error


def test_parameter_limits_scale_with_the_input():
    b = Budget()
    b.check_params(8, {"steps": 64, "inner": 4})  # the usual settings on a short input
    with pytest.raises(BadParameterError, match="at most 64 steps"):
        b.check_params(8, {"steps": 65, "inner": 1})
    b.check_params(250, {"steps": 1000, "inner": 4})  # long inputs may take more
    with pytest.raises(BadParameterError, match="steps x inner"):
        b.check_params(250, {"steps": 512, "inner": 64})  # the probe's ~30-minute run
    b.check_params(8, {"k": 64})  # AS-ARM samplers have no steps


def test_budget_defaults_and_env(monkeypatch):
    monkeypatch.delenv("INFILL_RUN_MAX_SECONDS", raising=False)
    monkeypatch.delenv("INFILL_RUN_MAX_CALLS", raising=False)
    assert Budget.from_env() == Budget(20.0, 1024.0)
    monkeypatch.setenv("INFILL_RUN_MAX_SECONDS", "0")
    monkeypatch.setenv("INFILL_RUN_MAX_CALLS", "50")
    assert Budget.from_env() == Budget(None, 50.0)


def test_slots_go_to_the_lightest_waiting_run_first():
    from app.serving.slots import Slots

    s = Slots(1)
    s.acquire((0, 0))
    order = []

    def waiter(prio):
        s.acquire(prio)
        order.append(prio)
        s.release()

    threads = []
    for prio in [(3, 1), (1, 2), (0, 9)]:  # a long run, a medium one, a newly arrived small one
        t = threading.Thread(target=waiter, args=(prio,), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(0.05)
    assert s.better_waiting((1, 0))
    s.release()
    for t in threads:
        t.join(10)
    assert order == [(0, 9), (1, 2), (3, 1)]


# ----------------------------------------------------------------------------- 4: /stats files


def test_stats_exports_do_not_pile_up(studio, tmp_path, monkeypatch):
    import tempfile

    from app.stored import exports
    from app.tabs import statistics

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = studio
    sid = store.create_session("text", "text-asarm", "x", {})
    for i in range(3 * exports.KEEP):
        store.record_run(sid, "assd", {"k": i, "model": "text-asarm"}, 0, [])  # new statistics every call
        out = statistics.stats("all", "all", "all")
        path = out["csv_btn"]["value"]
        assert Path(path).is_file() and Path(path).read_text().count("\n") >= 2
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) <= exports.KEEP, len(files)


# ----------------------------------------------------------------------------- 5: seeds


def test_seeds_use_all_64_bits():
    import torch

    from engine.seeding import SEED_MAX, generator_for, mt_words

    seeds = [0, 1, 2**32 - 1, 2**32, 2**32 + 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, SEED_MAX]
    draws = {s: tuple(torch.randint(0, 2**62, (4,), generator=generator_for(s)).tolist()) for s in seeds}
    assert len(set(draws.values())) == len(seeds)  # 0 and 2**32 used to give the same run
    assert generator_for(2**32).initial_seed() == 2**32
    assert torch.equal(torch.rand(5, generator=generator_for(7)), torch.rand(5, generator=torch.Generator().manual_seed(7)))
    # by construction: words 1-2 are a bijection of the seed, word 3 never follows init_genrand
    w = mt_words(2**40 + 5)
    assert (w[2] << 32 | w[1]) != (mt_words(2**40 + 6)[2] << 32 | mt_words(2**40 + 6)[1])
    with pytest.raises(ValueError):
        generator_for(2**64)


def test_app_takes_the_documented_seed_range_exactly(studio):
    for seed in (2**53 + 1, 2**63 - 1, 2**64 - 1, str(2**64 - 1)):
        assert prepare(_form(seed=seed)).seed == int(seed)
    for bad in (2**64, -1, 2.0**60, "12abc", 1.5, "1e3", "-0", " 7 ", "+7", "7.0", "", True):
        with pytest.raises(BadParameterError, match="seed"):
            prepare(_form(seed=bad))
    # one rule in every form (issue 48): JSON 1000.0 is refused as "7.0" is, with the same sentence
    for bad in (7.0, 1000.0, "7.0", "1000.0"):
        with pytest.raises(BadParameterError, match=r"seed must be a whole number from 0 to .*digits only; got"):
            prepare(_form(seed=bad))
    live = _run_all(streaming.start(_form(seed=2**64 - 1)))
    assert app_store.store().get_run(live.run_id).seed == 2**64 - 1
    a = _run_all(streaming.start(_form(text="[MASK:40]", sampler="sequential", seed=0)))
    b = _run_all(streaming.start(_form(text="[MASK:40]", sampler="sequential", seed=2**32)))
    assert a.result.tokens != b.result.tokens


def test_a_knob_the_sampler_does_not_read_is_refused_outside_its_range(studio):
    """Issue 48: steps=-1 and inner=1e6 ran silently under assd. The page sends every knob (hidden
    ones in range), so an unread knob in range is ignored; out of range or malformed it is refused."""
    for name, bad in (("steps", -1), ("inner", 10**6), ("k", 100), ("steps", "many")):
        with pytest.raises(BadParameterError, match=name):
            prepare(_form(sampler="sequential" if name == "k" else "assd", **{name: bad}))
    with pytest.raises(BadParameterError, match="does not read steps"):
        prepare(_form(sampler="assd", steps=-1))
    assert prepare(_form(sampler="assd", steps=64, inner=2)).spec.name == "assd"  # in range: ignored


def test_the_exactness_check_takes_seeds_by_the_same_rule(studio):
    from app.tabs import exactness

    for bad in (7.0, "7.0", 7.5):
        with pytest.raises(BadParameterError, match="seed must be"):
            exactness.prepare("a[MASK:2]", "text-asarm", ["assd"], 10, bad, 1.0, 2)


# ----------------------------------------------------------------------------- 6: load test


def test_loadtest_counts_failed_runs_as_errors_and_bounds_waits(studio, capsys, monkeypatch):
    from app.serving import admission as adm
    from tools import loadtest
    from tools.tiny_models import launch_for_tests

    # every simulated visitor is on the loopback: one address (the load test's own server lifts the
    # per-address limits the same way, tools.loadtest.ONE_ADDRESS_MANY_VISITORS)
    monkeypatch.setattr(adm, "_admission", adm.Admission(adm.active_runs(), adm.long_run_line(), 100_000))

    assert loadtest.classify(["⚠️ No [MASK] in the input", "", "", "", "", ""])[0] == "error"
    assert loadtest.classify(["✅ Done: 3 tokens", "", "", "", "abc", ""])[0] == "ok"
    assert loadtest.classify(["⚠️ Stopped: ... budget of 20 s", "", "", "", "", ""])[0] == "stopped"
    demo, url = launch_for_tests()
    try:
        assert loadtest.main(["--clients", "2", "--text", "no mask here", "--url", url, "--timeout", "60"]) == 1
        assert "no run served" in capsys.readouterr().out
        assert loadtest.main(["--clients", "2", "--sampler", "nope", "--url", url, "--timeout", "60"]) == 1
        t0 = time.monotonic()  # every wait is bounded: a visitor gives up after --timeout
        assert loadtest.main(["--clients", "1", "--text", "[MASK:100]", "--sampler", "sequential", "--url", url,
                              "--timeout", "0.05"]) == 1
        assert time.monotonic() - t0 < 120
        assert loadtest.main(["--clients", "2", "--text", TEXT, "--sampler", "assd", "--url", url]) == 0
        out = capsys.readouterr().out
        assert "2/2 served, 0 errors" in out and "connecting" in out
    finally:
        demo.close()


# ----------------------------------------------------------------------------- 7: lone surrogates


def test_lone_surrogate_gets_the_documented_message(studio):
    from app.tabs.player import run_infill
    from engine.api import InfillRun

    with pytest.raises(UnrepresentableTextError, match="cannot represent"):
        InfillRun("a \ud800 b [MASK:3]", model="text-asarm", sampler="assd")
    with pytest.raises(UnrepresentableTextError):
        prepare(_form(text="a \ud800 b [MASK:3]"))
    first = next(run_infill("text", "text-asarm", "a \ud800 b [MASK:3]", "assd", 4, 1.0, 0, 32, 0.05, "cosine", 1))
    assert "cannot represent" in first["status"] and "TypeError" not in first["status"]


# ----------------------------------------------------------------------------- 8: transactions, cancels


def test_a_run_killed_mid_write_leaves_no_session(studio, monkeypatch):
    from storage import repository

    before = len(app_store.store().list_sessions(1000))

    class Boom:
        class __table__:  # noqa: N801 - stands in for RankStatRow.__table__
            @staticmethod
            def insert():
                raise RuntimeError("killed mid-write")

    live = streaming.start(_form())
    monkeypatch.setattr(repository, "RankStatRow", Boom)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        _run_all(live)
    monkeypatch.undo()
    assert app_store.store().get_session(live.share_id) is None
    assert len(app_store.store().list_sessions(1000)) == before
    assert not any(s.run_count == 0 for s in app_store.store().list_sessions(1000))


def test_a_job_cancelled_while_waiting_for_a_slot_leaves_nothing(studio, monkeypatch):
    from app.serving import cancels, slots

    one = slots.Slots(1)
    monkeypatch.setattr(streaming, "slots", lambda: one)
    one.acquire((0, 0))  # another run holds the only slot
    live = streaming.start(_form(), owner="visitor-1")
    done = threading.Event()
    t = threading.Thread(target=lambda: (_run_all(live), done.set()), daemon=True)
    t.start()
    time.sleep(0.3)
    assert not done.is_set()  # queued
    cancels.note_cancel("visitor-1")
    t.join(30)
    one.release()
    assert done.is_set() and live.cancelled and not live.steps
    assert app_store.store().get_session(live.share_id) is None
    # a run that was under way when stopped is still stored as cancelled with its steps
    live = streaming.start(_form(text="[MASK:30]", sampler="sequential"), owner="visitor-2")
    it = streaming.rounds(live)
    next(it)
    it.close()
    runs = app_store.store().get_session(live.share_id).runs
    assert [r.status for r in runs] == ["cancelled"] and runs[0].steps


def test_a_cancel_of_a_replay_is_no_cancel_of_the_visitors_run():
    """Run, Pause and the step buttons cancel the player's replay events (play_page, replay_page); such a
    /cancel must not call off the run the same click starts. A cancel of any other event, or one whose
    event cannot be told, still counts as the visitor's."""
    from types import SimpleNamespace

    from app.serving import cancels, limits

    fns = {3: SimpleNamespace(api_name="play_page"), 4: SimpleNamespace(api_name="replay_page"),
           5: SimpleNamespace(api_name="run_page")}
    scope = {"path": "/gradio_api/cancel", "app": SimpleNamespace(get_blocks=lambda: SimpleNamespace(fns=fns))}
    t0 = time.monotonic()
    for fn_index, who in ((3, "v-play"), (4, "v-replay"), (5, "v-run"), (99, "v-unknown"), ("x", "v-bad")):
        limits._note_session(scope, {"session_hash": who, "fn_index": fn_index, "event_id": "e"}, b"{}")
    assert not cancels.cancelled_since("v-play", t0) and not cancels.cancelled_since("v-replay", t0)
    assert cancels.cancelled_since("v-run", t0) and cancels.cancelled_since("v-unknown", t0)
    assert cancels.cancelled_since("v-bad", t0)


def test_the_replay_events_are_the_players():
    """REPLAY_EVENTS names the page's own play and replay events (a rename would quietly undo the rule)."""
    from app import create
    from app.serving.limits import REPLAY_EVENTS

    assert REPLAY_EVENTS <= {f.api_name for f in create().fns.values()}
