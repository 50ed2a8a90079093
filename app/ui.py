"""The Gradio Blocks page: editor on top, then tabs for the step player, the comparison, the
statistics and the stored sessions. Handlers are thin: the logic lives in app.core (runs, replay),
app.render (HTML), app.plots (figures) and app.share (links)."""

from __future__ import annotations

import functools
import html
import inspect
import logging
import time

import gradio as gr

from engine.api import parse_for
from engine.errors import BadParameterError, InfillError
from engine.masking import from_token_positions
from engine.registry import load
from engine.samplers import SAMPLERS
from engine.trace import PASS_KINDS

from . import cards, core, plots, share
from .core import DOMAINS, EXAMPLES, Form, Live, readable
from .exports import write_export
from .render import CSS, DETAIL_HEADERS, counters_md, esc, view_html
from .slots import active_runs
from .textmap import bytes_fn, char_pieces

log = logging.getLogger("app")

PARAMS = ("k", "temperature", "steps", "dtau", "window", "inner")
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
#stop {max-width: 110px; min-width: 80px;}
#model-card {font-size: 0.85em; line-height: 1.35;}
#model-card p {margin: 2px 0;}
#token-count {font-size: 0.85em; margin-top: -6px;}
#player-controls button {min-width: 0;}
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


def domain_example(domain):
    """A person switching domain gets that domain's first example in the input box (never English
    text sent to the protein model)."""
    ex = EXAMPLES.get(domain, [])
    return ex[0] if ex else gr.update()


def model_card(model):
    return cards.card_markdown(model)


def input_info(text, model, domain):
    """The live line under the input: tokens against the model's limit, masked tokens, what the
    protein normaliser will change, or what is wrong, before anyone presses Run."""
    text = text if isinstance(text, str) else ""
    if len(text) > core.MAX_INPUT_CHARS:
        return _status(f"{len(text):,} characters: the studio takes at most {core.MAX_INPUT_CHARS:,}. "
                       "Shorten the input; nothing is cut silently.", "error")
    try:
        core.check_sentinels(text)
        text, note = core.normalize(domain, text)
        lm = _codec_for(model, domain)
        limit = lm.max_tokens
        if not text.strip():
            return f"**0 / {limit} tokens** (this model's limit). " + core.mask_units(domain, lm.codec)
        if "[MASK" in text:
            mi = parse_for(text, lm)
            n, masked, spans = len(mi.tokens), len(mi.masked), len(mi.span_ranges)
            line = (f"**{n} / {limit} tokens** (this model's limit), {masked} of them masked in {spans} span"
                    + ("s" if spans != 1 else "") + ". " + core.mask_units(domain, lm.codec))
        else:
            n = len(lm.codec.encode(text))
            line = (f"**{n} / {limit} tokens** (this model's limit). Nothing is masked yet. "
                    + core.mask_units(domain, lm.codec))
            if n > limit:
                return _status(f"{n} tokens: this model takes at most {limit}.", "error")
    except InfillError as e:
        return _status(str(e), "error")
    return line + (f" {note}" if note else "")


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
    ms = set(masked)
    pieces = char_pieces([None if i in ms else t for i, t in enumerate(ids)], bytes_fn(lm.codec))
    # a token that only continues the character on its left shows the dotted circle
    choices = [("▁" if i in ms else (_tok_label(pieces[i]) if pieces[i] else "◌"), i) for i in range(len(ids))]
    state = {"model": lm.name, "ids": ids, "mask_id": lm.codec.mask_id}
    return (gr.update(choices=choices, value=masked, visible=True), state,
            _status("Click tokens to mask or unmask them; the input box follows.", "info"))


@guarded
def toggle_tokens(selected, tok_state):
    """Rebuild the input text from the token view's checked (masked) positions, with the engine's
    one token-masking function (masks widen to whole characters, so the rest stays byte-identical)."""
    if not tok_state:
        return gr.update(), _status("Press Show tokens first.", "error")
    lm = load(tok_state["model"], allow_paths=False)
    ids, mask_id = tok_state["ids"], tok_state["mask_id"]
    sel = sorted({int(i) for i in (selected or [])} | {i for i, t in enumerate(ids) if t == mask_id})
    if not sel:
        return lm.codec.decode(ids), ""
    mi = from_token_positions(ids, sel, lm.codec, max_tokens=len(ids))
    widened = len(mi.masked) > len(sel)
    return mi.source, (_status("Masks widened to whole characters.", "info") if widened else "")


# ----------------------------------------------------------------------------- step player


TABLE_INTERVAL = 0.5  # seconds between two updates of the current-round table while a run streams


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
    """Stream a run: one update per round (throttled), ending with the completed text. The share
    link and the stored trace appear only in the last update, once the store holds the run."""
    blank = gr.update()
    idle_scrub = gr.update(interactive=False)
    try:
        live = core.start(_form(domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner),
                          owner=getattr(request, "session_hash", None))
    except Exception as e:  # noqa: BLE001 - every problem becomes a message
        msg = readable(e)
        _warn(msg)
        yield (_status(msg, "error"), "", view_html(None, message=msg), _empty_table(DETAIL_HEADERS),
               "", "", blank, blank, "")
        return
    sid = live.share_id
    note = core.normalize(domain, text)[1] if isinstance(text, str) else ""
    note = f" {note}" if note else ""
    wait = core.slots().estimate()  # every slot busy: say so, and for how long, before the first round
    if wait.busy:
        yield (_status(wait.message()), blank, blank, blank, "", "", idle_scrub, None, sid)
    try:
        first, table_at = True, 0.0
        for lv in core.throttled(core.rounds(live)):
            if lv.done:
                break
            frame = list(_player(lv, _status(f"Running {lv.run.spec.name}… round {lv.state.round + 1}.{note}")))
            now = time.perf_counter()
            if now - table_at < TABLE_INTERVAL:  # the round's table at most twice a second while streaming:
                frame[3] = blank  # nobody reads it faster, and each one costs the run time (issue 15, item 8)
            else:
                table_at = now
            yield (*frame, "", "", idle_scrub if first else blank, None if first else blank, sid)
            first = False
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        yield (*_player(live, _status(msg, "error")), "", "", blank, None, "")
        return
    if live.cancelled:  # cancelled while it waited for a model slot: nothing ran, nothing stored
        core.clear_stop(sid)
        return
    res = live.result
    core.clear_stop(sid)
    link = share.share_link(request, live.share_id)  # the run is stored: rounds() has left its recorder
    if res is None:  # Stop ended it after a round: stored as cancelled with the steps shown
        trace = {"view": live.view, "steps": live.steps, "title": _title(live, live.run.spec.name, live.run.lm.name)}
        yield (*_player(live, _stopped_msg(live.state)), "", link,
               gr.update(minimum=0, maximum=len(live.steps), value=len(live.steps), interactive=True), trace, "")
        return
    trace = {"view": live.view, "steps": live.steps, "title": _title(live, res.sampler, res.model)}
    lp = "" if res.log_prob is None else f", log-probability {res.log_prob:.2f}"
    done = _status(f"Done: {res.masked_tokens} tokens in {res.calls:g} calls{lp}. Stored; share it with the link."
                   + note, "ok")
    yield (*_player(live, done), res.text, link,
           gr.update(minimum=0, maximum=len(live.steps), value=len(live.steps), interactive=True), trace, "")


def _stopped_msg(st) -> str:
    return _status(f"Stopped after {st.decided} of {len(st.masked)} tokens. The partial run is stored as "
                   "cancelled; Play replays it and the link opens it.")


def stop_run(sid, request: gr.Request = None):
    """Stop pressed while a run streams: wait (briefly) until the store holds the run, then say what
    really happened: a run that finished first stays finished; a stopped one is stored as cancelled
    with its partial trace, which Replay and the share link then show."""
    keep = gr.update()
    idle = (gr.update(interactive=True), gr.update(interactive=False))
    if not sid:
        return (_status("Nothing is running."), keep, keep, keep, *idle)
    core.request_stop(sid)
    run = None
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        sess = core.store().get_session(sid)
        if sess is not None and sess.runs:
            run = sorted(sess.runs, key=lambda r: r.id)[-1]
            break
        time.sleep(0.05)
    if run is None:
        return (_status("Stopped before the first round was stored; nothing to replay."), keep, keep, keep, *idle)
    rp = core.load_session(sid)
    view = rp.view_for(run)
    trace = {"view": view, "steps": run.steps, "title": f"{run.sampler} on {run.params.get('model', '')}"}
    n = len(run.steps)
    core.clear_stop(sid)
    if run.status == "ok":
        msg = _status("The run had already finished before Stop arrived; it is stored complete.", "ok")
    else:
        msg = _stopped_msg(core.new_state(view, run.steps))
    return (msg, share.share_link(request, sid), trace,
            gr.update(minimum=0, maximum=n, value=n, interactive=True), *idle)


def _busy():
    return gr.update(interactive=False), gr.update(interactive=True)


def _idle():
    return gr.update(interactive=True), gr.update(interactive=False)


def _event(s) -> str:
    if s.kind in PASS_KINDS:
        return f"round {s.round + 1}: network pass ({s.kind.value.replace('_', ' ')})"
    n = len(s.positions)
    return f"round {s.round + 1}: {s.kind.value} {n} token" + ("s" if n != 1 else "")


def _frame(trace, i: int, st=None):
    """(player, detail, counters, position) after the first i steps of a stored trace."""
    steps = trace["steps"]
    i = max(0, min(int(i or 0), len(steps)))
    if st is None:
        st = core.new_state(trace["view"], steps, i)
    where = f"step {i}/{len(steps)}" + (f" · {_event(steps[i - 1])}" if i else "")
    return view_html(st, trace.get("title", "")), _table(st.detail), counters_md(st, where), i


def _nothing(msg="Run something (or open a share link) first."):
    return view_html(None, message=msg), _empty_table(DETAIL_HEADERS), "", gr.update()


@guarded
def scrub(i, trace):
    """Render the stored trace after its first i steps."""
    if not trace:
        return _nothing()[:3]
    return _frame(trace, i)[:3]


def _visible_step(steps, i: int, direction: int) -> int:
    """The next position (forward or back) after which something visible changed: network passes
    only move the counters, so a step skips over them."""
    n = len(steps)
    j = i + direction
    while 0 < j < n and steps[j - 1].kind in PASS_KINDS:
        j += direction
    return max(0, min(j, n))


@guarded
def step_forward(i, trace):
    if not trace:
        return _nothing()
    return _frame(trace, _visible_step(trace["steps"], int(i or 0), +1))


@guarded
def step_back(i, trace):
    if not trace:
        return _nothing()
    return _frame(trace, _visible_step(trace["steps"], int(i or 0), -1))


SPEEDS = ["as fast as it ran", "2 tokens/s", "5 tokens/s", "10 tokens/s", "30 tokens/s", "100 tokens/s"]
DEFAULT_SPEED = "5 tokens/s"
FRAME_GAP = 0.05  # seconds: frames closer than this are merged


def _delay(steps, j: int, speed: str) -> float:
    """Seconds to wait before showing step j: its tokens at the chosen playback rate, or the time
    it really took when playing as fast as it ran."""
    s = steps[j]
    if speed == SPEEDS[0]:
        prev = steps[j - 1].elapsed if j else 0.0
        return max(0.0, (s.elapsed or 0.0) - (prev or 0.0))
    if s.kind in PASS_KINDS:
        return 0.0
    try:
        rate = float(str(speed).split()[0])
    except ValueError:
        rate = 5.0
    return len(s.positions) / max(rate, 0.1)


@guarded
def play(i, trace, speed):
    """Play a stored trace from the current step (from the start when at the end); Pause stops it
    where it is. No model involved."""
    if not trace:
        yield _nothing("Nothing stored to play yet.")
        return
    steps = trace["steps"]
    i = int(i or 0)
    if i >= len(steps):
        i = 0
    st = core.new_state(trace["view"], steps, i)
    yield _frame(trace, i, st)
    due = time.perf_counter()
    for j in range(i, len(steps)):
        due += _delay(steps, j, speed)
        st.apply(steps[j])
        wait = due - time.perf_counter()
        if wait > FRAME_GAP or j == len(steps) - 1:
            time.sleep(max(0.0, wait))
            yield _frame(trace, j + 1, st)


@guarded
def replay(trace):
    """Animate a stored trace round by round from the start (no model involved)."""
    if not trace:
        yield _nothing("Nothing stored to replay yet.")
        return
    steps = trace["steps"]
    st = core.new_state(trace["view"])
    n_rounds = max(1, len({s.round for s in steps}))
    pause = min(0.15, 3.0 / n_rounds)
    cur = None
    for i, s in enumerate(steps):
        if cur is not None and s.round != cur:
            yield _frame(trace, i, st)
            time.sleep(pause)
        cur = s.round
        st.apply(s)
    yield _frame(trace, len(steps), st)


# ----------------------------------------------------------------------------- compare


def _logprob(lp) -> str:
    return "n/a (no exact joint for this sampler)" if lp is None else f"{lp:.2f}"


def _summary(lives: list[tuple[str, Live]]) -> dict:
    rows = []
    for side, lv in lives:
        st = lv.state
        r = lv.result
        tpc = "" if not st.calls else f"{st.decided / st.calls:.2f}"
        rows.append([side, lv.run.spec.name, lv.run.lm.name, f"{st.calls:g}", str(st.round + 1),
                     f"{st.decided}/{len(st.masked)}", tpc, f"{st.elapsed:.2f}",
                     "" if r is None else _logprob(r.log_prob)])
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
            lives.append(Live(run, view, core.new_state(view), sid, owner=getattr(request, "session_hash", None)))
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        empty = view_html(None, message=msg)
        yield (_status(msg, "error"), empty, empty, "", "", _empty_table(SUMMARY_HEADERS), blank, blank, "", "")
        return
    a, b = lives
    wait = core.slots().estimate()
    if wait.busy:
        yield (_status(wait.message()), blank, blank, blank, blank, blank, blank, blank, "", sid)
    its = [core.rounds(a), core.rounds(b)]
    gap, last, last_fig = core.min_interval(), 0.0, 0.0
    f1 = f2 = blank
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
                       counters_md(a.state), counters_md(b.state), _summary([("A", a), ("B", b)]), f1, f2, "", sid)
                if now - last_fig >= 1.0:  # the charts grow while it runs (about once a second)
                    last_fig = now
                    f1, f2 = plots.compare_figures([(f"A: {a.run.spec.name}", a.steps),
                                                    (f"B: {b.run.spec.name}", b.steps)])
        for it in its:  # let both recorders finish (store the runs)
            for _ in it:
                pass
        if a.cancelled or b.cancelled:
            return
    except Exception as e:  # noqa: BLE001
        msg = readable(e)
        _warn(msg)
        yield (_status(msg, "error"), blank, blank, blank, blank, blank, blank, blank, "", "")
        return
    core.clear_stop(sid)
    link = share.share_link(request, sid)  # both recorders have stored their runs
    f1, f2 = plots.compare_figures([(f"A: {a.run.spec.name}", a.steps), (f"B: {b.run.spec.name}", b.steps)])
    stopped = a.stopped or b.stopped
    yield (_status("Stopped: the partial runs are stored as cancelled; the link opens them." if stopped else
                   "Done: both runs stored; share them with the link.", "info" if stopped else "ok"),
           view_html(a.state, f"A: {a.run.spec.name}") + _completed_html(a),
           view_html(b.state, f"B: {b.run.spec.name}") + _completed_html(b),
           counters_md(a.state), counters_md(b.state), _summary([("A", a), ("B", b)]), f1, f2, link, "")


def stop_compare(sid):
    """Stop both sides after their current round (they are stored as cancelled)."""
    if sid:
        core.request_stop(sid)
        return _status("Stopping after this round…"), *_idle()
    return _status("Nothing is running."), *_idle()


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

    path = write_export("infill-stats", stats_to_csv(groups))
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
    st = core.new_state(view, main.steps)
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
            sides.append((run, core.new_state(v, run.steps)))
        (ra, sa), (rb, sb) = sides
        f1, f2 = plots.compare_figures([(f"A: {ra.sampler}", ra.steps), (f"B: {rb.sampler}", rb.steps)])
        rows = []
        for side, run, s in (("A", ra, sa), ("B", rb, sb)):
            rows.append([side, run.sampler, run.params.get("model", ""), f"{run.calls:g}", str(run.rounds),
                         f"{s.decided}/{len(s.masked)}", f"{run.masked_tokens / run.calls:.2f}" if run.calls else "",
                         f"{run.wall_seconds:.2f}", _logprob(run.logprob)])
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
            sampler = gr.Dropdown(sampler_names, value=core.DEFAULT_SAMPLER, elem_id="sampler",
                                  label="Sampler", scale=1, allow_custom_value=True)
            example = gr.Dropdown(EXAMPLES[first_domain], label="Examples", scale=2)
        # no max_length: the browser would cut a long paste silently; the count line and Run say why instead
        text = gr.Textbox(EXAMPLES[first_domain][0], lines=3, max_lines=8,
                          label="Input: mark spans with [MASK], [MASK:n] (tokens) or [MASK:nw] (words)",
                          elem_id="infill-text")
        tok_count = gr.Markdown(input_info(EXAMPLES[first_domain][0], init_models[0] if init_models else None,
                                           first_domain), elem_id="token-count")
        with gr.Row(equal_height=True):
            run_btn = gr.Button("Run", variant="primary", elem_id="run", scale=4)
            stop_btn = gr.Button("Stop", variant="stop", elem_id="stop", scale=0, size="sm", interactive=False)
            mask_btn = gr.Button("Mask selection", size="sm", elem_id="mask-selection", scale=1)
            tok_btn = gr.Button("Show tokens (click to mask)", size="sm", elem_id="show-tokens", scale=1)
        status = gr.Markdown("", elem_id="status")
        card = gr.Markdown(cards.card_markdown(init_models[0] if init_models else None), elem_id="model-card")
        tok_view = gr.CheckboxGroup([], label="Tokens: checked = masked", elem_id="token-toggle", visible=False)
        sel_a = gr.Number(0, visible=False, precision=0)
        sel_b = gr.Number(0, visible=False, precision=0)
        tok_state = gr.State(None)
        with gr.Accordion("Sampler parameters", open=True):
            sampler_help = gr.Markdown(core.sampler_help(sampler.value))
            with gr.Row():
                k = gr.Slider(1, 64, value=5, step=1, label="k", info=core.PARAM_HELP["k"] + "; 1 to 64")
                temperature = gr.Slider(0.05, 3.0, value=1.0, step=0.05, label="temperature",
                                        info=core.PARAM_HELP["temperature"] + "; 0.05 to 3")
                # precision=None: 1.5 is refused with a message instead of silently becoming 2
                seed = gr.Number(0, label="seed", precision=None, step=1,
                                 info=core.PARAM_HELP["seed"] + "; a whole number from 0", minimum=0, elem_id="seed")
            with gr.Row():
                steps = gr.Slider(1, 512, value=32, step=1, label="steps", info=core.PARAM_HELP["steps"] + "; 1 to 512",
                                  visible=False)
                dtau = gr.Slider(0.001, 1.0, value=0.05, step=0.001, label="dtau",
                                 info=core.PARAM_HELP["dtau"] + "; 0.001 to 1", visible=False)
                window = gr.Radio(["cosine", "linear"], value="cosine", label="window",
                                  info=core.PARAM_HELP["window"], visible=False)
                inner = gr.Slider(1, 64, value=1, step=1, label="inner", info=core.PARAM_HELP["inner"] + "; 1 to 64",
                                  visible=False)
        form_inputs = [domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner]

        with gr.Tabs(selected="player") as tabs:
            with gr.Tab("Step player", id="player"):
                counters = gr.Markdown("", elem_id="counters")
                with gr.Row(elem_id="player-controls", equal_height=True):
                    back_btn = gr.Button("◀ step back", size="sm", scale=1, min_width=90, elem_id="step-back")
                    play_btn = gr.Button("▶ play", size="sm", scale=1, min_width=70, elem_id="play")
                    pause_btn = gr.Button("❚❚ pause", size="sm", scale=1, min_width=70, elem_id="pause")
                    fwd_btn = gr.Button("step forward ▶", size="sm", scale=1, min_width=110, elem_id="step-forward")
                    speed = gr.Dropdown(SPEEDS, value=DEFAULT_SPEED, label="playback speed", scale=2, min_width=160,
                                        elem_id="speed", show_label=False, container=False)
                    replay_btn = gr.Button("replay from start", size="sm", scale=1, min_width=120, elem_id="replay")
                player = gr.HTML(view_html(None, message="Press Run to watch the sampler."), elem_id="player",
                                 js_on_load=None)
                scrub_sl = gr.Slider(0, 1, value=0, step=1, label="Step in the stored trace (drag to scrub)",
                                     interactive=False, elem_id="scrub")
                detail = gr.Dataframe(value=_empty_table(DETAIL_HEADERS), label="Current round",
                                      interactive=False, elem_id="detail", max_height=320)
                completed = gr.Textbox(label="Completed text", lines=3, elem_id="completed", interactive=False)
                link = gr.Textbox(label="Share link (appears once the run is stored)", buttons=["copy"],
                                  elem_id="share-link", interactive=False)
                trace_state = gr.State(None)
                run_sid = gr.State("")
            with gr.Tab("Compare", id="compare"):
                gr.Markdown("Side A uses the sampler and model picked above; choose side B here. "
                            "Both run on the same input and seed, one round each in turn.")
                with gr.Row():
                    sampler_b = gr.Dropdown(sampler_names, value="sequential" if "sequential" in SAMPLERS
                                            else sampler_names[0], label="Sampler B", allow_custom_value=True)
                    model_b = gr.Dropdown(init_models, value=init_models[0] if init_models else None, label="Model B",
                                      allow_custom_value=True)
                with gr.Row():
                    cmp_btn = gr.Button("Compare", variant="primary", elem_id="compare-run", scale=4)
                    cmp_stop = gr.Button("Stop", variant="stop", size="sm", scale=0, interactive=False,
                                         elem_id="compare-stop")
                cmp_status = gr.Markdown("", elem_id="compare-status")
                with gr.Row():
                    with gr.Column():
                        cnt_a = gr.Markdown("")
                        html_a = gr.HTML("", elem_id="compare-a")
                    with gr.Column():
                        cnt_b = gr.Markdown("")
                        html_b = gr.HTML("", elem_id="compare-b")
                summary = gr.Dataframe(value=_empty_table(SUMMARY_HEADERS), label="Summary", interactive=False)
                with gr.Row():
                    fig_rev = gr.Plot(show_label=False)
                    fig_run = gr.Plot(show_label=False)
                cmp_link = gr.Textbox(label="Share link (appears once both runs are stored)", buttons=["copy"],
                                      interactive=False)
                cmp_sid = gr.State("")
            with gr.Tab("Statistics", id="stats") as stats_tab:
                with gr.Row():
                    f_domain = gr.Dropdown(["all", *DOMAINS], value="all", label="Domain")
                    f_model = gr.Dropdown(["all", *init_models], value="all", label="Model", allow_custom_value=True)
                    f_sampler = gr.Dropdown(["all", *SAMPLERS], value="all", label="Sampler", allow_custom_value=True)
                    stats_btn = gr.Button("Refresh", variant="primary")
                stats_table = gr.Dataframe(value=_empty_table(STATS_HEADERS), label="Groups (model and sampler "
                                           "that really ran; finished runs only)", interactive=False,
                                           max_height=300, elem_id="stats-table")
                with gr.Row():
                    fig_acc = gr.Plot(show_label=False, elem_id="fig-acc")
                    fig_tpc = gr.Plot(show_label=False, elem_id="fig-tpc")
                fig_cvm = gr.Plot(show_label=False, elem_id="fig-cvm")
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
        # a person switching domain (not a restore) gets that domain's example in the input
        domain.input(domain_example, [domain], [text], api_visibility="private")
        model.change(model_card, [model], [card], api_visibility="private", queue=False)
        for src in (text, model, domain):
            src.change(input_info, [text, model, domain], [tok_count], api_visibility="private",
                       trigger_mode="always_last", show_progress="hidden")
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
        limit = active_runs()  # runs in progress; app.slots lets INFILL_CONCURRENCY of them compute at once
        run_evt = run_btn.click(_busy, None, [run_btn, stop_btn], queue=False, api_visibility="private").then(
            run_infill, form_inputs,
            [status, counters, player, detail, completed, link, scrub_sl, trace_state, run_sid],
            api_name="infill", concurrency_id="model", concurrency_limit=limit, show_progress="hidden",
        )
        run_evt.then(_idle, None, [run_btn, stop_btn], api_visibility="private").then(
            remember, [link, history], [history, recent_html], api_visibility="private")
        stop_btn.click(stop_run, [run_sid], [status, link, trace_state, scrub_sl, run_btn, stop_btn],
                       cancels=[run_evt], api_name="stop", queue=False).then(
            remember, [link, history], [history, recent_html], api_visibility="private")
        frame_outputs = [player, detail, counters, scrub_sl]
        scrub_sl.input(scrub, [scrub_sl, trace_state], [player, detail, counters], api_name="scrub",
                       trigger_mode="always_last", show_progress="hidden")
        play_evt = play_btn.click(play, [scrub_sl, trace_state, speed], frame_outputs, api_name="play",
                                  show_progress="hidden")
        pause_btn.click(None, None, None, cancels=[play_evt], api_visibility="private")
        fwd_btn.click(step_forward, [scrub_sl, trace_state], frame_outputs, api_name="step_forward",
                      show_progress="hidden", cancels=[play_evt])
        back_btn.click(step_back, [scrub_sl, trace_state], frame_outputs, api_name="step_back",
                       show_progress="hidden", cancels=[play_evt])
        replay_btn.click(replay, [trace_state], frame_outputs, api_name="replay", show_progress="hidden")
        cmp_evt = cmp_btn.click(_busy, None, [cmp_btn, cmp_stop], queue=False, api_visibility="private").then(
            run_compare, [*form_inputs, sampler_b, model_b],
            [cmp_status, html_a, html_b, cnt_a, cnt_b, summary, fig_rev, fig_run, cmp_link, cmp_sid],
            api_name="compare", concurrency_id="model", concurrency_limit=limit, show_progress="hidden",
        )
        cmp_evt.then(_idle, None, [cmp_btn, cmp_stop], api_visibility="private").then(
            remember, [cmp_link, history], [history, recent_html], api_visibility="private")
        cmp_stop.click(stop_compare, [cmp_sid], [cmp_status, cmp_btn, cmp_stop], queue=False,
                       api_visibility="private")

        # ---- statistics and sessions
        stats_outputs = [fig_acc, fig_tpc, fig_cvm, stats_table, csv_btn]
        stats_btn.click(stats, [f_domain, f_model, f_sampler], stats_outputs, api_name="stats")
        stats_tab.select(stats, [f_domain, f_model, f_sampler], stats_outputs, api_visibility="private")
        for f in (f_domain, f_model, f_sampler):
            f.input(stats, [f_domain, f_model, f_sampler], stats_outputs, api_visibility="private")
        recent_btn.click(recent, [history], [recent_html], api_name="recent")

        restore_outputs = [domain, model, text, sampler, k, temperature, seed, steps, dtau, window, inner,
                           status, counters, player, detail, completed, link, scrub_sl, trace_state, tabs,
                           sampler_b, model_b, html_a, html_b, cnt_a, cnt_b, summary, fig_rev, fig_run, cmp_link, cmp_status]

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
                            summary: c["summary"], fig_rev: c["f1"], fig_run: c["f2"], cmp_link: v["link"],
                            cmp_status: v["status"]})
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
