"""A Compare share link shows the figures the sender saw: the live summary's compute seconds (each
side's time inside its sampler; the sides alternate, so a side's wall time counts the other's
rounds) are stored with each run, and the link's summary is built from them under the same
column name. A comparison stored before they were kept still opens, with its wall seconds named so."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.stored import store as app_store
from app.tabs import compare, sessions
from tests.support.studio import form, tiny_studio

TEXT = "The cat [MASK:12] mat."


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("share-seconds")) as st:
        yield st


def _compared(seed: int) -> tuple[str, dict]:
    """A comparison run to its end as the page runs it: its share id and the live summary."""
    sid, (a, b) = compare.pair(form(text=TEXT, sampler="assd", k=6, seed=seed),
                               form(text=TEXT, sampler="sequential", seed=seed), "share-seconds")
    for _ in compare._alternate(a, b, sid):
        pass
    return sid, compare._summary([("A", a), ("B", b)])


def test_the_link_shows_the_live_summary(studio):
    sid, live = _compared(5)
    shown = sessions.restore_values(sid)["compare"]
    assert live["headers"][7] == "compute seconds"
    assert shown["summary"] == live  # same column names, same figures
    runs = app_store.store().get_session(sid).runs
    assert all(r.compute_seconds is not None and 0 < r.compute_seconds <= r.wall_seconds for r in runs)
    assert f"**seconds** {runs[0].compute_seconds:.2f}" in shown["ca"]  # the counters agree with the table


def test_a_comparison_stored_before_compute_seconds_were_kept_still_opens(studio):
    sid, _ = _compared(6)
    with app_store.store().engine.begin() as conn:  # as migration 0004 leaves an older run
        conn.execute(sa.text("UPDATE runs SET compute_seconds = NULL"))
    shown = sessions.restore_values(sid)["compare"]
    runs = app_store.store().get_session(sid).runs
    assert shown["summary"]["headers"][7] == "wall seconds (sides alternating)"
    assert [row[7] for row in shown["summary"]["data"]] == [f"{r.wall_seconds:.2f}" for r in runs]
    assert sessions.WALL_NOTE in shown["ca"]
