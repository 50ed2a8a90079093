"""The wait a new run is told about (app.serving.slots.Slots.estimate) follows the slots' own rules from
measured times: the runs that go first, each until it finishes or leaves the new run's level,
shared over the slots, plus about one turn."""

from __future__ import annotations

import threading
import time

import pytest

from app.serving.slots import LEVELS, Slots, Turns, estimate_wait


def test_a_free_slot_means_no_wait():
    est = Slots(2).estimate()
    assert (est.ahead, est.seconds, est.busy) == (0, 0.0, False)
    assert est.message() == ""


def test_the_estimate_counts_only_the_work_that_goes_first():
    # two slots; a new run (level 0) waits behind runs that computed 0.1 s and 0.3 s (both level 0:
    # they go first until they finish or reach 0.5 s), while a run of 1.0 s (level 1) waits behind it
    est = estimate_wait(2, True, 0, [0.1, 0.3], mean_run=1.0, mean_turn=0.05)
    # min(1.0, 0.5) - 0.1 = 0.4 and min(1.0, 0.5) - 0.3 = 0.2, over 2 slots, plus one turn
    assert est.ahead == 2
    assert est.seconds == pytest.approx(0.05 + (0.4 + 0.2) / 2)
    # short runs finish before their level ends: the mean run time bounds the work, not the level
    est = estimate_wait(1, True, 0, [0.0, 0.1], mean_run=0.2, mean_turn=0.0)
    assert est.seconds == pytest.approx(0.2 + 0.1)
    # a run past the last level waits for everything the runs ahead still have to do
    est = estimate_wait(1, True, len(LEVELS), [1.0], mean_run=20.0, mean_turn=0.0)
    assert est.seconds == pytest.approx(19.0)


def test_nothing_measured_yet_gives_no_seconds():
    est = estimate_wait(2, True, 0, [0.0], mean_run=None, mean_turn=0.0)
    assert est.ahead == 1 and est.seconds is None
    assert "1 run go" in est.message() and "about" not in est.message()


def _one_turn(t: Turns) -> None:
    with t.turn():
        pass


def test_the_slots_measure_runs_and_see_their_waiters():
    s = Slots(1)
    for t in (0.6, 1.0):  # two runs measured, mean 0.8 s of computing
        s.note_run(t)
    holder = Turns(s)
    with holder.turn():  # a fresh run computes on the only slot (level 0, attained 0)
        t0 = time.perf_counter()
        waiting = []
        for attained in (0.2, 3.0):  # a light run (level 0) and a heavy one (level 2) queue up
            w = Turns(s)
            w.attained = w.virtual = attained  # service as the priority counts it (no wait yet)
            th = threading.Thread(target=_one_turn, args=(w,), daemon=True)
            th.start()
            waiting.append(th)
        deadline = time.monotonic() + 5
        while len(s._waiters) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        est = s.estimate()
        # ahead of a new run: the holder (0.5 - 0) and the light waiter (0.5 - 0.2); not the heavy one
        assert est.ahead == 2 and est.busy
        assert est.seconds == pytest.approx(0.5 + 0.3, abs=1e-6)
        assert "2 runs go first" in est.message() and "about 0.8 s" in est.message()
        held = time.perf_counter() - t0  # the holder's turn lasted at least this long (timed here, outside Slots)
    for th in waiting:
        th.join(10)
    # every turn was measured, and the next estimate adds about one of them
    assert len(s._turns) == 3 and s.free == 1
    s.acquire((0, 0))
    est = s.estimate()
    assert est.ahead == 0 and est.busy and est.seconds == pytest.approx(sum(s._turns) / 3)
    # the turns were really measured: the holder's is at least what the test timed around it
    assert held > 0 and max(s._turns) >= held and est.seconds >= held / 3
