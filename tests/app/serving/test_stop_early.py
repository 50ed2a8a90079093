"""Stop works from the first moment a run is accepted: queued for a compute slot, or computing
its first round (drafting), before any round has been shown."""

from __future__ import annotations

import threading
import time

import pytest

from app.serving import slots as slots_mod
from app.serving import stops
from app.stored import store as app_store
from app.tabs import compare, player
from tests.support.hold import hold
from tests.support.studio import form, run_to_round, tiny_studio

TEXT = "The cat [MASK:30] mat."


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("stop")) as st:
        yield st


def _drafting(monkeypatch):
    """Hold every run at its first network pass until released: a first round that takes long."""
    return hold(monkeypatch, slots_mod.Turns, "preempt")


def _frames_in_thread(gen):
    frames: list[dict] = []
    t = threading.Thread(target=lambda: frames.extend(gen), daemon=True)
    t.start()
    return frames, t


def _announced(frames: list[dict], key: str) -> str:
    return next((f[key] for f in list(frames) if f.get(key)), "")


def test_stop_while_the_first_round_computes_stops_the_run(studio, monkeypatch):
    reached, release = _drafting(monkeypatch)
    frames, t = _frames_in_thread(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 5, 32, 0.05,
                                                    "cosine", 1))
    assert reached.wait(60)  # the run was accepted and computes its first round
    sid = _announced(frames, "run_sid")
    assert sid, "the run's share id reaches the page before its first round"
    out = player.stop_run(sid)
    release.set()
    t.join(60)
    assert "Nothing is running" not in out["status"]
    assert not any("Done" in str(f.get("status", "")) for f in frames)  # it did not go on to the end
    # it stopped inside its first round, at the next network pass: nothing was shown, nothing is kept
    assert app_store.store().get_session(sid) is None


def test_stop_while_queued_for_a_slot_stops_the_run(studio, monkeypatch):
    one = slots_mod.Slots(1)
    monkeypatch.setattr("app.run.streaming.slots", lambda: one)
    one.acquire((0, 0))  # another run holds the only slot
    try:
        frames, t = _frames_in_thread(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 6, 32, 0.05,
                                                        "cosine", 1))
        while not _announced(frames, "run_sid"):
            t.join(0.05)
        sid = _announced(frames, "run_sid")
        player.stop_run(sid)
        t.join(60)
        assert not t.is_alive()  # it left the line without waiting for the slot
    finally:
        one.release()
    assert not any("Done" in str(f.get("status", "")) for f in frames)
    assert app_store.store().get_session(sid) is None  # nothing computed, nothing stored


def test_compare_stop_while_the_first_round_computes_stops_both(studio, monkeypatch):
    reached, release = _drafting(monkeypatch)
    sid, (a, b) = compare.pair(form(text=TEXT, sampler="sequential"), form(text=TEXT, sampler="assd"), "v")
    frames, t = _frames_in_thread(compare._alternate(a, b, sid))
    assert reached.wait(60)
    compare.stop_compare(sid)
    release.set()
    t.join(60)
    assert not t.is_alive()
    assert not (a.result or b.result)  # neither went on to the end
    assert a.cancelled and not a.steps  # stopped in its first round: nothing shown, so nothing kept
    assert app_store.store().get_session(sid) is None  # and no half comparison either


def test_stop_before_the_first_round_answers_at_once_and_repeats_are_instant(studio, monkeypatch):
    """Stop answers from the run's own state: before the first round it does not wait for a stored
    run (there will be none; the store used to be polled for 10 s per press, issue 48), it clears
    the page's run id, and pressing it again, or for a made-up id, answers at once as well."""
    reached, release = _drafting(monkeypatch)
    frames, t = _frames_in_thread(player.run_infill("text", "text-asarm", TEXT, "sequential", 4, 1.0, 7, 32, 0.05,
                                                    "cosine", 1))
    assert reached.wait(60)
    sid = _announced(frames, "run_sid")
    t0 = time.perf_counter()
    out = player.stop_run(sid)
    took = time.perf_counter() - t0
    assert took < 0.5, took
    assert "before the first round" in out["status"] and out["run_sid"] == ""
    again = time.perf_counter()
    for _ in range(20):  # the page's repeats, or a script's
        assert "before the first round" in player.stop_run(sid)["status"]
    release.set()
    t.join(60)
    assert not t.is_alive()
    t1 = time.perf_counter()
    assert "nothing" in player.stop_run(sid)["status"]  # the ended run, still known: nothing stored
    assert "Nothing is running" in player.stop_run("made-up-id")["status"]
    assert time.perf_counter() - t1 + (t1 - again) < 0.5
    assert not stops.stop_requested("made-up-id")  # an unknown id leaves nothing behind
    assert app_store.store().get_session(sid) is None


def test_stop_after_a_round_answers_with_the_stored_partial_run(studio):
    """After a round was shown, Stop waits for the round in progress (the run's own event, not the
    store) and shows the run stored as cancelled with the rounds shown."""
    gen, frames = run_to_round(2)
    sid = _announced(frames, "run_sid")
    t = threading.Thread(target=lambda: frames.extend(gen), daemon=True)  # the stream goes on, as on the page
    t0 = time.perf_counter()
    t.start()
    out = player.stop_run(sid)
    assert time.perf_counter() - t0 < player.STOP_WAIT + 0.5
    t.join(60)
    assert "Stopped after" in out["status"] and "?s=" in out["link"] and out["run_sid"] == ""
    runs = app_store.store().get_session(sid).runs
    assert [r.status for r in runs] == ["cancelled"] and out["trace_state"] is not None
    assert len(runs[0].steps) == out["scrub_sl"]["value"]


def test_stop_while_watch_replays_a_one_round_run_shows_it_complete(studio, monkeypatch):
    """A run of one round that finished computing is replayed at the Watch pace: Stop then ends the
    replay and shows the run stored complete (not "nothing is stored": it never had a second round)."""
    from app.tabs import watch

    monkeypatch.setattr(watch, "WATCH_RATE", 0.5)  # a slow replay: Stop arrives during it
    frames, t = _frames_in_thread(player.run_infill("text", "text-asarm", "The cat [MASK:1] mat.", "sequential", 4,
                                                    1.0, 9, 32, 0.05, "cosine", 1, watch=True))
    deadline = time.monotonic() + 60
    while not any("Watching" in str(f.get("status", "")) for f in list(frames)) and time.monotonic() < deadline:
        time.sleep(0.02)
    sid = _announced(frames, "run_sid")
    out = player.stop_run(sid)
    t.join(60)
    assert "finished computing before Stop arrived" in out["status"] and out["completed"]
    assert [r.status for r in app_store.store().get_session(sid).runs] == ["ok"]


def test_compare_stopped_before_its_first_round_says_so_and_shows_nothing(studio, monkeypatch):
    """Compare's own last frame after a Stop before the first rounds (issue 49): it says nothing was
    stored and empties both sides and the link (no "Comparing…" left, nothing of an earlier comparison)."""
    reached, release = _drafting(monkeypatch)
    frames, t = _frames_in_thread(compare.run_compare("text", "text-asarm", TEXT, "sequential", 4, 1.0, 6, 32, 0.05,
                                                      "cosine", 1, "assd", "text-asarm"))
    assert reached.wait(60)
    sid = _announced(frames, "cmp_sid")
    assert sid and "" == frames[0].get("html_a", "") and frames[0]["cmp_link"] == ""
    compare.stop_compare(sid)
    release.set()
    t.join(60)
    last = frames[-1]
    assert "Stopped before the first round" in last["cmp_status"] and "nothing was stored" in last["cmp_status"]
    assert last["html_a"] == last["html_b"] == last["cmp_link"] == "" and last["cmp_sid"] == ""
    assert app_store.store().get_session(sid) is None
