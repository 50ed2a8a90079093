"""What keeps the page from showing a stale state: a person's domain switch stops the run, the
comparison and the playback in progress and clears the last run's view (a code run's "Done: 14
tokens" must not sit beside a protein input), an input refused by Run says so once (under the input,
where it is fixed) and that refusal goes away as soon as the input is fixed, not at the next Run."""

from __future__ import annotations

import time

import gradio as gr

from app.serving import stops
from app.stored import share
from app.views.render import DETAIL_HEADERS, view_html

from .common import STARTING, Page, components, empty_table, idle, idle_named, named, status_md
from .compare import stop_compare
from .editor import input_info
from .long_input import guard_js
from .stopping import STOP_WAIT, halt

#: Run's status when the line under the input already says what is wrong (one warning, one place)
NOT_RUN = "Not run: the input needs fixing first; the line under it says what is wrong."
EMPTY_PLAYER = "Press Run to watch the sampler."
ERROR_ICON = status_md("x", "error")[:-1]

#: what a domain switch clears: the last run's player, its counters and scrubber, and Compare's panels
RESET_OUTPUTS = ("status", "counters", "speedup_line", "player", "detail", "completed", "link", "scrub_sl",
                 "trace_state", "cmp_status", "cmp_verdict", "html_a", "html_b", "cnt_a", "cnt_b", "cmp_link")


def input_problem(values: dict) -> bool:
    """Whether the line under the input shows an error for these editor values."""
    return input_info(values["text"], values["model"], values["domain"]).startswith(ERROR_ICON)


def not_run() -> dict:
    """Run's one update for an input the line under it already refuses: no second copy of the message."""
    return {"status": status_md(NOT_RUN, "error"), "counters": "", "player": view_html(None, message=NOT_RUN),
            "detail": empty_table(DETAIL_HEADERS), "completed": "", "link": "", "run_sid": ""}


def reset_view() -> dict:
    """Every part of the page that showed the last run, emptied (RESET_OUTPUTS, by name)."""
    return {"status": "", "counters": "", "speedup_line": "", "player": view_html(None, message=EMPTY_PLAYER),
            "detail": empty_table(DETAIL_HEADERS), "completed": "", "link": "",
            "scrub_sl": gr.update(minimum=0, maximum=1, value=0, interactive=False), "trace_state": None,
            "cmp_status": "", "cmp_verdict": "", "html_a": "", "html_b": "", "cnt_a": "", "cnt_b": "", "cmp_link": ""}


#: what a domain switch sets besides RESET_OUTPUTS: nothing runs on the page any more (both Run / Stop
#: pairs idle, no run or comparison id), and the ids of the run and the comparison it stopped (`halted`,
#: to list them)
SWITCH_OUTPUTS = (*RESET_OUTPUTS, "run_btn", "stop_btn", "player_stop", "run_sid", "cmp_btn", "cmp_stop", "cmp_sid",
                  "halted")
#: the status after a domain switch stopped a run: before its first round, or after it
HALTED_FIRST = "The domain switch stopped the run before its first round; nothing was stored."
HALTED = "The domain switch stopped the run in progress; it is stored, and the Sessions tab lists it."
HALTED_COMPARE = "The domain switch stopped the comparison in progress."


def switch_domain(sid, cmp_sid, status, request: gr.Request = None) -> dict:
    """A person's domain switch: the run and the comparison in progress stop as their Stop buttons
    stop them (app.tabs.stopping.halt: the server stops computing after the round in progress and
    stores the run as cancelled; nothing is stored before its first round), the page's `cancels` end
    their streams, so nothing of them lands beside the new domain's input, and the view is reset.
    `status`: Run's status, which says when a run is starting and has no id on the page yet; a
    switch that crossed Run's click on the way (the status not yet back) still stops that run.
    Updates SWITCH_OUTPUTS by name."""
    owner = getattr(request, "session_hash", None)
    live, first = halt(sid, status == status_md(STARTING), owner)
    if live is None and not first and stops.clicked_at(owner) < float("inf"):
        # Run pressed within one round trip: neither its id nor its "Starting" has reached the page. A
        # run the page clicked before now and that has not started stops before its first frame (one
        # that has started is `live`), without a word here: there may be none
        stops.request_owner_stop(owner, time.monotonic())
    halted = [] if live is None else [live.share_id]
    out = {**reset_view(), **idle_named("run_btn", "stop_btn"), "player_stop": idle()[1], "run_sid": "",
           **idle_named("cmp_btn", "cmp_stop"), "cmp_sid": "", "halted": halted}
    if first or live is not None:
        out["status"] = status_md(HALTED_FIRST if first else HALTED)
    if cmp_sid:  # both sides end after their round in progress and are stored as cancelled
        stop_compare(cmp_sid)
        out["cmp_status"] = status_md(HALTED_COMPARE)
        halted.append(cmp_sid)
    return out


def remembering_halted(remember):
    """After a domain switch: the run and the comparison it stopped are listed in this browser's
    sessions once the store holds them (each ends after its round in progress; waited for at most
    STOP_WAIT seconds, from its own state as Stop does), as Stop lists the run it stopped."""
    def remember_halted(sids, ids):
        listed = None  # (ids, the list's HTML) once one is added
        for sid in sids or []:
            live = stops.tracked(sid)
            if live is None:
                continue
            live.ended.wait(STOP_WAIT)
            if live.run_id is not None:
                listed = remember(f"?{share.QUERY_KEY}={sid}", ids)
                ids = listed[0]
        return listed or (gr.skip(), gr.skip())
    return remember_halted


def clear_fixed_error(status, text, model, domain):
    """The input changed: Run's "not run" message goes once the line under the input has no error."""
    if status != status_md(NOT_RUN, "error"):
        return gr.skip()
    fixed = not input_info(text, model, domain).startswith(ERROR_ICON)
    return "" if fixed else gr.skip()


def wire(p: Page, remember) -> None:
    """A person's domain switch (not a restored share link, which sets the domain itself) stops what
    runs or plays and resets the run view, then lists the run it stopped (`remember` adds a stored
    run to this browser's list); an input change clears a refusal it fixed."""
    p.halted = gr.State([])
    # cancelled before switch_domain is called (the page handles an event's listeners in the order they
    # were wired), so no frame sent after the reset paints over it; one after the other, and cancelling
    # a function that computes (the speed-up line's and the verdict's timing) waits until it returns:
    # the streams, which end at their next frame, go first
    streams = [*p.playing, p.run_evt, p.cmp_evt, p.speedup_evt, p.verdict_evt]
    p.domain.input(None, None, None, cancels=streams, api_visibility="private")
    p.domain.input(named(p, switch_domain), [p.run_sid, p.cmp_sid, p.status], components(p, SWITCH_OUTPUTS),
                   api_visibility="private", queue=False, show_progress="hidden").then(
        remembering_halted(remember), [p.halted, p.history], [p.history, p.recent_html], api_visibility="private",
        queue=False, show_progress="hidden")
    # chained after the input's change, with a long input's stand-in (app.tabs.long_input)
    p.text_changed.then(clear_fixed_error, [p.status, p.text, p.model, p.domain], [p.status],
                        api_visibility="private", trigger_mode="always_last", show_progress="hidden", js=guard_js())
