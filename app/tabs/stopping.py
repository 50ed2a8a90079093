"""Stop in the step player: answered from the run's own state (app.serving.stops), never by
polling the store. Before the first round it stores nothing and every view is emptied; after it,
the stored partial run is shown; a run that finished first (Watch was replaying it) is shown whole."""

from __future__ import annotations

import time

import gradio as gr

from app.serving import stops
from app.stored import share
from app.stored.replay import trace_ref
from app.views import token_views

from .common import STOPPED_FIRST, cleared, idle, idle_named, status_md
from .playback import frame
from .watch import WATCH_ENDS, run_title

#: what Stop updates: everything that shows the run, so all of it describes the stored state
STOP_OUTPUTS = ("status", "link", "trace_state", "scrub_sl", "run_btn", "stop_btn", "counters", "player", "detail",
                "completed", "player_stop", "run_sid")


def _scrub_to_end(n: int):
    return gr.update(minimum=0, maximum=n, value=n, interactive=True)


def _stopped_msg(st) -> str:
    return status_md(f"Stopped after {st.decided} of {len(st.masked)} tokens. The partial run is stored as "
                     "cancelled; Play replays it and the link opens it.")


def stopped_first() -> dict:
    """The run's own last frame when Stop came before its first round (as Stop's answer says)."""
    return {"status": status_md(STOPPED_FIRST), **cleared(STOPPED_FIRST), "run_sid": ""}


#: seconds Stop waits for the round in progress to end (and the run to be stored) before it
#: answers anyway; a run stopped before its first round answers at once
STOP_WAIT = 2.0


def halt(sid, starting: bool, owner: str | None) -> tuple[object | None, bool]:
    """Ask the page's run to stop, without waiting for it (Stop's first half; a domain switch stops a
    run with it too). The run is found by its id `sid`, or, when the id has not reached the page,
    as the page's (its session hash `owner`) run in progress; with no run found while the page says
    one is `starting` (prepared or queued), every run the page started by now stops before its first
    frame. Returns (the run or None, whether it stops before its first round and so stores nothing);
    a run that showed a round ends after the round in progress and is stored as cancelled (complete
    when it had finished computing: Watch was replaying it)."""
    if not (isinstance(sid, str) and sid):  # the run's id has not reached the page yet
        sid = stops.running_for(owner)
        if not sid and owner and starting:
            stops.request_owner_stop(owner, time.monotonic())
            return None, True
    live = stops.tracked(sid) if sid else None
    if live is None:
        return None, False
    return live, not live.stop()


def stop_api(sid, request: gr.Request = None):
    """The API's /stop: stop_run without the page's link (a Stop that finds no run says so)."""
    return stop_run(sid, None, request)


def stop_run(sid, link=None, request: gr.Request = None):
    """Stop pressed: answered from the run's own state (app.serving.stops.tracked), never by polling
    the store. Before the first round was shown the run stops at its next check and stores nothing:
    said at once. After it, the run ends after the round it is in and is stored as cancelled: the
    answer waits for that (at most STOP_WAIT seconds), then shows the stored partial trace; a run that
    finished first (Watch was replaying it) is shown complete. Every answer clears the page's run id,
    so pressing Stop again is "Nothing is running." at once. Updates STOP_OUTPUTS by name."""
    buttons = {**idle_named("run_btn", "stop_btn"), "player_stop": idle()[1], "run_sid": ""}
    # a page with no share link shown while Stop is enabled (only while a run is on): it is prepared or queued
    starting = isinstance(link, str) and not share.share_id_from_link(link)
    live, first = halt(sid, starting, getattr(request, "session_hash", None))
    if first:
        return {"status": status_md(STOPPED_FIRST), **cleared(STOPPED_FIRST), **buttons}
    if live is None:
        return {"status": status_md("Nothing is running."), **buttons}
    sid = live.share_id
    watching = WATCH_ENDS.get(sid)
    if watching is not None:  # the Watch replay ends at its next frame
        watching.wait(STOP_WAIT)
    if not live.ended.wait(STOP_WAIT):
        said = "Stopping after the round in progress; the partial run is stored as cancelled and the link opens it."
        return {"status": status_md(said), "link": share.share_link(request, sid), **buttons}
    if live.run_id is None:  # it ended storing nothing: nothing of it stays on screen
        return {"status": status_md(STOPPED_FIRST), **cleared(STOPPED_FIRST), **buttons}
    stops.clear_stop(sid)
    # the player, counters, round table, scrubber and completed text all show the stored run's end
    title = run_title(live.run.spec.name, live.run.lm.name)
    trace = trace_ref(live.run_id, live.view, live.steps, title)
    st = token_views.new_state(live.view, live.steps)
    shown = frame(trace, len(live.steps), st)
    if live.result is not None:  # it finished computing first (Watch was replaying it): shown complete
        said = ("Stopped the replay: the run had finished computing before Stop arrived, so it is stored "
                "complete and shown in full.")
        msg, completed = status_md(said, "ok"), live.result.text
    else:
        said = f"Stopped after {st.decided} of {len(st.masked)} tokens; the partial run is stored as cancelled."
        msg, completed = _stopped_msg(st), ""
    return {**shown, "counters": f"{shown['counters']} · {said}", "status": msg, "completed": completed,
            "link": share.share_link(request, sid), "trace_state": trace,
            "scrub_sl": _scrub_to_end(len(live.steps)), **buttons}
