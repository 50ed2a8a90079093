"""Stop works from the first moment a run is accepted: queued for a compute slot, or computing
its first round (drafting), before any round has been shown."""

from __future__ import annotations

import threading

import pytest

from app import store as app_store
from app.serving import slots as slots_mod
from app.tabs import compare, player
from tests.support.studio import form, tiny_studio

TEXT = "The cat [MASK:30] mat."


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("stop")) as st:
        yield st


def _drafting(monkeypatch):
    """Hold every run at its first network pass until released: a first round that takes long."""
    reached, release = threading.Event(), threading.Event()
    real = slots_mod.Turns.preempt

    def preempt(self):
        reached.set()
        release.wait(60)
        return real(self)

    monkeypatch.setattr(slots_mod.Turns, "preempt", preempt)
    return reached, release


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
    monkeypatch.setattr("app.streaming.slots", lambda: one)
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
