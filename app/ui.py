"""The Gradio Blocks page: editor on top, then tabs for the step player, the comparison, the
statistics and the stored sessions. Handlers are thin: the logic lives in app.core (runs, replay),
app.render (HTML), app.plots (figures) and app.share (links)."""

from __future__ import annotations

import functools
import html
import inspect
import logging
import os
import tempfile
import time

import gradio as gr

from engine.api import parse_for
from engine.errors import BadParameterError, InfillError
from engine.registry import load
from engine.samplers import DEFAULT_SAMPLER as DEFAULT_ENGINE_SAMPLER
from engine.samplers import SAMPLERS

from . import core, plots, share
from .core import DOMAINS, EXAMPLES, Form, Live, readable
from .render import CSS, DETAIL_HEADERS, counters_md, esc, fold, view_html

log = logging.getLogger("app")

PARAMS = ("k", "temperature", "steps", "dtau", "window", "inner")
DEFAULT_SAMPLER = DEFAULT_ENGINE_SAMPLER  # the sampler preselected in the form (engine: fastest exact on CPU)
SUMMARY_HEADERS = ["side", "sampler", "model", "calls", "rounds", "tokens", "tokens/call", "seconds", "log-probability"]
STATS_HEADERS = ["model", "sampler", "params", "runs", "masked tokens", "calls", "tokens/call", "tokens/round"]

MASK_SELECTION_JS = """
(text, a, b, model, domain) => {
  const el = document.querySelector('#infill-text textarea');
  if (el) { a = el.selectionStart; b = el.selectionEnd; }
  return [text, a, b, model, domain];
}
"""

EXTRA_CSS = """
#token-toggle .wrap {gap: 2px !important;}
#token-toggle label {padding: 1px 4px !important; font-family: ui-monospace, monospace; min-width: 0 !important;}
.tv-recent td, .tv-recent th {padding: 2px 8px; text-align: left;}
"""


def _warn(msg: str) -> None:
    """A toast with the message as text (Gradio renders toast messages as HTML)."""
    gr.Warning(html.escape(msg, quote=False))


def _as_error(e: Exception) -> gr.Error:
    return gr.Error(html.escape(readable(e), quote=False))


def guarded(fn):
    """A handler whose every failure reaches the visitor as a readable message (gr.Error), never a
    bare "Error" or a stack trace."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except gr.Error:
                raise
            except Exception as e:  # noqa: BLE001
                raise _as_error(e) from None
        return gen

    @functools.wraps(fn)
    def plain(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except Exception as e:  # noqa: BLE001
            raise _as_error(e) from None
    return plain


def _status(msg: str, kind: str = "info") -> str:
    icon = {"error": "⚠️ ", "ok": "✅ ", "info": ""}[kind]
    return f"{icon}{html.escape(msg, quote=False)}" if msg else ""


def _table(rows: list[list]) -> dict:
    return {"headers": DETAIL_HEADERS, "data": [[str(c) for c in r] for r in rows] or [[""] * len(DETAIL_HEADERS)]}


def _empty_table(headers: list[str]) -> dict:
    return {"headers": headers, "data": [[""] * len(headers)]}


def _title(live_or_run, sampler: str, model: str) -> str:
    return f"{sampler} on {model}"


def _form(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner) -> Form:
    return Form(domain=domain, model=model or None, text=text if text is not None else "", sampler=sampler,
                k=k, temperature=temperature, seed=seed, steps=steps, dtau=dtau, window=window or "cosine",
                inner=inner)


# ----------------------------------------------------------------------------- editor helpers


def models_for(domain: str, sampler: str, current: str | None = None):
    kind = core.sampler_kind(sampler)
    names = core.list_models(domain, kind)
    value = current if current in names else (names[0] if names else None)
    msg = "" if names else _status(core.no_model_message(domain, kind), "error")
    return gr.update(choices=names, value=value), msg


def on_domain(domain, sampler, model):
    upd, msg = models_for(domain, sampler, model)
    ex = EXAMPLES.get(domain, [])
    return upd, gr.update(choices=ex, value=None), msg


def on_sampler(sampler, domain, model):
    upd, msg = models_for(domain, sampler, model)
    spec = SAMPLERS.get(sampler)
    listed = set(spec.params) if spec else set()
    vis = [gr.update(visible=p in listed) for p in PARAMS]
    return (upd, core.sampler_help(sampler), msg, *vis)


def _codec_for(model: str | None, domain: str):
    names = core.list_models(domain)
    if not names:
        raise InfillError(core.no_model_message(domain, "any"))
    name = model if model in names else names[0]
    return load(name, allow_paths=False)


def mask_selection(text, a, b, model, domain):
    """Replace the selected characters with [MASK:n], n = their length in the model's tokens."""
    text = text or ""
    try:
        core.check_text(text)
    except InfillError as e:
        return text, _status(str(e), "error")
    try:
        a, b = int(a or 0), int(b or 0)
    except (TypeError, ValueError):
        a = b = 0
    a, b = max(0, min(a, len(text))), max(0, min(b, len(text)))
    if b <= a:
        return text, _status("Select some text in the input first, then press Mask selection.", "error")
    try:
        lm = _codec_for(model, domain)
        n = len(lm.codec.encode(text[a:b]))
    except InfillError as e:
        return text, _status(str(e), "error")
    return text[:a] + f"[MASK:{max(n, 1)}]" + text[b:], _status(f"Masked {b - a} characters ({n} tokens).", "ok")


def _tok_label(s: str) -> str:
    return s.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅"


def show_tokens(text, model, domain):
    """The clickable token view: one checkbox per token, checked = masked."""
    try:
        core.check_text(text or "")
        lm = _codec_for(model, domain)
        mi = parse_for(text or "", lm) if "[MASK" in (text or "") else None
        if mi is None:
            if not (text or "").strip():
                raise InfillError("The input is empty: type some text first.")
            ids = lm.codec.encode(text)
            if len(ids) > lm.max_tokens:
                raise InfillError(f"The input is {len(ids)} tokens long; this model takes at most {lm.max_tokens}.")
            masked = []
        else:
            ids, masked = list(mi.tokens), list(mi.masked)
    except InfillError as e:
        return gr.update(choices=[], value=[]), None, _status(str(e), "error")
    choices = [(("▁" if i in set(masked) else _tok_label(lm.codec.token_text(t))), i) for i, t in enumerate(ids)]
    state = {"model": lm.name, "ids": ids, "mask_id": lm.codec.mask_id}
    return (gr.update(choices=choices, value=masked, visible=True), state,
            _status("Click tokens to mask or unmask them; the input box follows.", "info"))


@guarded
def toggle_tokens(selected, tok_state):
    """Rebuild the input text from the token view's checked (masked) positions."""
    if not tok_state:
        return gr.update(), _status("Press Show tokens first.", "error")
    lm = load(tok_state["model"], allow_paths=False)
    ids, mask_id = tok_state["ids"], tok_state["mask_id"]
    sel = {int(i) for i in (selected or [])}
    out, i = [], 0
    while i < len(ids):
        if i in sel or ids[i] == mask_id:
            j = i
            while j < len(ids) and (j in sel or ids[j] == mask_id):
                j += 1
            out.append(f"[MASK:{j - i}]")
        else:
            j = i
            while j < len(ids) and j not in sel and ids[j] != mask_id:
                j += 1
            out.append(lm.codec.decode(ids[i:j]))
        i = j
    return "".join(out), ""


# ----------------------------------------------------------------------------- step player


def _player(live: Live, status: str):
    st = live.state
    return (
        status,
        counters_md(st),
        view_html(st, _title(live, live.run.spec.name, live.run.lm.name)),
        _table(st.detail),
    )


def run_infill(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner,
               request: gr.Request = None):
    """Stream a run: one update per round (throttled), ending with the completed text."""
    blank = gr.update()
    try:
        live = core.start(_form(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner))
    except Exception as e:  # noqa: BLE001 - every problem becomes a message
        msg = readable(e)
        _warn(msg)
        yield (_status(msg, "error"), "", view_html(None, message=msg), _empty_table(DETAIL_HEADERS),
               "", "", blank, None)
        return
    link = share.share_link(request, live.share_id)
    try:
        for lv in core.throttled(core.rounds(live)):
            if lv.done:
                break
            yield (*_player(lv, _status(f"Running {lv.run.spec.name}… round {lv.state.round + 1}")),
                   "", link, blank, None)
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        yield (*_player(live, _status(msg, "error")), "", link, blank, None)
        return
    res = live.result
    trace = {"view": live.view, "steps": live.steps, "title": _title(live, res.sampler, res.model)}
    lp = "" if res.log_prob is None else f", log-probability {res.log_prob:.2f}"
    done = _status(f"Done: {res.masked_tokens} tokens in {res.calls:g} calls{lp}. Stored; share it with the link.", "ok")
    yield (*_player(live, done), res.text, link,
           gr.update(minimum=0, maximum=len(live.steps), value=len(live.steps), interactive=True), trace)


@guarded
def scrub(i, trace):
    """Render the stored trace after its first i steps."""
    if not trace:
        return view_html(None, message="Run something (or open a share link) first."), _empty_table(DETAIL_HEADERS), ""
    steps = trace["steps"]
    i = max(0, min(int(i or 0), len(steps)))
    st = fold(trace["view"]["token_texts"], trace["view"]["masked"], steps, i)
    return view_html(st, trace.get("title", "")), _table(st.detail), counters_md(st, f"step {i}/{len(steps)}")


@guarded
def replay(trace):
    """Animate a stored trace round by round (no model involved)."""
    if not trace:
        yield view_html(None, message="Nothing stored to replay yet."), _empty_table(DETAIL_HEADERS), "", gr.update()
        return
    steps = trace["steps"]
    view = trace["view"]
    st = fold(view["token_texts"], view["masked"], [])
    n_rounds = max(1, len({s.round for s in steps}))
    pause = min(0.15, 3.0 / n_rounds)
    cur = None
    for i, s in enumerate(steps):
        if cur is not None and s.round != cur:
            yield view_html(st, trace.get("title", "")), _table(st.detail), counters_md(st, "replaying"), i
            time.sleep(pause)
        cur = s.round
        st.apply(s)
    yield view_html(st, trace.get("title", "")), _table(st.detail), counters_md(st, "replayed"), len(steps)


# ----------------------------------------------------------------------------- compare


def _summary(lives: list[tuple[str, Live]]) -> dict:
    rows = []
    for side, lv in lives:
        st = lv.state
        r = lv.result
        tpc = "" if not st.calls else f"{st.decided / st.calls:.2f}"
        rows.append([side, lv.run.spec.name, lv.run.lm.name, f"{st.calls:g}", str(st.round + 1),
                     f"{st.decided}/{len(st.masked)}", tpc, f"{st.elapsed:.2f}",
                     "" if r is None or r.log_prob is None else f"{r.log_prob:.2f}"])
    return {"headers": SUMMARY_HEADERS, "data": rows}


def run_compare(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner,
                sampler_b, model_b, request: gr.Request = None):
    """Two samplers on the same input and seed, advancing round by round side by side."""
    blank = gr.update()
    try:
        fa = _form(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner)
        fb = _form(domain, model_b, text, sampler_b, k, temperature, seed, steps, dtau, window, inner)
        ra, rb = core.prepare(fa), core.prepare(fb)
        sid = core.create_session("compare", [ra, rb], fa.text, domain)
        lives = []
        for run in (ra, rb):
            view = core.token_view(run)
            lives.append(Live(run, view, core.new_state(view), sid))
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        empty = view_html(None, message=msg)
        yield (_status(msg, "error"), empty, empty, "", "", _empty_table(SUMMARY_HEADERS), blank, blank, "")
        return
    link = share.share_link(request, sid)
    a, b = lives
    its = [core.rounds(a), core.rounds(b)]
    gap, last = core.min_interval(), 0.0
    try:
        while not (a.done and b.done):
            for lv, it in zip(lives, its):
                if not lv.done:
                    next(it, None)
            now = time.perf_counter()
            if a.done and b.done:
                break
            if now - last >= gap:
                last = now
                yield (_status(f"Comparing… round {a.state.round + 1} / {b.state.round + 1}"),
                       view_html(a.state, f"A: {a.run.spec.name}"), view_html(b.state, f"B: {b.run.spec.name}"),
                       counters_md(a.state), counters_md(b.state), _summary([("A", a), ("B", b)]), blank, blank, link)
        for it in its:  # let both recorders finish (store the runs)
            for _ in it:
                pass
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        yield (_status(msg, "error"), blank, blank, blank, blank, blank, blank, blank, link)
        return
    f1, f2 = plots.compare_figures([(f"A: {a.run.spec.name}", a.steps), (f"B: {b.run.spec.name}", b.steps)])
    yield (_status("Done: both runs stored; share them with the link.", "ok"),
           view_html(a.state, f"A: {a.run.spec.name}") + _completed_html(a),
           view_html(b.state, f"B: {b.run.spec.name}") + _completed_html(b),
           counters_md(a.state), counters_md(b.state), _summary([("A", a), ("B", b)]), f1, f2, link)


def _completed_html(lv: Live) -> str:
    if lv.result is None:
        return ""
    return f'<div class="tv-title">Completed text</div><pre class="tv-wrap">{esc(lv.result.text)}</pre>'


# ----------------------------------------------------------------------------- statistics


def _opt(v):
    return None if v in (None, "", "all") else v


@guarded
def stats(domain, model, sampler):
    groups = core.store().stats(domain=_opt(domain), model=_opt(model), sampler=_opt(sampler))
    f1, f2, f3 = plots.stats_figures(groups)
    rows = []
    for g in groups:
        tpc = g.mean_tokens_per_call
        tpr = g.mean_tokens_per_round
        rows.append([g.model, g.sampler, ", ".join(f"{k}={v}" for k, v in sorted(g.params.items()) if k != "model"),
                     str(g.runs), str(g.masked_tokens), f"{g.calls:g}",
                     "" if tpc is None else f"{tpc:.3f}", "" if tpr is None else f"{tpr:.3f}"])
    from storage import stats_to_csv

    fd, path = tempfile.mkstemp(prefix="infill-stats-", suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write(stats_to_csv(groups))
    table = {"headers": STATS_HEADERS, "data": rows or [[""] * len(STATS_HEADERS)]}
    return f1, f2, f3, table, gr.update(value=path, visible=True)


@guarded
def stats_filters():
    ms = sorted(set(core.list_models()) | {s.model for s in core.store().list_sessions(200)})
    return gr.update(choices=["all", *ms]), gr.update(choices=["all", *SAMPLERS])


# ----------------------------------------------------------------------------- share / restore


HISTORY_MAX = 50  # share ids a browser remembers


def _own_ids(ids) -> list[str]:
    return [i for i in (ids if isinstance(ids, list) else []) if isinstance(i, str)][:HISTORY_MAX]


@guarded
def recent(ids):
    """The sessions this browser ran or opened (ids kept in its localStorage), newest first. The store
    is never listed wholesale: a share id is the only key to a session."""
    return share.recent_html(core.store().list_sessions(HISTORY_MAX, share_ids=_own_ids(ids)))


def remember(link, ids):
    """Add the session behind `link` to this browser's history and redraw the list."""
    ids = _own_ids(ids)
    sid = share.share_id_from_link(link)
    if sid and sid not in ids:
        ids = [sid, *ids][:HISTORY_MAX]
    return ids, recent(ids)


def _restore_values(share_id: str, request=None):
    """Everything the page shows for a stored session, from the store only (no model run)."""
    rp = core.load_session(share_id)
    if not rp.runs:
        raise BadParameterError("This session has no stored run to replay.")
    sess = rp.session
    main = rp.runs[0]
    view = rp.view_for(main)
    prm = main.params
    st = fold(view["token_texts"], view["masked"], main.steps)
    title = f"{main.sampler} on {prm.get('model', sess.model)}"
    trace = {"view": view, "steps": main.steps, "title": title}
    note = "" if main.status == "ok" else f" (this run was {main.status}; the partial trace is shown)"
    out = {
        "domain": sess.domain,
        "model": prm.get("model", sess.model.split(" | ")[0]),
        "text": sess.text,
        "sampler": main.sampler,
        "k": prm.get("k", 5), "temperature": prm.get("temperature", 1.0), "seed": main.seed or 0,
        "steps": prm.get("steps", 32), "dtau": prm.get("dtau", 0.05), "window": prm.get("window", "cosine"),
        "inner": prm.get("inner", 1),
        "status": _status(f"Restored shared session {sess.share_id}{note}. Replayed from the store; "
                          "no model was run.", "ok"),
        "counters": counters_md(st),
        "player": view_html(st, title),
        "detail": _table(st.detail),
        "completed": main.completed_text,
        "link": share.share_link(request, sess.share_id),
        "nsteps": len(main.steps),
        "trace": trace,
        "compare": None,
    }
    if rp.kind == "compare" and len(rp.runs) >= 2:
        sides = []
        for run in rp.runs[:2]:
            v = rp.view_for(run)
            sides.append((run, fold(v["token_texts"], v["masked"], run.steps)))
        (ra, sa), (rb, sb) = sides
        f1, f2 = plots.compare_figures([(f"A: {ra.sampler}", ra.steps), (f"B: {rb.sampler}", rb.steps)])
        rows = []
        for side, run, s in (("A", ra, sa), ("B", rb, sb)):
            rows.append([side, run.sampler, run.params.get("model", ""), f"{run.calls:g}", str(run.rounds),
                         f"{s.decided}/{len(s.masked)}", f"{run.masked_tokens / run.calls:.2f}" if run.calls else "",
                         f"{run.wall_seconds:.2f}", "" if run.logprob is None else f"{run.logprob:.2f}"])
        out["compare"] = {
            "a": view_html(sa, f"A: {ra.sampler}") + f'<pre class="tv-wrap">{esc(ra.completed_text)}</pre>',
            "b": view_html(sb, f"B: {rb.sampler}") + f'<pre class="tv-wrap">{esc(rb.completed_text)}</pre>',
            "ca": counters_md(sa), "cb": counters_md(sb), "summary": {"headers": SUMMARY_HEADERS, "data": rows},
            "f1": f1, "f2": f2, "sampler_b": rb.sampler, "model_b": rb.params.get("model"),
        }
    return out


# ----------------------------------------------------------------------------- layout


def build() -> gr.Blocks:
    sampler_names = list(SAMPLERS)
    first_domain = DOMAINS[0]
    init_models = core.list_models(first_domain, "asarm")
    with gr.Blocks(title="Infilling studio") as demo:
        gr.Markdown("# Infilling studio\nMask spans of text, code or protein; watch speculative samplers fill them.")
        with gr.Row():
            domain = gr.Radio(DOMAINS, value=first_domain, label="Domain", scale=1)
            model = gr.Dropdown(init_models, value=init_models[0] if init_models else None, label="Model", scale=1,
                                allow_custom_value=True)
            sampler = gr.Dropdown(sampler_names, value=DEFAULT_SAMPLER if DEFAULT_SAMPLER in SAMPLERS else sampler_names[0],
                                  label="Sampler", scale=1, allow_custom_value=True)
            example = gr.Dropdown(EXAMPLES[first_domain], label="Examples", scale=2)
        text = gr.Textbox(EXAMPLES[first_domain][0], lines=4, label="Input: [MASK] or [MASK:n] marks a span of n tokens",
                          elem_id="infill-text", max_length=core.MAX_INPUT_CHARS)
        with gr.Row():
            mask_btn = gr.Button("Mask selection", size="sm", elem_id="mask-selection")
            tok_btn = gr.Button("Show tokens (click to mask)", size="sm", elem_id="show-tokens")
        tok_view = gr.CheckboxGroup([], label="Tokens: checked = masked", elem_id="token-toggle", visible=False)
        sel_a = gr.Number(0, visible=False, precision=0)
        sel_b = gr.Number(0, visible=False, precision=0)
        tok_state = gr.State(None)
        with gr.Accordion("Sampler parameters", open=True):
            sampler_help = gr.Markdown(core.sampler_help(sampler.value))
            with gr.Row():
                k = gr.Slider(1, 64, value=5, step=1, label="k", info=core.PARAM_HELP["k"])
                temperature = gr.Slider(0.05, 3.0, value=1.0, step=0.05, label="temperature",
                                        info=core.PARAM_HELP["temperature"])
                seed = gr.Number(0, label="seed", precision=0, info=core.PARAM_HELP["seed"], minimum=0, elem_id="seed")
            with gr.Row():
                steps = gr.Slider(1, 512, value=32, step=1, label="steps", info=core.PARAM_HELP["steps"], visible=False)
                dtau = gr.Slider(0.001, 1.0, value=0.05, step=0.001, label="dtau", info=core.PARAM_HELP["dtau"],
                                 visible=False)
                window = gr.Radio(["cosine", "linear"], value="cosine", label="window",
                                  info=core.PARAM_HELP["window"], visible=False)
                inner = gr.Slider(1, 64, value=1, step=1, label="inner", info=core.PARAM_HELP["inner"], visible=False)
        status = gr.Markdown("", elem_id="status")
        form_inputs = [domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner]

        with gr.Tabs(selected="player") as tabs:
            with gr.Tab("Step player", id="player"):
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary", elem_id="run")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
                counters = gr.Markdown("", elem_id="counters")
                player = gr.HTML(view_html(None, message="Press Run to watch the sampler."), elem_id="player",
                                 js_on_load=None)
                detail = gr.Dataframe(value=_empty_table(DETAIL_HEADERS), label="Current round",
                                      interactive=False, elem_id="detail")
                completed = gr.Textbox(label="Completed text", lines=3, elem_id="completed", interactive=False)
                link = gr.Textbox(label="Share link", buttons=["copy"], elem_id="share-link", interactive=False)
                with gr.Row():
                    scrub_sl = gr.Slider(0, 1, value=0, step=1, label="Scrub stored steps", interactive=False,
                                         elem_id="scrub", scale=4)
                    replay_btn = gr.Button("Replay", size="sm", scale=1, elem_id="replay")
                trace_state = gr.State(None)
            with gr.Tab("Compare", id="compare"):
                gr.Markdown("Side A uses the sampler and model picked above; choose side B here. "
                            "Both run on the same input and seed, one round each in turn.")
                with gr.Row():
                    sampler_b = gr.Dropdown(sampler_names, value="sequential" if "sequential" in SAMPLERS
                                            else sampler_names[0], label="Sampler B", allow_custom_value=True)
                    model_b = gr.Dropdown(init_models, value=init_models[0] if init_models else None, label="Model B",
                                      allow_custom_value=True)
                with gr.Row():
                    cmp_btn = gr.Button("Compare", variant="primary", elem_id="compare-run")
                    cmp_stop = gr.Button("Stop", variant="stop")
                cmp_status = gr.Markdown("")
                with gr.Row():
                    with gr.Column():
                        cnt_a = gr.Markdown("")
                        html_a = gr.HTML("", elem_id="compare-a")
                    with gr.Column():
                        cnt_b = gr.Markdown("")
                        html_b = gr.HTML("", elem_id="compare-b")
                summary = gr.Dataframe(value=_empty_table(SUMMARY_HEADERS), label="Summary", interactive=False)
                with gr.Row():
                    fig_rev = gr.Plot(label="Tokens revealed against calls")
                    fig_run = gr.Plot(label="Accepted run length per round")
                cmp_link = gr.Textbox(label="Share link", buttons=["copy"], interactive=False)
            with gr.Tab("Statistics", id="stats"):
                with gr.Row():
                    f_domain = gr.Dropdown(["all", *DOMAINS], value="all", label="Domain")
                    f_model = gr.Dropdown(["all", *init_models], value="all", label="Model", allow_custom_value=True)
                    f_sampler = gr.Dropdown(["all", *SAMPLERS], value="all", label="Sampler", allow_custom_value=True)
                    stats_btn = gr.Button("Refresh", variant="primary")
                stats_table = gr.Dataframe(value=_empty_table(STATS_HEADERS), label="Groups", interactive=False)
                with gr.Row():
                    fig_acc = gr.Plot()
                    fig_tpc = gr.Plot()
                fig_cvm = gr.Plot()
                csv_btn = gr.DownloadButton("Download CSV", visible=False)
            with gr.Tab("Sessions", id="sessions"):
                with gr.Row():
                    open_id = gr.Textbox(label="Open a share id", scale=3)
                    open_btn = gr.Button("Open", scale=1)
                    recent_btn = gr.Button("Refresh list", scale=1)
                recent_html = gr.HTML("")
        history = gr.BrowserState([], storage_key="infill-studio-history")

        # ---- editor events
        domain.change(on_domain, [domain, sampler, model], [model, example, status], api_visibility="private")
        sampler.change(on_sampler, [sampler, domain, model],
                       [model, sampler_help, status, k, temperature, steps, dtau, window, inner],
                       api_visibility="private")
        domain.change(lambda d, s, m: models_for(d, s, m)[0], [domain, sampler_b, model_b], [model_b],
                      api_visibility="private")
        sampler_b.change(lambda d, s, m: models_for(d, s, m)[0], [domain, sampler_b, model_b], [model_b],
                         api_visibility="private")
        example.input(lambda e: e or gr.update(), [example], [text], api_visibility="private")
        mask_btn.click(mask_selection, [text, sel_a, sel_b, model, domain], [text, status], js=MASK_SELECTION_JS,
                       api_name="mask_selection")
        tok_btn.click(show_tokens, [text, model, domain], [tok_view, tok_state, status], api_name="show_tokens")
        tok_view.input(toggle_tokens, [tok_view, tok_state], [text, status], api_name="toggle_tokens",
                       trigger_mode="always_last")

        # ---- runs (the model-bound events share one concurrency pool)
        limit = int(os.environ.get("INFILL_CONCURRENCY", "2"))
        run_evt = run_btn.click(
            run_infill, form_inputs, [status, counters, player, detail, completed, link, scrub_sl, trace_state],
            api_name="infill", concurrency_id="model", concurrency_limit=limit, show_progress="hidden",
        )
        run_evt.then(remember, [link, history], [history, recent_html], api_visibility="private")
        stop_btn.click(lambda: _status("Stopped. The partial run is stored as cancelled."), None, [status],
                       cancels=[run_evt], api_name="stop", queue=False)
        scrub_sl.input(scrub, [scrub_sl, trace_state], [player, detail, counters], api_name="scrub",
                       trigger_mode="always_last", show_progress="hidden")
        replay_btn.click(replay, [trace_state], [player, detail, counters, scrub_sl], api_name="replay",
                         show_progress="hidden")
        cmp_evt = cmp_btn.click(
            run_compare, [*form_inputs, sampler_b, model_b],
            [cmp_status, html_a, html_b, cnt_a, cnt_b, summary, fig_rev, fig_run, cmp_link],
            api_name="compare", concurrency_id="model", concurrency_limit=limit, show_progress="hidden",
        )
        cmp_evt.then(remember, [cmp_link, history], [history, recent_html], api_visibility="private")
        cmp_stop.click(lambda: _status("Stopped."), None, [cmp_status], cancels=[cmp_evt], queue=False,
                       api_visibility="private")

        # ---- statistics and sessions
        stats_outputs = [fig_acc, fig_tpc, fig_cvm, stats_table, csv_btn]
        stats_btn.click(stats, [f_domain, f_model, f_sampler], stats_outputs, api_name="stats")
        for f in (f_domain, f_model, f_sampler):
            f.input(stats, [f_domain, f_model, f_sampler], stats_outputs, api_visibility="private")
        recent_btn.click(recent, [history], [recent_html], api_name="recent")

        restore_outputs = [domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner,
                           status, counters, player, detail, completed, link, scrub_sl, trace_state, tabs,
                           sampler_b, model_b, html_a, html_b, cnt_a, cnt_b, summary, fig_rev, fig_run, cmp_link]

        def restore(share_id, request: gr.Request = None):
            """Restore a stored session's inputs and trace (no model runs)."""
            try:
                v = _restore_values(share_id, request)
            except Exception as e:  # noqa: BLE001
                msg = readable(e)
                _warn(msg)
                return {status: _status(msg, "error"),
                        player: view_html(None, message=msg)}
            kind = core.sampler_kind(v["sampler"])
            names = core.list_models(v["domain"], kind)
            upd = {
                domain: v["domain"],
                model: gr.update(choices=sorted(set(names) | {v["model"]}), value=v["model"]),
                text: v["text"], sampler: v["sampler"], k: v["k"], temperature: v["temperature"], seed: v["seed"],
                steps: v["steps"], dtau: v["dtau"], window: v["window"], inner: v["inner"],
                status: v["status"], counters: v["counters"], player: v["player"], detail: v["detail"],
                completed: v["completed"], link: v["link"],
                scrub_sl: gr.update(minimum=0, maximum=v["nsteps"], value=v["nsteps"], interactive=True),
                trace_state: v["trace"],
            }
            c = v["compare"]
            if c is not None:
                upd.update({tabs: gr.Tabs(selected="compare"), sampler_b: c["sampler_b"],
                            model_b: gr.update(choices=[c["model_b"]], value=c["model_b"]),
                            html_a: c["a"], html_b: c["b"], cnt_a: c["ca"], cnt_b: c["cb"],
                            summary: c["summary"], fig_rev: c["f1"], fig_run: c["f2"], cmp_link: v["link"]})
            return upd

        def on_load(request: gr.Request):
            sid = share.share_id_from(request)
            base = {}
            d_upd, _, msg = on_domain(first_domain, sampler.value, None)
            if not sid:
                base.update({model: d_upd, model_b: models_for(first_domain, sampler_b.value, None)[0],
                             status: msg})
                return base
            r = restore(sid, request)
            if model not in r:
                r[model] = d_upd
            base.update(r)
            return base

        open_btn.click(restore, [open_id], restore_outputs, api_name="load_share").then(
            remember, [link, history], [history, recent_html], api_visibility="private")
        demo.load(on_load, None, restore_outputs, api_visibility="private").then(
            remember, [link, history], [history, recent_html], api_visibility="private")
        demo.load(stats_filters, None, [f_model, f_sampler], api_visibility="private")
    return demo


def launch_kwargs() -> dict:
    return {"css": CSS + EXTRA_CSS}
