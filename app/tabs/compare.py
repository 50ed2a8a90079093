"""The Compare tab: two samplers (and models) on the same input and seed, advancing one round each
in turn, side by side, with a summary table and charts that grow while they run."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import gradio as gr

from app.errors import readable
from app.run import form, streaming
from app.run.streaming import Live
from app.serving import pending_sessions, stops
from app.serving.visitors import request_address
from app.stored import share
from app.stored.store import store
from app.timing import compare_verdict
from app.timing.speedup import BASELINE_SAMPLER
from app.views import plots, token_views
from app.views.render import counters_md, esc, view_html
from engine.samplers import SAMPLERS
from storage.recorder import RunGroup

from .common import (
    Page,
    busy,
    components,
    empty_table,
    form_components,
    idle,
    idle_named,
    make_form,
    named,
    status_md,
    takes_form,
    warn,
)
from .long_input import guard_js

#: what Compare (and the /compare API) updates, in the order API clients receive it
COMPARE_OUTPUTS = ("cmp_status", "html_a", "html_b", "cnt_a", "cnt_b", "summary", "fig_rev", "fig_run", "cmp_link",
                   "cmp_sid")
SUMMARY_HEADERS = ["side", "sampler", "model", "calls", "rounds", "tokens", "tokens/call", "compute seconds", "tokens/s",
                   "log-probability"]


def logprob_text(lp) -> str:
    """A run's log-probability for the summary, or why there is none."""
    return "n/a (no exact joint for this sampler)" if lp is None else f"{lp:.2f}"


def _clocked(lv: Live):
    """A side's display state with its own compute seconds as its clock: the two sides alternate
    round by round, so the wall time since a side started counts the other side's rounds too (both
    read about the same), and its seconds and tokens/s would contradict the verdict."""
    lv.state.elapsed = lv.run.compute_seconds
    return lv.state


def summary_row(side: str, sampler: str, model: str, st, seconds: float, logprob: str) -> list[str]:
    """One side's row of the summary from its display state `st` and its compute seconds: the live
    Compare and a restored one (app.tabs.sessions) build it here, so a share link shows what the
    sender saw."""
    tpc = "" if not st.calls else f"{st.decided / st.calls:.2f}"
    tps = "" if seconds <= 0 else f"{st.decided / seconds:.1f}"
    return [side, sampler, model, f"{st.calls:g}", str(st.round + 1), f"{st.decided}/{len(st.masked)}", tpc,
            f"{seconds:.2f}", tps, logprob]


def _summary(lives: list[tuple[str, Live]]) -> dict:
    rows = []
    for side, lv in lives:
        st = _clocked(lv)
        r = lv.result
        rows.append(summary_row(side, lv.run.spec.name, lv.run.lm.name, st, st.elapsed,
                                "" if r is None else logprob_text(r.log_prob)))
    return {"headers": SUMMARY_HEADERS, "data": rows}


def _figures(a: Live, b: Live):
    return plots.compare_figures([(f"A: {a.run.spec.name}", a.steps), (f"B: {b.run.spec.name}", b.steps)])


def _prepare(values: dict, sampler_b, model_b, request) -> tuple[str, list[Live]]:
    """Both runs checked and announced under one share id (nothing stored until they run): B is A's
    form with B's sampler and model."""
    fa, fb = make_form(values), make_form({**values, "sampler": sampler_b, "model": model_b})
    return pair(fa, fb, getattr(request, "session_hash", None), request_address(request))


def pair(fa: form.Form, fb: form.Form, owner: str | None, address: str | None = None) -> tuple[str, list[Live]]:
    """Both sides checked and announced under one share id, to be stored together (RunGroup)."""
    ra, rb = form.prepare(fa), form.prepare(fb)
    sid = pending_sessions.create_session("compare", [ra, rb], fa.text, fa.domain)
    group = RunGroup(store=store(), share_id=sid, sides=2, session=pending_sessions.pending_session(sid))
    lives = []
    for side, run in enumerate((ra, rb)):
        view = token_views.token_view(run)
        lives.append(
            Live(
                run=run,
                view=view,
                state=token_views.run_state(run, view),
                share_id=sid,
                owner=owner,
                group=group,
                side=side,
                address=address,
            )
        )
    return sid, lives


@dataclass
class Stored:
    """What a domain switch reads of the comparison it stopped (app.tabs.freshness lists it once stored):
    tracked under its share id (app.serving.stops) while it runs; `ended` is set once both sides
    have ended and been stored (`run_id`, side A's; None when nothing was stored)."""

    share_id: str
    run_id: int | None = None
    ended: threading.Event = field(default_factory=threading.Event)


def _store_both(a: Live, b: Live) -> None:
    """Store the session and both sides in one transaction once both have ended (RunGroup): a
    process killed before then leaves no half comparison."""
    ids = a.group.commit() if a.group is not None else None
    if ids is not None:
        a.run_id, b.run_id = ids
        pending_sessions.mark_stored(a.share_id)


def _alternate(a: Live, b: Live, sid: str):
    """One round of each side in turn; a frame at most every min_interval(), the charts about once
    a second; then both recorders are let finish (the runs are stored), which `Stored` tells."""
    mark = Stored(sid)
    stops.track(sid, mark)
    its = [streaming.rounds(a), streaming.rounds(b)]
    try:
        yield from _rounds_in_turn(a, b, sid, its)
        for it in its:
            for _ in it:
                pass
    finally:  # however it ends (a side failed, the visitor left): both sides end, then both are stored
        try:
            for it in its:
                it.close()
            _store_both(a, b)
        finally:
            mark.run_id = a.run_id
            mark.ended.set()
            stops.untrack(sid)


def _rounds_in_turn(a: Live, b: Live, sid: str, its: list):
    """_alternate's frames while the sides take their rounds in turn."""
    gap, last, last_fig = streaming.min_interval(), 0.0, 0.0
    figures: dict = {}  # the charts, once drawn
    while not (a.done and b.done):
        for lv, it in zip((a, b), its):
            if not lv.done:
                next(it, None)
        now = time.perf_counter()
        if a.done and b.done:
            break
        if now - last >= gap:
            last = now
            yield {"cmp_status": status_md(f"Comparing… round {a.state.round + 1} / {b.state.round + 1}"),
                   "html_a": view_html(a.state, f"A: {a.run.spec.name}"),
                   "html_b": view_html(b.state, f"B: {b.run.spec.name}"),
                   "cnt_a": counters_md(_clocked(a)), "cnt_b": counters_md(_clocked(b)),
                   "summary": _summary([("A", a), ("B", b)]), **figures, "cmp_link": "", "cmp_sid": sid}
            if now - last_fig >= 1.0:  # the charts grow while it runs (about once a second)
                last_fig = now
                figures = dict(zip(("fig_rev", "fig_run"), _figures(a, b)))


@takes_form("sampler_b", "model_b")
def run_compare(values: dict, sampler_b, model_b, request: gr.Request = None):
    """Two samplers on the same input and seed, advancing round by round side by side (updates
    COMPARE_OUTPUTS by name). `values`: the editor's values by name (app.tabs.common.takes_form)."""
    try:
        sid, (a, b) = _prepare(values, sampler_b, model_b, request)
    except Exception as e:  # noqa: BLE001 - said once, in the status line Compare scrolls into view
        msg = readable(e)
        yield {"cmp_status": status_md(msg, "error"), "html_a": "", "html_b": "", "cnt_a": "", "cnt_b": "",
               "summary": empty_table(SUMMARY_HEADERS), "cmp_link": "", "cmp_sid": ""}
        return
    wait = streaming.slots().estimate()  # the share id reaches the page at once: Stop works from the start
    # nothing of the previous comparison stays on screen as if it were this one
    yield {"cmp_status": status_md(wait.message() if wait.busy else "Comparing… computing the first rounds."),
           **_cleared(), "cmp_sid": sid}
    try:
        yield from _alternate(a, b, sid)
        if a.cancelled or b.cancelled:  # Stop (or a cancel) before the first rounds: nothing stored
            stops.clear_stop(sid)
            yield {"cmp_status": status_md("Stopped before the first round; nothing was stored."), **_cleared(),
                   "cmp_sid": ""}
            return
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        warn(msg)
        yield {"cmp_status": status_md(msg, "error"), "cmp_link": "", "cmp_sid": ""}
        return
    stops.clear_stop(sid)
    link = share.share_link(request, sid)  # both recorders have stored their runs
    f1, f2 = _figures(a, b)
    stopped = a.stopped or b.stopped
    compare_verdict.remember(sid, a, b)  # the chained `compare_verdict` event times A against B
    yield {"cmp_status": status_md("Stopped: the partial runs are stored as cancelled; the link opens them."
                                   if stopped else "Done: both runs stored; share them with the link.",
                                   "info" if stopped else "ok"),
           "html_a": view_html(a.state, f"A: {a.run.spec.name}") + _completed_html(a),
           "html_b": view_html(b.state, f"B: {b.run.spec.name}") + _completed_html(b),
           "cnt_a": counters_md(_clocked(a)), "cnt_b": counters_md(_clocked(b)), "summary": _summary([("A", a), ("B", b)]),
           "fig_rev": f1, "fig_run": f2, "cmp_link": link, "cmp_sid": ""}


def _cleared() -> dict:
    """Both sides, their counters, the summary and the link emptied."""
    return {"html_a": "", "html_b": "", "cnt_a": "", "cnt_b": "", "summary": empty_table(SUMMARY_HEADERS),
            "cmp_link": ""}


def stop_compare(sid):
    """Stop both sides after their current round (they are stored as cancelled)."""
    buttons = idle_named("cmp_btn", "cmp_stop")
    if sid:
        stops.request_stop(sid)
        return {"cmp_status": status_md("Stopping after this round…"), **buttons}
    return {"cmp_status": status_md("Nothing is running."), **buttons}


def _completed_html(lv: Live) -> str:
    if lv.result is None:
        return ""
    return f'<div class="tv-title">Completed text</div><pre class="tv-wrap">{esc(lv.result.text)}</pre>'


# ----------------------------------------------------------------------------- layout


def layout(p: Page) -> None:
    """Sampler and model B, Compare / Stop, the two views, the summary, the charts and the link."""
    gr.Markdown("Side A uses the sampler and model picked above; choose side B here. "
                "Both run on the same input and seed, one round each in turn.")
    with gr.Row():
        p.sampler_b = gr.Dropdown(p.sampler_names, value=BASELINE_SAMPLER if BASELINE_SAMPLER in SAMPLERS
                                  else p.sampler_names[0], label="Sampler B", allow_custom_value=True,
                                  elem_id="sampler-b")
        p.model_b = gr.Dropdown(p.init_models, value=p.init_models[0] if p.init_models else None, label="Model B",
                                allow_custom_value=True)
    with gr.Row():
        p.cmp_btn = gr.Button("Compare", variant="primary", elem_id="compare-run", scale=4)
        p.cmp_stop = gr.Button("Stop", variant="stop", size="sm", scale=0, interactive=False, elem_id="compare-stop")
    p.cmp_status = gr.Markdown("", elem_id="compare-status")
    p.cmp_verdict = gr.Markdown("", elem_id="compare-verdict")
    with gr.Row():
        with gr.Column():
            p.cnt_a = gr.Markdown("")
            p.html_a = gr.HTML("", elem_id="compare-a")
        with gr.Column():
            p.cnt_b = gr.Markdown("")
            p.html_b = gr.HTML("", elem_id="compare-b")
    p.summary = gr.Dataframe(value=empty_table(SUMMARY_HEADERS), label="Summary", interactive=False)
    with gr.Row():
        p.fig_rev = gr.Plot(show_label=False, elem_id="compare-calls")
        p.fig_run = gr.Plot(show_label=False)
    p.cmp_link = gr.Textbox(label="Share link (appears once both runs are stored)", buttons=["copy"],
                            interactive=False, elem_id="compare-link")
    p.cmp_sid = gr.State("")


def verdict(link):
    """After Compare: "Timing…" at once, then the verdict of A against B (app.timing.compare_verdict: the
    pairs are unstored reruns, timed after both runs are stored); "" where there is no comparison."""
    pair = compare_verdict.take(share.share_id_from_link(link))
    if pair is None:
        yield ""
        return
    yield (f"**Verdict:** timing A against B: alternating unstored reruns of both sides on this server, until "
           f"the speed ratio's interval decides (at most {compare_verdict.MAX_PAIRS} pairs or "
           f"{compare_verdict.compare_seconds():g} s of compute)…")
    said = compare_verdict.judge(*pair)
    if said:  # kept with the comparison: its share link shows the verdict it was stored with
        try:
            store().annotate_session(share.share_id_from_link(link), "verdict", said)
        except Exception:  # noqa: BLE001 - the verdict is shown even when it cannot be kept
            said += " (Not kept with the comparison: its link will not show this verdict.)"
    yield said


#: on Compare: its button, Stop, status, verdict and both panels scroll to the top of the window
COMPARE_JS = """() => {
  const el = document.querySelector('#compare-run');
  if (el) window.scrollTo({top: el.getBoundingClientRect().top + window.scrollY - 8});
}"""


def wire(p: Page, remember) -> None:
    """Compare (in the model pool shared with Run) and its Stop, then the verdict."""
    p.cmp_btn.click(None, None, None, js=COMPARE_JS, api_visibility="private")
    cmp_evt = p.cmp_btn.click(lambda: (*busy(), ""), None, [p.cmp_btn, p.cmp_stop, p.cmp_verdict], queue=False,
                              api_visibility="private", show_progress="hidden").then(
        named(p, run_compare), form_components(p, "sampler_b", "model_b"), components(p, COMPARE_OUTPUTS),
        api_name="compare", concurrency_id="model", concurrency_limit=p.run_limit, show_progress="hidden",
        preprocess=False,  # raw values: app.run.form.prepare reads them by the engine's rules (digit-string seeds)
        js=guard_js(),  # an input over the limit travels as its stand-in (app.tabs.long_input)
    )
    verdict_evt = cmp_evt.then(idle, None, [p.cmp_btn, p.cmp_stop], api_visibility="private", show_progress="hidden").then(
        remember, [p.cmp_link, p.history], [p.history, p.recent_html], api_visibility="private").then(
        verdict, [p.cmp_link], [p.cmp_verdict], api_name="compare_verdict", concurrency_id="model",
        concurrency_limit=p.run_limit, show_progress="hidden")
    p.cmp_evt, p.verdict_evt = cmp_evt, verdict_evt  # what a domain switch stops (app.tabs.freshness)
    p.cmp_stop.click(named(p, stop_compare), [p.cmp_sid], components(p, ("cmp_status", "cmp_btn", "cmp_stop")), queue=False,
                     api_visibility="private", show_progress="hidden")
