"""The Step player tab: a run streamed round by round (Run / Stop), then the stored trace played,
paused, stepped and scrubbed with no model involved (those controls' handlers: app.tabs.playback).
The share link and the trace to replay appear only once the store holds the run."""

from __future__ import annotations

import concurrent.futures
import os
import time

import gradio as gr

from app.errors import readable
from app.run import streaming
from app.run.streaming import Live
from app.serving import stops
from app.serving.visitors import request_address
from app.stored import share
from app.stored.replay import trace_ref
from app.stored.store import store
from app.timing.speedup import remember_for_speedup, speedup_for
from app.views.render import DETAIL_HEADERS, counters_md, view_html
from engine.wording import plural

from . import freshness
from .common import (
    CLEARED,
    STARTING,
    Page,
    busy,
    cleared,
    components,
    detail_table,
    empty_table,
    form_components,
    idle,
    make_form,
    named,
    status_md,
    takes_form,
    warn,
)
from .long_input import guard_js
from .playback import DEFAULT_SPEED, FRAME_OUTPUTS, SPEEDS, play, replay, scrub, step_back, step_forward, to_end
from .stopping import STOP_OUTPUTS, STOP_WAIT, _stopped_msg, stop_api, stop_run, stopped_first  # noqa: F401 (re-exported)
from .watch import WATCH_RATE, WATCH_UNDER, run_title, scrub_live, watched

TABLE_INTERVAL = 0.5  # seconds between two updates of the current-round table while a run streams


#: a run being prepared (input checked, model loaded) longer than this gets a "Preparing" status
PREPARE_NOTICE = 0.3
_PREPARE = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="prepare")


def watch_default() -> bool:
    """Whether the Watch box starts ticked (INFILL_WATCH=0 unticks it, e.g. for fast browser tests)."""
    return os.environ.get("INFILL_WATCH", "1") != "0"


#: what Run (and the /infill API) updates, in the order API clients receive it
RUN_OUTPUTS = ("status", "counters", "player", "detail", "completed", "link", "scrub_sl", "trace_state", "run_sid")
def _player(live: Live, status: str) -> dict:
    st = live.state
    return {"status": status, "counters": counters_md(st),
            "player": view_html(st, run_title(live.run.spec.name, live.run.lm.name)), "detail": detail_table(st.detail)}


def _scrub_to_end(n: int):
    return gr.update(minimum=0, maximum=n, value=n, interactive=True)


def _streamed(live: Live, note: str, watch: bool = False):
    """The frames while the run streams (one per round, throttled; the round table at most twice
    a second: nobody reads it faster, and each one costs the run time). With `watch`, no round is
    shown while the run has computed under WATCH_UNDER seconds: a quick run is then shown from its
    start at the Watch pace, and nothing already shown is rewound; a longer one streams on from there."""
    first, table_at = True, 0.0
    for lv in streaming.throttled(streaming.rounds(live)):
        if lv.done:
            break
        if watch and lv.run.compute_seconds < WATCH_UNDER:
            continue  # the Watch pace will show this round (the run is quick so far)
        update = _player(lv, status_md(f"Running {lv.run.spec.name}… round {lv.state.round + 1}.{note}"))
        now = time.perf_counter()
        if now - table_at < TABLE_INTERVAL:
            del update["detail"]
        else:
            table_at = now
        update.update(completed="", link="", run_sid=live.share_id, scrub_sl=scrub_live(len(lv.steps)))
        if first:  # the previous run's trace is gone until this one is stored
            update.update(trace_state=None)
        yield update
        first = False


def _finished(live: Live, note: str, request):
    """The last frame, once the store holds the run: completed text, link and the trace to replay."""
    res = live.result
    link = share.share_link(request, live.share_id)  # the run is stored: rounds() has left its recorder
    stored = {"link": link, "scrub_sl": _scrub_to_end(len(live.steps)), "run_sid": ""}
    if res is None:  # Stop ended it after a round: stored as cancelled with the steps shown
        trace = trace_ref(live.run_id, live.view, live.steps, run_title(live.run.spec.name, live.run.lm.name))
        return {**_player(live, _stopped_msg(live.state)), "completed": "", "trace_state": trace, **stored}
    trace = trace_ref(live.run_id, live.view, live.steps, run_title(res.sampler, res.model))
    lp = "" if res.log_prob is None else f", log-probability {res.log_prob:.2f}"
    done = status_md(f"Done: {plural(res.masked_tokens, 'token')} in {plural(res.calls, 'call')}{lp}. Stored; share it "
                     "with the link."
                     + note, "ok")
    return {**_player(live, done), "completed": res.text, "trace_state": trace, **stored}


@takes_form()
def run_infill(values: dict, watch=False, request: gr.Request = None):
    """Stream a run: one update per round (throttled), ending with the completed text. With `watch`,
    a run that computed in under WATCH_UNDER seconds is then shown at the Watch pace before its last
    frame. The share link and the stored trace appear only in the last update, once the store holds the run.
    Each update is {name: value} over RUN_OUTPUTS (app.tabs.common.named). `values`: the editor's
    values by name (app.tabs.common.takes_form: the endpoint's parameters are FORM_FIELDS)."""
    yield from _streamed_run(values, watch, request, notice=True)


def _streamed_run(values: dict, watch: bool, request, notice: bool):
    """run_infill's frames. `notice`: say "Preparing… loading the model" when preparing takes a while.
    The page says it at Run's click instead (STARTING): Stop cancels the run's stream, and a notice
    sent just before Stop's answer could still arrive after it and stand as the page's last word."""
    sampler = values["sampler"]
    owner = getattr(request, "session_hash", None)
    # Stop pressed from Run's click on (the run may have waited in the queue), before the run has an
    # id, stops it (stop_run)
    t0 = min(time.monotonic(), stops.clicked_at(owner))
    stops.note_start(owner, f"starting-{t0}")  # the last run's speed line no longer lands (speedup)
    try:
        prep = _PREPARE.submit(streaming.start, make_form(values), owner=owner, address=request_address(request))
        try:
            live = prep.result(timeout=PREPARE_NOTICE)
        except concurrent.futures.TimeoutError:  # loading a model: say so instead of showing nothing
            if notice:
                yield {"status": status_md(f"Preparing {sampler}: loading the model (a model's first run takes a "
                                           "few seconds)…"), **cleared(f"Preparing {sampler}…"), "run_sid": ""}
            live = prep.result()
    except Exception as e:  # noqa: BLE001 - every problem becomes a message
        msg = readable(e)
        warn(msg)
        yield {"status": status_md(msg, "error"), **cleared(msg), "run_sid": ""}
        return
    live.created = min(live.created, t0)  # a cancel while it was prepared counts (streaming._called_off)
    if stops.owner_stopped_since(owner, t0):  # Stop came while it was queued or prepared: nothing stored
        yield stopped_first()
        return
    stops.track(live.share_id, live)  # Stop answers from this run's own state (stop_run)
    try:
        yield from _run_tracked(live, watch, request)
    finally:
        live.ended.set()
        stops.untrack(live.share_id)


def _run_tracked(live: Live, watch: bool, request):
    """run_infill's frames once the run is checked and announced."""
    sampler = live.run.spec.name
    note = f" {live.note}" if live.note else ""  # the normaliser's note, from the form's one reading
    wait = streaming.slots().estimate()  # every slot busy: say so, and for how long, before the first round
    # the share id reaches the page at once, so that Stop works from the first moment (queued or drafting)
    if stops.stop_requested(live.share_id) or stops.owner_stopped_since(live.owner, live.created):
        yield stopped_first()  # Stop came before this frame: no "Running" after Stop's answer
        return
    # nothing of the previous run stays on screen as if it were this one
    yield {"status": status_md(wait.message() if wait.busy else f"Running {sampler}… computing the first round."),
           **cleared(f"Running {sampler}… computing the first round."), "run_sid": live.share_id}
    try:
        yield from _streamed(live, note, watch)
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        warn(msg)
        if live.run_id is not None:  # stored all the same (a budget stop): link, list and replay it
            trace = trace_ref(live.run_id, live.view, live.steps, run_title(live.run.spec.name, live.run.lm.name))
            yield {**_player(live, status_md(msg, "error")), "completed": "",
                   "link": share.share_link(request, live.share_id), "scrub_sl": _scrub_to_end(len(live.steps)),
                   "trace_state": trace, "run_sid": ""}
            return
        yield {**_player(live, status_md(msg, "error")), "completed": "", "link": "", "trace_state": None,
               "run_sid": ""}
        return
    stops.clear_stop(live.share_id)
    if live.cancelled:  # stopped or cancelled before its first round: nothing stored, nothing of it shown
        yield stopped_first()
        return
    if watch and live.result is not None and live.run.compute_seconds < WATCH_UNDER:
        if (yield from watched(live, note)):
            return  # stopped while Watch replayed it: stop_run shows the stored run
    stops.clear_skip(live.share_id)
    remember_for_speedup(live)  # the chained `speedup` event times cached sequential on it
    yield _finished(live, note, request)


def skip_to_end(sid, trace=None, link=None) -> dict:
    """Skip to end pressed. While a run streams (its id is on the page) its Watch pace stops and its
    last frame shows at once; otherwise the stored trace's last step shows (playback.to_end). Updates
    FRAME_OUTPUTS by name ({}: nothing changes here)."""
    if sid:
        stops.request_skip(sid)
        return {}
    return to_end(trace, link)


def speedup(link, request: gr.Request = None):
    """After Run: the speed-up against cached sequential decoding of the same input (a second,
    unstored run on a compute slot), in its own line under the figures, so stepping through the
    trace meanwhile loses nothing; "" where it does not apply. It reads the run's share link (the
    run is stored). A page that started another run meanwhile keeps that run's line."""
    sid = share.share_id_from_link(link)
    owner = getattr(request, "session_hash", None)
    if stops.started_since(owner, sid):
        speedup_for(sid)  # forget it untimed
        return gr.update()
    _, line = speedup_for(sid)
    return gr.update() if stops.started_since(owner, sid) else line


def remembering_run(remember):
    """After Run: list the run's session in this browser. The link names it when the last update
    arrived; when it did not (the stream broke off, the run was stopped by its budget or a
    disconnect) the session the run announced is listed once the store holds it."""
    def remember_run(link, sid, ids):
        if not share.share_id_from_link(link) and sid and store().get_session(sid) is not None:
            link = f"?{share.QUERY_KEY}={sid}"
        return remember(link, ids)
    return remember_run


# ----------------------------------------------------------------------------- layout


def layout(p: Page) -> None:
    """The counters, the player controls, the token view, the scrubber, the round table, the
    completed text and the share link."""
    p.counters = gr.Markdown("", elem_id="counters")
    p.speedup_line = gr.Markdown("", elem_id="speedup")  # filled after a run by the chained `speedup` event
    with gr.Row(elem_id="player-controls", equal_height=True):
        # Stop beside the player: Run scrolls the page here, away from the editor's Stop
        p.player_stop = gr.Button("■ stop", variant="stop", size="sm", scale=1, min_width=70, interactive=False,
                                  elem_id="player-stop")
        p.back_btn = gr.Button("◀ step back", size="sm", scale=1, min_width=90, elem_id="step-back")
        p.play_btn = gr.Button("▶ play", size="sm", scale=1, min_width=70, elem_id="play")
        p.pause_btn = gr.Button("❚❚ pause", size="sm", scale=1, min_width=70, elem_id="pause")
        p.fwd_btn = gr.Button("step forward ▶", size="sm", scale=1, min_width=110, elem_id="step-forward")
        p.speed = gr.Dropdown(SPEEDS, value=DEFAULT_SPEED, label="playback speed", scale=2, min_width=160,
                              elem_id="speed", show_label=False, container=False)
        p.replay_btn = gr.Button("replay from start", size="sm", scale=1, min_width=120, elem_id="replay")
        p.skip_btn = gr.Button("skip to end", size="sm", scale=1, min_width=100, elem_id="skip")
    with gr.Row(elem_id="player-options"):
        p.watch = gr.Checkbox(watch_default(), label=f"Watch: show a quick run at about {WATCH_RATE:g} tokens/s "
                              f"(runs that compute in under {WATCH_UNDER:g} s)", elem_id="watch", container=False)
        p.hide_old = gr.Checkbox(True, label="Hide rejected drafts of earlier rounds (here and in Compare)",
                                 elem_id="hide-old", container=False)
    p.player = gr.HTML(view_html(None, message="Press Run to watch the sampler."), elem_id="player", js_on_load=None)
    p.scrub_sl = gr.Slider(0, 1, value=0, step=1, label="Step in the stored trace (drag to scrub)",
                           interactive=False, elem_id="scrub")
    p.detail = gr.Dataframe(value=empty_table(DETAIL_HEADERS), label="Current round",
                            interactive=False, elem_id="detail", max_height=320)
    p.completed = gr.Textbox(label="Completed text", lines=3, elem_id="completed", interactive=False)
    p.link = gr.Textbox(label="Share link (appears once the run is stored)", buttons=["copy"],
                        elem_id="share-link", interactive=False)
    p.trace_state = gr.State(None)
    p.run_sid = gr.State("")


#: on Run: the player (counters, controls with their Stop, trace) scrolls to the top of the window
#: (at 1366x768 it starts below the fold), unless the line under the input shows an error (Run
#: refuses it, and the message is there); the "hide earlier drafts" box decides, during the run
#: too, whether rejected drafts of earlier rounds show (a class on <body>, so re-renders keep it)
RUN_JS = """() => {
  const line = document.querySelector('#token-count');
  if (line && line.innerText.includes('\u26a0')) return;
  const el = document.querySelector('#counters');
  if (el) window.scrollTo({top: el.getBoundingClientRect().top + window.scrollY - 8});
}"""
HIDE_OLD_JS = "(hide) => { document.body.classList.toggle('tv-hide-old', !!hide); }"
#: a share link opens with its result in view: the restored trace, comparison or exactness check
#: (whichever tab the restore selected; each tab's top is its first visible anchor)
RESTORED_JS = """(hide) => {
  document.body.classList.toggle('tv-hide-old', !!hide);
  if (!new URLSearchParams(location.search).get('s')) return;
  const go = () => {
    const shown = ['#compare-run', '#exactness-status', '#counters'].map((s) => document.querySelector(s))
      .find((e) => e && e.offsetParent !== null);
    if (shown) window.scrollTo({top: shown.getBoundingClientRect().top + window.scrollY - 8});
  };
  requestAnimationFrame(() => requestAnimationFrame(go));  // after the restored tab is drawn
}"""
HIDE_OLD_CSS = ("body.tv-hide-old :is(#player, #compare-a, #compare-b) .tv-faded:not(.tv-legend .tv-faded) "
                "{display: none;}\n")


@takes_form("watch")
def run_page(values: dict, watch, request: gr.Request = None):
    """Run as the page's button does it: run_infill with the Watch box (the /infill API never watches).
    An input the line under it already refuses is not run, and its message is not repeated."""
    if freshness.input_problem(values):
        yield freshness.not_run()
        return
    yield from _streamed_run(values, bool(watch), request, notice=False)


def wire(p: Page, remember) -> None:
    """Run and Stop (the model-bound Run shares one concurrency pool with Compare), then the
    player's controls over the stored trace. `remember` adds a stored run to this browser's list."""
    limit = p.run_limit
    outputs = components(p, RUN_OUTPUTS)
    p.run_btn.click(None, None, None, js=RUN_JS, api_visibility="private")
    # at the click, before the run is queued: Stop enabled, and nothing of the previous run left on screen
    starting = ("status", *CLEARED)
    def clicked(request: gr.Request = None):
        stops.note_click(getattr(request, "session_hash", None))  # a Stop from now on stops this run
        return (*busy(), busy()[1], "", status_md(STARTING), *(cleared(STARTING)[k] for k in CLEARED))

    run_evt = p.run_btn.click(clicked, None,
                              [p.run_btn, p.stop_btn, p.player_stop, p.speedup_line, *components(p, starting)],
                              queue=False, api_visibility="private", show_progress="hidden").then(
        named(p, run_page), form_components(p, "watch"), outputs, api_visibility="private", concurrency_id="model",
        concurrency_limit=limit, show_progress="hidden",
        preprocess=False,  # raw values: app.run.form.prepare reads them by the engine's rules (digit-string seeds)
        js=guard_js(),  # an input over the limit travels as its stand-in (app.tabs.long_input)
    )
    # the API's /infill: the same run without the Watch pace (an invisible button carries the endpoint)
    p.api_run_btn = gr.Button(visible=False)
    p.api_run_btn.click(named(p, run_infill), form_components(p), outputs, api_name="infill", concurrency_id="model",
                        concurrency_limit=limit, show_progress="hidden", preprocess=False)
    p.hide_old.change(None, [p.hide_old], None, js=HIDE_OLD_JS, api_visibility="private")
    speedup_evt = run_evt.then(lambda: (*idle(), idle()[1]), None, [p.run_btn, p.stop_btn, p.player_stop],
                 api_visibility="private", show_progress="hidden").then(
        None, [p.hide_old], None, js=HIDE_OLD_JS, api_visibility="private").then(
        remembering_run(remember), [p.link, p.run_sid, p.history], [p.history, p.recent_html],
        api_visibility="private").then(
        speedup, [p.link], [p.speedup_line], api_name="speedup", concurrency_id="model",
        concurrency_limit=limit, show_progress="hidden")
    # the page's Stop also sends the link (a Stop before the run's id reached the page: stop_run);
    # the API's /stop keeps its published signature (an invisible button carries it)
    p.api_stop_btn = gr.Button(visible=False)
    p.api_stop_btn.click(named(p, stop_api), [p.run_sid], components(p, STOP_OUTPUTS), api_name="stop", queue=False)
    p.stop_btn.click(named(p, stop_run), [p.run_sid, p.link], components(p, STOP_OUTPUTS),
                     cancels=[run_evt], api_visibility="private", queue=False, show_progress="hidden").then(
        remember, [p.link, p.history], [p.history, p.recent_html], api_visibility="private")
    p.player_stop.click(named(p, stop_run), [p.run_sid, p.link], components(p, STOP_OUTPUTS),
                        cancels=[run_evt], api_visibility="private", queue=False, show_progress="hidden").then(
        remember, [p.link, p.history], [p.history, p.recent_html], api_visibility="private")
    frame_outputs = components(p, FRAME_OUTPUTS)
    # the page's controls also send the share link (it lives in the browser: a page whose copy of the
    # trace the server let go of is shown the link, playback.LOST); the API keeps its published
    # signatures on invisible buttons
    link, hidden = [p.link], {"api_visibility": "private", "show_progress": "hidden"}
    play_evt = p.play_btn.click(named(p, play), [p.scrub_sl, p.trace_state, p.speed, *link], frame_outputs, api_name="play_page",
                                **hidden)
    replay_evt = p.replay_btn.click(named(p, replay), [p.trace_state, p.speed, *link], frame_outputs,
                                    cancels=[play_evt], api_name="replay_page", **hidden)
    # play and replay, either of which may be playing: every other control of the player stops both
    # first (Pause where it is, a step, the scrubber or Skip to end from there), and so do Run, Open
    # (app.tabs.sessions) and a domain switch (app.tabs.freshness), whose frames a playback going on
    # would paint over
    p.playing = [play_evt, replay_evt]
    # dragging the scrubber takes the step a person picks: a playback going on would drag it back
    p.scrub_sl.input(named(p, scrub), [p.scrub_sl, p.trace_state, *link], components(p, FRAME_OUTPUTS[:3]),
                     trigger_mode="always_last", api_name="scrub_page", cancels=p.playing, **hidden)
    p.play_btn.click(None, None, None, cancels=[replay_evt], api_visibility="private")
    p.pause_btn.click(None, None, None, cancels=p.playing, api_visibility="private")
    p.run_btn.click(None, None, None, cancels=p.playing, api_visibility="private")
    p.fwd_btn.click(named(p, step_forward), [p.scrub_sl, p.trace_state, *link], frame_outputs, cancels=p.playing,
                    api_name="step_forward_page", **hidden)
    p.back_btn.click(named(p, step_back), [p.scrub_sl, p.trace_state, *link], frame_outputs, cancels=p.playing,
                     api_name="step_back_page", **hidden)
    # Skip to end at once (no queue): during a run it ends the Watch pace (skip_to_end)
    p.skip_btn.click(named(p, skip_to_end), [p.run_sid, p.trace_state, *link], frame_outputs, cancels=p.playing,
                     queue=False, api_visibility="private", show_progress="hidden")
    # what a domain switch stops besides playback: the run and its chained speed-up line (app.tabs.freshness)
    p.run_evt, p.speedup_evt = run_evt, speedup_evt
    api = gr.Button(visible=False)
    for name, fn, inputs, outs in (("scrub", scrub, [p.scrub_sl, p.trace_state], FRAME_OUTPUTS[:3]),
                                   ("play", play, [p.scrub_sl, p.trace_state, p.speed], FRAME_OUTPUTS),
                                   ("step_forward", step_forward, [p.scrub_sl, p.trace_state], FRAME_OUTPUTS),
                                   ("step_back", step_back, [p.scrub_sl, p.trace_state], FRAME_OUTPUTS),
                                   ("replay", replay, [p.trace_state, p.speed], FRAME_OUTPUTS)):
        api.click(named(p, fn), inputs, components(p, outs), api_name=name, show_progress="hidden")
