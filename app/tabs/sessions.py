"""The Sessions tab and share links: this browser's own list of sessions (ids kept in its
localStorage; the store is never listed wholesale), and restoring a stored session, from a link
or an id, into the editor, the player and the compare view without running any model."""

from __future__ import annotations

import gradio as gr

from app import choices
from app.errors import readable
from app.stored import replay, share
from app.stored.store import store
from app.views import plots, token_views
from app.views.render import counters_md, esc, view_html
from engine.errors import BadParameterError
from engine.params import KNOBS

from . import exactness
from .common import PUBLISHED_FIELDS, Page, added_fields, components, detail_table, guarded, status_md, warn
from .compare import SUMMARY_HEADERS, logprob_text, summary_row
from .editor import models_b, models_for
from .player import RESTORED_JS

HISTORY_MAX = 50  # share ids a browser remembers
#: a run stored before compute seconds were kept has its wall time only (the sides alternated, so
#: each counts the other's rounds): said so in the column's name and under the counters
WALL_NOTE = "seconds: wall time while the sides alternated"
WALL_HEADERS = [h if h != "compute seconds" else "wall seconds (sides alternating)" for h in SUMMARY_HEADERS]


def _seconds(runs) -> tuple[list[float], list[str], str | None]:
    """The seconds a restored comparison shows for its runs: the compute seconds the live Compare
    showed (stored with each run), with its column name; the wall seconds, named as such, for a
    comparison stored before compute seconds were kept."""
    if all(r.compute_seconds is not None for r in runs):
        return [r.compute_seconds for r in runs], SUMMARY_HEADERS, None
    return [r.wall_seconds for r in runs], WALL_HEADERS, WALL_NOTE


def _own_ids(ids) -> list[str]:
    return [i for i in (ids if isinstance(ids, list) else []) if isinstance(i, str)][:HISTORY_MAX]


@guarded
def recent(ids):
    """The sessions this browser ran or opened (ids kept in its localStorage), newest first. The store
    is never listed wholesale: a share id is the only key to a session."""
    return share.recent_html(store().list_sessions(HISTORY_MAX, share_ids=_own_ids(ids)))


def remember(link, ids):
    """Add the session behind `link` to this browser's history and redraw the list."""
    ids = _own_ids(ids)
    sid = share.share_id_from_link(link)
    if sid and sid not in ids:
        ids = [sid, *ids][:HISTORY_MAX]
    return ids, recent(ids)


def _stored_verdict(spans) -> str:
    """The verdict a comparison was stored with (Markdown the page wrote; the names in it were
    escaped there), or a line saying none was kept."""
    said = spans.get("verdict") if isinstance(spans, dict) else None
    if isinstance(said, str) and said:
        return said + " *(The verdict stored with this comparison, not timed again.)*"
    return ("**Verdict:** none was stored with this comparison (its timing did not finish, or it was stored "
            "before verdicts were kept). Press Compare to run and time both again.")


def _compare_values(rp) -> dict:
    """The compare view of a stored compare session: both sides, the summary and the charts."""
    sides = []
    for run in rp.runs[:2]:
        v = rp.view_for(run)
        sides.append((run, token_views.new_state(v, run.steps)))
    (ra, sa), (rb, sb) = sides
    f1, f2 = plots.compare_figures([(f"A: {ra.sampler}", ra.steps), (f"B: {rb.sampler}", rb.steps)])
    seconds, headers, note = _seconds([ra, rb])
    rows = []
    for side, run, s, secs in (("A", ra, sa, seconds[0]), ("B", rb, sb, seconds[1])):
        s.elapsed = secs  # the counters read the same seconds as the table, as the live Compare's do
        rows.append(summary_row(side, run.sampler, run.params.get("model", ""), s, secs,
                                logprob_text(run.logprob)))
    return {
        "a": view_html(sa, f"A: {ra.sampler}") + f'<pre class="tv-wrap">{esc(ra.completed_text)}</pre>',
        "b": view_html(sb, f"B: {rb.sampler}") + f'<pre class="tv-wrap">{esc(rb.completed_text)}</pre>',
        "ca": counters_md(sa, note or ""), "cb": counters_md(sb, note or ""),
        "summary": {"headers": headers, "data": rows},
        "f1": f1, "f2": f2, "sampler_b": rb.sampler, "model_b": rb.params.get("model"),
        "verdict": _stored_verdict(rp.session.spans),
        "status": status_md(
            f"Restored shared comparison {rp.session.share_id}: A {ra.sampler} on {ra.params.get('model', '')} "
            f"against B {rb.sampler} on {rb.params.get('model', '')}, seed {ra.seed or 0}, both runs read from the "
            "store (no model was run). Press Compare to run both again and time them against each other.", "ok"),
    }


def restore_values(share_id: str, request=None) -> dict:
    """Everything the page shows for a stored session, from the store only (no model run)."""
    rp = replay.load_session(share_id)
    if not rp.runs:
        raise BadParameterError("This session has no stored run to replay.")
    sess = rp.session
    main = rp.runs[0]
    view = rp.view_for(main)
    prm = main.params
    st = token_views.new_state(view, main.steps)
    title = f"{main.sampler} on {prm.get('model', sess.model)}"
    note = "" if main.status == "ok" else f" (this run was {main.status}; the partial trace is shown)"
    if rp.kind == "compare" and len(rp.runs) < 2:  # stored before comparisons were stored whole
        note += (". This comparison holds only one side: the other was never stored (the server stopped "
                 "before it was written), so there is no comparison to show")
    return {
        "domain": sess.domain,
        "model": prm.get("model", sess.model.split(" | ")[0]),
        "text": sess.text,
        "sampler": main.sampler,
        **{name: prm.get(name, k.page_default) for name, k in KNOBS.items()},  # the run's, else the page's start
        "seed": str(main.seed or 0),
        "status": status_md(
            f"Restored shared session {sess.share_id}: {main.sampler} on {prm.get('model', sess.model)}, seed "
            f"{main.seed or 0}, {len(view['masked'])} masked tokens in {st.round + 1} rounds{note}. Read from the "
            "store, no model was run; the trace below shows its end: press ▶ play (from the start) or replay "
            "from start to watch it.", "ok"),
        "counters": counters_md(st, f"restored from a share link ({main.sampler}, seed {main.seed or 0}): "
                                    "press ▶ play to watch it"),
        "player": view_html(st, title),
        "detail": detail_table(st.detail),
        "completed": main.completed_text,
        "link": share.share_link(request, sess.share_id),
        "nsteps": len(main.steps),
        "trace": replay.trace_ref(main.id, view, main.steps, title),  # the player's state holds the run's id
        "compare": _compare_values(rp) if rp.kind == "compare" and len(rp.runs) >= 2 else None,
    }


def _updates(p: Page, v: dict) -> dict:
    """The restored values as updates of the page's components."""
    names = choices.list_models(v["domain"], choices.sampler_kind(v["sampler"]))
    upd = {
        p.domain: v["domain"], p.model: gr.update(choices=sorted(set(names) | {v["model"]}), value=v["model"]),
        p.text: v["text"], p.sampler: v["sampler"], p.seed: v["seed"], **{p.knobs[name]: v[name] for name in KNOBS},
        p.status: v["status"], p.counters: v["counters"], p.player: v["player"], p.detail: v["detail"],
        p.completed: v["completed"], p.link: v["link"],
        p.scrub_sl: gr.update(minimum=0, maximum=v["nsteps"], value=v["nsteps"], interactive=True),
        p.trace_state: v["trace"],
    }
    c = v["compare"]
    if c is not None:
        upd.update({p.tabs: gr.Tabs(selected="compare"), p.sampler_b: c["sampler_b"],
                    p.model_b: gr.update(choices=[c["model_b"]], value=c["model_b"]),
                    p.html_a: c["a"], p.html_b: c["b"], p.cnt_a: c["ca"], p.cnt_b: c["cb"],
                    p.summary: c["summary"], p.fig_rev: c["f1"], p.fig_run: c["f2"], p.cmp_link: v["link"],
                    p.cmp_status: c["status"], p.cmp_verdict: c["verdict"]})
    return upd


def restorer(p: Page):
    """The handler that restores a stored session's inputs and trace into page `p` (no model runs)."""
    def restore(share_id, request: gr.Request = None):
        """Restore a stored session's inputs and trace (no model runs)."""
        try:
            chk = exactness.stored_check(share_id)  # an exactness check has no runs: its own view
            if chk is not None:
                return exactness.restore_updates(p, share_id.strip(), chk, request)
            v = restore_values(share_id, request)
        except Exception as e:  # noqa: BLE001
            msg = readable(e)
            warn(msg)
            return {p.status: status_md(msg, "error"), p.player: view_html(None, message=msg)}
        return _updates(p, v)
    return restore


def only(restore, outputs: list):
    """`restore` with its updates cut to `outputs` (Gradio refuses an update of a component that is
    not one of the event's outputs)."""
    keep = {c._id for c in outputs}

    def restore_published(share_id, request: gr.Request = None):
        """Restore a stored session's inputs and trace (no model runs)."""
        return {c: v for c, v in restore(share_id, request).items() if c._id in keep}
    return restore_published


def loader(p: Page, restore):
    """The page-load handler: the first domain's models, or the session in the link's ?s=."""
    def on_load(request: gr.Request):
        sid = share.share_id_from(request)
        first = models_for(p.first_domain, p.sampler.value)
        if not sid:
            return {p.component(name): v for name, v in {**models_b(p.first_domain, p.sampler_b.value, None),
                                                         **first}.items()}
        r = restore(sid, request)
        if p.model not in r:
            r[p.model] = first["model"]
        return r
    return on_load


def layout(p: Page) -> None:
    """Open a share id, refresh the list, and the list itself."""
    with gr.Row():
        p.open_id = gr.Textbox(label="Open a share id", scale=3)
        p.open_btn = gr.Button("Open", scale=1)
        p.recent_btn = gr.Button("Refresh list", scale=1)
    p.recent_html = gr.HTML("")


def wire(p: Page) -> None:
    """Refresh list, Open, and the page load (restoring the session of a share link)."""
    p.recent_btn.click(recent, [p.history], [p.recent_html], api_name="recent")
    # /load_share's outputs as published (HTTP clients read them by position, from either end): the
    # published form fields and the views. The page's own restore also sets the knobs added since
    # (app.run.form.added_fields); the API's endpoint is carried by an invisible button, as /infill is
    published = [*components(p, PUBLISHED_FIELDS), p.status, p.counters, p.player, p.detail, p.completed, p.link,
                 p.scrub_sl, p.trace_state, p.tabs, p.sampler_b, p.model_b, p.html_a, p.html_b, p.cnt_a, p.cnt_b,
                 p.summary, p.fig_rev, p.fig_run, p.cmp_link, p.cmp_status, *exactness.outputs(p)]
    restore_outputs = [*published, p.cmp_verdict, *components(p, added_fields()),  # the verdict: page only
                       *exactness.late_outputs(p)]
    restore = restorer(p)
    # Open shows another session: a playback going on (app.tabs.player) would paint the old one over it
    p.open_btn.click(restore, [p.open_id], restore_outputs, cancels=p.playing, api_visibility="private").then(
        remember, [p.link, p.history], [p.history, p.recent_html], api_visibility="private")
    p.api_open_btn = gr.Button(visible=False)
    p.api_open_btn.click(only(restore, published), [p.open_id], published, api_name="load_share")
    p.demo.load(loader(p, restore), None, restore_outputs, api_visibility="private").then(
        None, [p.hide_old], None, js=RESTORED_JS, api_visibility="private").then(
        remember, [p.link, p.history], [p.history, p.recent_html], api_visibility="private")
