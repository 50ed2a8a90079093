"""A comparison is stored whole or not at all: the session and both sides in one transaction once
both have ended (storage.recorder.RunGroup), a failed or stopped side with its status."""

from __future__ import annotations

import pytest

from app.stored import store as app_store
from app.tabs import compare
from tests.support.studio import form, tiny_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("atomic")) as st:
        yield st


def test_nothing_is_stored_until_both_sides_have_ended(studio):
    text = "The cat [MASK:12] mat."
    sid, (a, b) = compare.pair(form(text=text, sampler="assd", k=6, seed=11),
                               form(text=text, sampler="sequential", seed=12), "v1")
    frames = compare._alternate(a, b, sid)
    while not a.done:  # assd (6 tokens a round) ends well before sequential (one a round)
        next(frames)
    assert not b.done
    assert app_store.store().get_session(sid) is None  # A has ended, alone it is not stored
    for _ in frames:
        pass
    runs = app_store.store().get_session(sid).runs
    assert [r.sampler for r in runs] == ["assd", "sequential"] and [r.status for r in runs] == ["ok", "ok"]
    assert (a.run_id, b.run_id) == (runs[0].id, runs[1].id)
    # each side with its own seed and its own result, as it ended
    assert [r.seed for r in runs] == [a.run.seed, b.run.seed] == [11, 12]
    assert [(r.completed_text, r.masked_tokens, r.logprob, r.wall_seconds) for r in runs] == [
        (lv.result.text, lv.result.masked_tokens, lv.result.log_prob, lv.result.seconds) for lv in (a, b)]
    assert runs[0].completed_text.startswith("The cat ") and runs[0].masked_tokens == 12


def test_a_failed_side_is_stored_with_its_status_beside_the_other(studio, monkeypatch):
    text = "The cat [MASK:12] mat."
    sid, (a, b) = compare.pair(form(text=text, sampler="assd"), form(text=text, sampler="sequential"), "v2")
    real = b.run.stream

    def breaks():
        for i, step in enumerate(real()):
            if i == 3:
                raise RuntimeError("side B broke")
            yield step

    monkeypatch.setattr(b.run, "stream", breaks)
    with pytest.raises(RuntimeError, match="side B broke"):
        for _ in compare._alternate(a, b, sid):
            pass
    runs = app_store.store().get_session(sid).runs
    assert len(runs) == 2 and runs[1].status == "failed" and "side B broke" in runs[1].error
    assert runs[0].status in ("ok", "cancelled")


def test_a_visitor_leaving_stores_both_partial_sides_together(studio):
    text = "The cat [MASK:20] mat."
    sid, (a, b) = compare.pair(form(text=text, sampler="sequential"), form(text=text, sampler="sequential"), "v3")
    frames = compare._alternate(a, b, sid)
    next(frames)
    frames.close()  # the stream broke off (a disconnect)
    runs = app_store.store().get_session(sid).runs
    assert [r.status for r in runs] == ["cancelled", "cancelled"]


def test_a_side_that_stored_nothing_leaves_nothing(studio):
    from storage.recorder import RunGroup

    st = app_store.store()
    sid, _ = compare.pair(form(), form(sampler="sequential"), "v4")
    group = RunGroup(store=st, share_id=sid, sides=2)
    with group.recorder(0, "assd", {"k": 4}, 1) as rec:
        rec.finish(completed_text="x")
    with group.recorder(1, "sequential", {}, 1) as rec:
        rec.discard()  # cancelled before it computed anything
    assert group.commit() is None and st.get_session(sid) is None


def test_a_half_comparison_stored_before_says_its_other_side_is_missing(studio):
    """A comparison stored with one run (what the code before RunGroup could leave after a kill)."""
    from app.serving.pending_sessions import pending_session
    from app.tabs import sessions

    sid, (a, _) = compare.pair(form(), form(sampler="sequential"), "v5")
    with app_store.store().recorder(sid, "assd", {"k": 4, "model": "text-asarm"}, 3,
                                    session=pending_session(sid)) as rec:
        for step in a.run.stream():
            rec.add(step)
        rec.finish(completed_text="x")
    v = sessions.restore_values(sid)
    assert "only one side" in v["status"] and v["compare"] is None
