"""What stops what on the page, read from the built page's `cancels` wiring and from the handlers behind
it: every player control stops ▶ play and replay from start (Pause where it is, a step or Skip to end
from there), and Skip to end shows the stored run's last step; a person's domain switch stops the run,
the comparison and the playback in progress, server side as Stop does (the run stored as cancelled and
listed in this browser's sessions), so nothing of them lands beside the new domain's input; Stop the
check is enabled only while a check runs, as the main Stop is while a run streams."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.serving import stops
from app.stored import store as app_store
from app.tabs import compare, freshness, player, sessions
from app.tabs.common import STARTING, status_md
from tests.support.studio import run_to_round, tiny_studio

PLAYING = {"play_page", "replay_page"}


@pytest.fixture(scope="module")
def demo():
    from app import create

    return create()


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("stops")) as st:
        yield st


def _block_id(demo, key: str) -> int:
    """The id of the component with this elem_id (or, for the domain radio, which has none, this label)."""
    return next(i for i, b in demo.blocks.items() if key in (getattr(b, "elem_id", None), getattr(b, "label", None)))


def _on(demo, key: str, event: str) -> list:
    """The functions an event of the component `key` triggers (its cancel functions included)."""
    return [f for f in demo.fns.values() if (_block_id(demo, key), event) in [tuple(t) for t in f.targets]]


def cancel_order(demo, key: str, event: str) -> list[str]:
    """The events (by API name) that this event of this component cancels, in the order the page cancels them."""
    return [demo.fns[i].api_name for f in _on(demo, key, event) if f.is_cancel_function for i in f.cancels]


def cancelled_by(demo, key: str, event: str) -> set[str]:
    """The events (by API name) that this event of this component cancels."""
    return set(cancel_order(demo, key, event))


def test_every_player_control_stops_play_and_replay(demo):
    for control in ("pause", "step-forward", "step-back", "skip", "run"):
        assert PLAYING <= cancelled_by(demo, control, "click"), control
    assert PLAYING <= cancelled_by(demo, "scrub", "input"), "a drag would be dragged back by the playback"
    open_id = next(i for i, b in demo.blocks.items() if getattr(b, "value", None) == "Open")
    opened = [f for f in demo.fns.values() if (open_id, "click") in [tuple(t) for t in f.targets]]
    assert PLAYING <= {demo.fns[i].api_name for f in opened for i in f.cancels}, "Open paints another session"
    assert cancelled_by(demo, "play", "click") == {"replay_page"}
    assert cancelled_by(demo, "replay", "click") == {"play_page"}


def test_skip_to_end_shows_the_stored_runs_last_step(studio):
    last = list(player.run_infill("text", "text-asarm", "x[MASK:12]y", "sequential", 4, 1.0, 3, 32, 0.05,
                                  "cosine", 1))[-1]
    n = len(last["trace_state"]["steps"])
    out = player.skip_to_end("", last["trace_state"], last["link"])
    assert out["scrub_sl"] == n and f"step {n}/{n}" in out["counters"]
    assert player.skip_to_end("", None, "") == {}  # a run still being prepared: nothing to skip to
    assert player.skip_to_end("a-running-run", None, "") == {} and stops.skip_requested("a-running-run")
    stops.clear_skip("a-running-run")


def test_a_domain_switch_cancels_all_that_would_land_beside_the_new_input(demo):
    order = cancel_order(demo, "Domain", "input")
    assert set(order) == {"run_page", "speedup", "compare", "compare_verdict", *PLAYING}
    # cancelling a timing in progress waits until it returns: the streams are cancelled before it
    assert set(order[-2:]) == {"speedup", "compare_verdict"}
    on = _on(demo, "Domain", "input")
    # the page cancels before it sends the switch (its listeners in wiring order): no frame lands after the reset
    assert next(i for i, f in enumerate(on) if f.is_cancel_function) < [f.name for f in on].index("switch_domain")


def test_a_domain_switch_stops_the_run_as_stop_does(studio):
    """The run stops after its round in progress and is stored as cancelled; the page is reset with
    nothing running, and the run is then listed in this browser's sessions."""
    gen, frames = run_to_round(2)
    sid = next(f["run_sid"] for f in frames if f.get("run_sid"))
    out = freshness.switch_domain(sid, "", frames[-1]["status"])
    frames.extend(gen)  # the server's side of the stream runs on to the run's next check (the page dropped it)
    assert not any("Done" in str(f.get("status", "")) for f in frames)
    assert [r.status for r in app_store.store().get_session(sid).runs] == ["cancelled"]
    assert out["status"] == status_md(freshness.HALTED) and out["run_sid"] == "" and out["completed"] == ""
    assert out["stop_btn"]["interactive"] is False and out["run_btn"]["interactive"] is True
    assert out["halted"] == [sid]
    ids, _ = freshness.remembering_halted(sessions.remember)([sid], [])
    assert ids == [sid]


def test_a_domain_switch_stops_the_comparison(studio):
    gen = compare.run_compare("text", "text-asarm", "x[MASK:40]y", "sequential", 4, 1.0, 6, 32, 0.05, "cosine", 1,
                              "assd", "text-asarm")
    frames = [next(gen), next(gen)]  # the announcement with its id, then both sides' first round
    sid = frames[0]["cmp_sid"]
    out = freshness.switch_domain("", sid, "")
    frames.extend(gen)
    assert out["cmp_status"] == status_md(freshness.HALTED_COMPARE) and out["cmp_sid"] == ""
    assert "Stopped" in frames[-1]["cmp_status"]
    assert {r.status for r in app_store.store().get_session(sid).runs} == {"cancelled"}
    assert out["halted"] == [sid]  # and this browser's sessions list it, as they list a stopped run
    ids, _ = freshness.remembering_halted(sessions.remember)(out["halted"], ["older"])
    assert ids == [sid, "older"]


def test_a_domain_switch_on_an_idle_page_stops_nothing_and_a_starting_run_before_its_first_frame():
    page, t0 = SimpleNamespace(session_hash="switch-page"), float("-inf")
    out = freshness.switch_domain("", "", "", page)
    assert out["status"] == "" and out["halted"] == [] and "cmp_status" in out and out["cmp_status"] == ""
    for run, stop in (("run_btn", "stop_btn"), ("cmp_btn", "cmp_stop")):  # both Run / Stop pairs idle
        assert out[run]["interactive"] is True and out[stop]["interactive"] is False
    assert not stops.owner_stopped_since("switch-page", t0)
    out = freshness.switch_domain("", "", status_md(STARTING), page)  # Run pressed, the run not announced yet
    assert out["status"] == status_md(freshness.HALTED_FIRST) and stops.owner_stopped_since("switch-page", t0)


def test_a_domain_switch_that_crossed_runs_click_stops_that_run_before_its_first_frame():
    """Run pressed, then the domain switched before Run's "Starting" came back (the status the switch
    sends is still empty): the run clicked before the switch stops before its first frame, the page
    claims nothing (there may be no run), and a run clicked after the switch is not stopped."""
    page = SimpleNamespace(session_hash="switch-race")
    stops.note_click("switch-race")
    clicked = stops.clicked_at("switch-race")
    out = freshness.switch_domain("", "", "", page)
    assert out["status"] == "" and out["halted"] == []
    assert stops.owner_stopped_since("switch-race", clicked)
    assert not stops.owner_stopped_since("switch-race", time.monotonic() + 1)


def test_stop_the_check_is_enabled_only_while_a_check_runs(demo):
    stop, run = demo.blocks[_block_id(demo, "exactness-stop")], demo.blocks[_block_id(demo, "exactness-run")]
    assert stop.interactive is False  # nothing runs when the page opens
    (first,) = [f for f in _on(demo, "exactness-run", "click") if not f.is_cancel_function]
    after = {f.trigger_after: f for f in demo.fns.values() if f.trigger_after is not None}
    check = after[first._id]
    done = after[check._id]
    assert check.api_name == "exactness"
    assert first.outputs == done.outputs == [run, stop]
    assert [u["interactive"] for u in first.fn()] == [False, True]  # at the click: Stop on
    assert [u["interactive"] for u in done.fn()] == [True, False]  # after the check, however it ended


def test_the_check_ticks_the_sampler_the_editor_runs(demo):
    """The sampler a visitor just watched is the one they want checked: the page starts with the editor's
    default ticked, and a sampler change ticks the new one, unless it drives another kind of model."""
    from app.tabs.exactness import follow_sampler

    ticked = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "exactness-samplers").value
    editor = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "sampler").value
    assert editor in ticked, (editor, ticked)
    assert follow_sampler("assd-ngram", ["sequential-cache"]) == ["sequential-cache", "assd-ngram"]
    assert follow_sampler("assd-ngram", ["assd-ngram"]) == ["assd-ngram"]  # already ticked: once
    assert follow_sampler("mdm", ["sequential-cache"]) == ["sequential-cache"]  # a hybrid beside AS-ARM samplers: no
    assert follow_sampler("mdm", []) == ["mdm"] and follow_sampler("no-such", ["a"]) == ["a"]
    assert _on(demo, "sampler", "change") and any(f.name == "follow_sampler" for f in _on(demo, "sampler", "change"))


def test_a_comparison_whose_stream_the_page_cancelled_is_stored_and_listed(studio):
    """The page cancels the comparison's stream at a domain switch: the generator is closed between two
    frames, both sides end there, are stored as cancelled, and the switch lists the comparison."""
    gen = compare.run_compare("text", "text-asarm", "x[MASK:40]y", "sequential", 4, 1.0, 6, 32, 0.05, "cosine", 1,
                              "assd", "text-asarm")
    sid = next(gen)["cmp_sid"]
    next(gen)  # both sides' first round
    out = freshness.switch_domain("", sid, "")
    gen.close()
    assert {r.status for r in app_store.store().get_session(sid).runs} == {"cancelled"}
    ids, _ = freshness.remembering_halted(sessions.remember)(out["halted"], [])
    assert ids == [sid]
