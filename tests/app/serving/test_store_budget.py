"""The store is bounded at every moment (app.serving.store_budget): each address has an hourly write
budget, and the whole store refuses new runs, with one sentence and before any work, once its size
and the reserve of the runs in progress reach the cap or the disk runs low."""

from __future__ import annotations

import pytest

from app.run import streaming
from app.serving import store_budget as sb
from engine.errors import InfillError
from tests.support.studio import form, tiny_studio

KB = 1024


def test_an_address_over_its_hourly_budget_is_refused_and_others_are_not():
    b = sb.StoreBudget(size_of=lambda: 0, per_address_mb=1.0)
    for _ in range(4):  # 300 kB a run: the fourth still starts (900 kB stored), then the budget is spent
        b.admit("10.0.0.1")
        b.charge("10.0.0.1", 300 * KB)
    with pytest.raises(sb.StoreFull, match="in the last hour"):
        b.admit("10.0.0.1")
    assert isinstance(sb.StoreFull("x"), InfillError)  # the page shows it as the run's message
    b.admit("10.0.0.2")  # another visitor's runs are still stored


def test_the_store_refuses_new_runs_before_the_cap_counting_the_runs_in_progress(monkeypatch):
    monkeypatch.setattr(sb, "RUN_RESERVE_BYTES", 100 * KB)
    size = [0]
    b = sb.StoreBudget(size_of=lambda: size[0], cap_mb=1.0)
    for _ in range(10):  # 10 in progress reserve 1000 kB; an eleventh would pass 1 MiB (1024 kB)
        b.admit("10.0.0.1")
    with pytest.raises(sb.StoreFull, match="store is full"):
        b.admit("10.0.0.2")
    b.release()  # one ended without storing: room again
    b.admit("10.0.0.2")
    for _ in range(11):
        b.release()
    b.charge("10.0.0.3", 950 * KB)  # what was charged counts before the next measurement
    with pytest.raises(sb.StoreFull):
        b.admit("10.0.0.4")


def test_runs_admitted_at_once_cannot_all_take_the_last_room(monkeypatch):
    """The check and the reserve are one step: eight runs arriving together while the store is
    measured (slowly) get the one reserve's room between them, not eight."""
    import threading
    import time

    monkeypatch.setattr(sb, "RUN_RESERVE_BYTES", 600 * KB)

    def slow_size():
        time.sleep(0.05)
        return 0

    b = sb.StoreBudget(size_of=slow_size, cap_mb=1.0)
    admitted, go = [], threading.Barrier(8)

    def one(i):
        go.wait()
        try:
            b.admit(f"10.0.0.{i}")
            admitted.append(i)
        except sb.StoreFull:
            pass

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 1


def test_a_disk_running_low_refuses_new_runs():
    b = sb.StoreBudget(size_of=lambda: 0, free_of=lambda: 100 * 2**20, min_free_mb=256)
    with pytest.raises(sb.StoreFull, match="store is full"):
        b.admit("10.0.0.1")


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("budget")) as st:
        yield st


def _run(address: str):
    live = streaming.start(form(text="The cat [MASK:8] mat.", sampler="assd"), address=address)
    for _ in streaming.rounds(live):
        pass
    return live


def test_one_address_writing_as_fast_as_it_can_is_stopped_and_others_are_still_stored(studio, monkeypatch):
    """The store-growth scenario in the app's own run path: one address runs until its budget
    (40 kB here) refuses it, before computing; the store grew by about the budget; another address's
    run is stored."""
    from storage.retention import bytes_used

    monkeypatch.setenv("INFILL_STORE_MB_PER_HOUR", str(40 / 1024))
    monkeypatch.setenv("INFILL_STORE_MAX_MB", "0")  # this test is about the address's budget
    monkeypatch.setattr(sb, "_budget", None)
    before = bytes_used(studio.engine)
    stored, refused = 0, None
    for _ in range(200):
        try:
            live = _run("10.0.0.1")
        except sb.StoreFull as e:
            refused = str(e)
            break
        stored += live.run_id is not None
    assert refused and "in the last hour" in refused and 1 < stored < 200
    with pytest.raises(sb.StoreFull):  # refused before any work: nothing is announced to the store
        _run("10.0.0.1")
    grew = bytes_used(studio.engine) - before
    assert grew < 40 * KB + 64 * KB, grew  # the budget, plus the last run and SQLite's page granularity
    other = _run("10.0.0.2")
    assert other.run_id is not None and studio.get_session(other.share_id) is not None


def test_a_full_store_refuses_every_new_run_with_one_sentence(studio, monkeypatch):
    from app.tabs import player
    from storage.retention import bytes_used

    monkeypatch.setattr(sb, "_budget", sb.StoreBudget(size_of=lambda: bytes_used(studio.engine),
                                                      cap_mb=bytes_used(studio.engine) / 2**20))
    frames = list(player.run_infill("text", "text-asarm", "The cat [MASK:8] mat.", "assd", 4, 1.0, 3, 32, 0.05,
                                    "cosine", 1))
    assert "store is full" in frames[-1]["status"] and not frames[-1]["link"]
