"""The Exactness tab: a visitor's own sentence with a masked span, N fills drawn from each chosen
sampler (engine/exactness/check.py), and side by side the frequency of every likely fill against
the model's exact probability, with each sampler's verdict in plain words, its p-value, the test's
power against the deliberately wrong rules, where it departs most, calls and time.

Deliberately wrong samplers (`wrong-...`) are offered here and nowhere else. A finished check is
stored as a session of kind "exactness" (its settings and counts, no traces), so its share link
replays the chart and the table from the store without running anything."""

from __future__ import annotations

import math
import time

import gradio as gr

from app import choices
from app.errors import readable
from app.run.form import served_seed
from app.run.inputs import as_int, check_sentinels, check_text
from app.serving import stops
from app.serving.admission import admission
from app.serving.slots import Cancelled, Turns, slots
from app.serving.store_budget import store_budget
from app.serving.visitors import request_address
from app.stored import share
from app.stored.store import store
from app.views.check_result import TOP_FILLS, figure, summary, table_html
from app.views.render import esc
from engine.errors import BadParameterError, InfillError
from engine.exactness.check import CheckBudget, ExactnessCheck
from engine.exactness.fit import ALPHA, pooled_cells
from engine.exactness.law import fill_key
from engine.exactness.result import CheckResult, from_json
from engine.exactness.wrong_samplers import check_samplers
from engine.loading import registry
from engine.params import KNOBS

from . import exactness_knobs
from .common import Page, busy, components, guarded, idle, named, status_md, warn

KIND = "exactness"  # the stored session's kind
EXAMPLE = "It was the best of times, it was the [MASK:2] of times."
#: the tab's example per domain: it follows the editor's domain and model (a stock example is swapped,
#: a sentence the visitor typed is kept)
EXAMPLES = {"text": EXAMPLE, "code": "def area(width, height):\n    return [MASK:3]\n",
            "protein": "MKTAYIAKQRQISFVKSH[MASK:2]LDNLS"}
DEFAULT_SAMPLERS = ["sequential-cache", "assd-cache", "assd-pipelined", "assd-ptp", "wrong-assd-residual-from-q"]
INTRO = (
    "**Is it really lossless?** Type a sentence with a masked span (`[MASK:3]`, `[MASK:6]`, ...), pick samplers "
    "and N (0: the check chooses N for you). Each sampler fills the span N times with independent seeds. For "
    "AS-ARM samplers the model itself says, for every drawn token, how likely it was given the tokens before it; "
    "an exact sampler's tokens then look like fair dice throws, a wrong rule's do not. Each verdict comes with "
    "its power: how often this test, at this N, catches the deliberately wrong `wrong-...` samplers on your "
    "sentence. Below 0.8 the check says it cannot tell, and what would help. An exact "
    f"sampler's p-value is above {ALPHA:g} about 99 times in 100. The chart sets each fill's frequency (bars, "
    "95% interval) against the model's exact probability (◆). Hybrid samplers (mdm, self-spec) are checked "
    "against the self-speculative likelihood (Proposition 3.1) on spans of at most 3 tokens.")


def model_choices() -> list[str]:
    """The models a check can run on: every listed AS-ARM and hybrid."""
    return sorted(set(choices.list_models(kind="asarm")) | set(choices.list_models(kind="hybrid")))


def _domain_of(model: str) -> str:
    for row in registry.available():
        if row["name"] == model:
            return str(row["domain"])
    return "text"


def follow_editor(model, ex_text, ex_model):
    """The editor's model changed (also by a domain switch): the check takes it when it can run
    it (an AS-ARM or hybrid), else that domain's AS-ARM; a stock example of another domain is
    swapped for this domain's. Returns (ex_model update, ex_text, the line naming what is checked)."""
    allowed = model_choices()
    domain = _domain_of(model) if isinstance(model, str) and model else "text"
    if model not in allowed:
        model = next((m for m in allowed if _domain_of(m) == domain and m.endswith("-asarm")),
                     ex_model if ex_model in allowed else None)
    text = EXAMPLES.get(domain, ex_text) if (ex_text in EXAMPLES.values() or not ex_text) else ex_text
    return gr.update(value=model), text, in_view(model)


def follow_sampler(sampler, ticked) -> list[str]:
    """The editor's sampler changed: the check ticks it too (the sampler a visitor just watched is the one
    they want checked), when it drives the same kind of model as those ticked (one check runs one model)."""
    ticked, specs = list(ticked or []), check_samplers()
    if sampler not in specs or sampler in ticked:
        return ticked
    if any(specs[t].kind != specs[sampler].kind for t in ticked if t in specs):
        return ticked
    return [*ticked, sampler]


def in_view(model) -> str:
    """The line over the check naming the model and domain it runs on."""
    if not model:
        return "No model the check can run is listed here."
    return f"The check runs on **{esc(model)}** ({esc(_domain_of(model))}), the model in the editor."


# ----------------------------------------------------------------------------- handlers


@exactness_knobs.takes_knobs
def prepare(text, model, samplers, n, seed, knobs) -> ExactnessCheck:
    """The page's values -> a prepared check (every value checked, the knobs its samplers read settled
    by the engine; the first draw of each sampler done, so a sampler the model cannot run is refused at once)."""
    check_text(text or "")
    check_sentinels(text or "")
    allowed = model_choices()
    if model not in allowed:
        raise BadParameterError(f"Choose a model from the list ({', '.join(allowed) or 'none available'}).")
    if not samplers:
        raise BadParameterError("Choose at least one sampler to check.")
    count = as_int("N", n)
    budget = CheckBudget.from_env()
    if count == 0:  # N chosen for me: from the power calculation, within AUTO_SECONDS of computing
        budget = CheckBudget(budget.max_draws, min(budget.max_seconds or AUTO_SECONDS, AUTO_SECONDS))
    return ExactnessCheck(
        text, samplers=list(samplers), samples="auto" if count == 0 else count, model=model, seed=served_seed(seed),
        allow_paths=False, budget=budget, **exactness_knobs.settled(samplers, knobs))


#: the page's default check (N = 0, chosen for me) computes at most this many seconds: N is the
#: smallest with power 0.9 against the wrong rules, or the most this time allows
AUTO_SECONDS = 45.0


#: what a stored check is charged against its address's write budget (app.serving.store_budget): its
#: payload keeps TOP_FILLS fills and the test's cells, a few tens of kB
CHECK_BYTES = 64 << 10


def store_check(res: CheckResult) -> str:
    """Store a finished check as a session of kind "exactness"; returns its share id. Stored whole:
    settings, every sampler's counts and test; the exact probability and decoded text only of the
    fills the chart draws and the test's cells (a spread law at N = 400 has a thousand drawn fills,
    whose texts and probabilities alone would pass the store's size limit; the rest is "other")."""
    check = res.to_json()
    keep = {fill_key(f) for f in sorted(res.exact, key=lambda f: -res.exact[f])[:TOP_FILLS]}
    keep |= {fill_key(f) for f in pooled_cells(res.exact, res.samples)}
    check["exact"] = {k: v for k, v in check["exact"].items() if k in keep}
    check["exact"]["other"] = max(0.0, 1.0 - math.fsum(check["exact"].values()))
    check["fills"] = {k: v for k, v in check["fills"].items() if k in keep}
    payload = {"version": 1, "kind": KIND, "check": check}
    return store().create_session(_domain_of(res.model), res.model, res.source, payload)


#: what Run the check (and the /exactness API) updates, in the order API clients receive it
CHECK_OUTPUTS = ("ex_status", "ex_plot", "ex_table", "ex_link")


def stop_check(request: gr.Request = None) -> dict:
    """Stop the check: the page's check in progress ends at its next draw and stores nothing (a
    check is stored only whole); its own last frame says how far it got."""
    stops.request_owner_stop(_checker(request), time.monotonic())
    return {"ex_status": status_md("Stopping the check at its next draw; nothing is stored.")}


def _checker(request) -> str | None:
    """The page's key in the stop record (app.serving.stops), apart from its Run's: one Stop never ends the other."""
    page = getattr(request, "session_hash", None)
    return f"exactness:{page}" if page else None


def _check(text, model, samplers, n, seed, knobs, request: gr.Request = None):
    """Prepare, draw on the shared compute slots (a frame about twice a second), test, store.
    Stop the check (stop_check) ends it at its next draw, storing nothing. Updates CHECK_OUTPUTS
    by name (app.tabs.common.named)."""
    started, checker = time.monotonic(), _checker(request)
    turns = Turns(slots(), lambda: stops.owner_stopped_since(checker, started))
    last = 0.0
    owner = request_address(request)  # the visitor's key: its address (app.serving.visitors)
    try:
        store_budget().admit(owner)  # it stores a session: within the store's bounds (StoreFull otherwise)
    except InfillError as e:
        yield {"ex_status": status_md(str(e), "error"), "ex_link": ""}
        return
    stored_bytes = 0
    try:
        # a check is hundreds of runs: it is admitted as one long run (a long-run seat, the visitor's cap)
        with admission().enter(owner, True):
            t0 = time.perf_counter()
            yield {"ex_status": status_md(f"Preparing the check on {model}: loading the model, a first draw of each "
                                          "sampler" + (" and a pilot of the wrong rules to choose N…"
                                                       if str(n).strip() in ("0", "0.0") else "…")),
                   "ex_link": ""}
            with turns.turn():
                chk = prepare(text, model, samplers, n, seed, **knobs)
            chosen = f" N = {chk.samples:,} per sampler ({chk.chosen})." if chk.chosen else ""
            done, total = 0, chk.samples * len(chk.names)
            for name, done, total in turns.iterate(chk.stream()):
                if stops.owner_stopped_since(checker, started):
                    break
                now = time.perf_counter()
                if now - last >= 0.5:
                    last = now
                    yield {"ex_status": status_md(f"Drawing… {done:,} of {total:,} fills ({name}), "
                                                  f"{now - t0:.0f} s so far.{chosen}"), "ex_link": ""}
            if stops.owner_stopped_since(checker, started):
                store_budget().release()
                yield {"ex_status": status_md(f"Stopped after {done:,} of {total:,} draws "
                                              f"({time.perf_counter() - t0:.0f} s); nothing is stored (a check is "
                                              "stored only whole)."), "ex_link": ""}
                return
            with turns.turn():
                res = chk.result()
    except Cancelled:  # Stop pressed while it was prepared or waited for a slot
        store_budget().release()
        yield {"ex_status": status_md("Stopped; nothing is stored (a check is stored only whole)."), "ex_link": ""}
        return
    except InfillError as e:
        store_budget().release()
        warn(str(e))
        yield {"ex_status": status_md(str(e), "error"), "ex_link": ""}
        return
    except BaseException:
        store_budget().release()
        raise
    try:
        sid, stored_bytes = store_check(res), CHECK_BYTES
        link, stored = share.share_link(request, sid), " Stored: the link below replays it without running anything."
    except Exception as e:  # noqa: BLE001 - the result is shown even when it cannot be stored
        link, stored = "", f" Not stored: {readable(e)}"
    finally:
        if stored_bytes:
            store_budget().charge(owner, stored_bytes)
        else:
            store_budget().release()
    yield {"ex_status": status_md(summary(res) + stored, "ok"), "ex_plot": figure(res), "ex_table": table_html(res),
           "ex_link": link}


run = guarded(exactness_knobs.takes_knobs(_check))  # as the page runs it: one parameter per knob


def stored_check(share_id: str) -> CheckResult | None:
    """The check stored under `share_id`, or None when that session is not an exactness check."""
    sess = store().get_session((share_id or "").strip())
    spans = sess.spans if sess is not None else None
    if not isinstance(spans, dict) or spans.get("kind") != KIND:
        return None
    try:
        return from_json(spans["check"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadParameterError("This exactness check was stored without the data needed to replay it.") from e


def restore_updates(p: Page, share_id: str, res: CheckResult, request=None) -> dict:
    """A stored check into the tab: its settings, chart, table and link (no model runs)."""
    return {
        p.tabs: gr.Tabs(selected="exactness"),
        p.ex_text: res.source,
        p.ex_model: gr.update(choices=sorted(set(model_choices()) | {res.model}), value=res.model),
        p.ex_samplers: [r.name for r in res.samplers],
        p.ex_n: res.samples, p.ex_seed: res.seed,
        **{c: res.params.get(n, KNOBS[n].page_default) for n, c in p.ex_knobs.items()},
        **dict(zip(p.ex_knobs.values(), exactness_knobs.shown([r.name for r in res.samplers]), strict=True)),
        p.ex_status: status_md(f"Restored exactness check {share_id}: its chart and table are read from the "
                                "store; no model was run. Press Run the check to sample it again.", "ok"),
        p.ex_plot: figure(res), p.ex_table: table_html(res), p.ex_link: share.share_link(request, share_id),
    }


def outputs(p: Page) -> list:
    """The components a restored check updates as /load_share was published (app.tabs.sessions adds them
    to its restore outputs); the page's own restore also sets the tab's other knobs (late_outputs)."""
    return [p.ex_text, p.ex_model, p.ex_samplers, p.ex_n, p.ex_seed, *(p.ex_knobs[n] for n in exactness_knobs.PUBLISHED),
            p.ex_status, p.ex_plot, p.ex_table, p.ex_link]


def late_outputs(p: Page) -> list:
    """The tab's knob controls after temperature and k: set by the page's own restore, not /load_share."""
    return [c for n, c in p.ex_knobs.items() if n not in exactness_knobs.PUBLISHED]


# ----------------------------------------------------------------------------- layout


def layout(p: Page) -> None:
    """The check's inputs, its Run button, the status line, the chart, the table and the link."""
    gr.Markdown(INTRO)
    models = model_choices()
    first = "text-asarm" if "text-asarm" in models else (models[0] if models else None)
    p.ex_in_view = gr.Markdown(in_view(first), elem_id="exactness-in-view")
    with gr.Row():
        p.ex_text = gr.Textbox(label="Text with a masked span", value=EXAMPLE, scale=3, elem_id="exactness-text")
        p.ex_model = gr.Dropdown(label="Model", choices=models, value=first, elem_id="exactness-model")
    names = list(check_samplers())
    first_ticked = follow_sampler(getattr(getattr(p, "sampler", None), "value", None),
                                  [s for s in DEFAULT_SAMPLERS if s in names])  # and the editor's first sampler
    p.ex_samplers = gr.CheckboxGroup(label="Samplers (wrong-... are broken on purpose)", choices=names,
                                     value=first_ticked, elem_id="exactness-samplers")
    # N and seed, then the samplers' knobs on a row of their own (beside N and seed their help was
    # squeezed into a column a few words wide at 1366 px), then Run / Stop
    with gr.Row():
        p.ex_n = gr.Number(label="N (fills per sampler; 0: choose for me)", value=0, precision=0, minimum=0,
                           elem_id="exactness-n")
        p.ex_seed = gr.Number(label="seed", value=0, precision=0, minimum=0)
    with gr.Row():
        p.ex_knobs = exactness_knobs.controls(p.ex_samplers.value)  # the table's rows, as the editor's
    with gr.Row():
        p.ex_run = gr.Button("Run the check", variant="primary", elem_id="exactness-run")
        p.ex_stop = gr.Button("Stop the check", variant="stop", size="sm", interactive=False, elem_id="exactness-stop")
    p.ex_status = gr.Markdown("", elem_id="exactness-status")
    p.ex_plot = gr.Plot(label="Frequencies against the exact law", elem_id="exactness-plot")
    p.ex_table = gr.HTML("", elem_id="exactness-table")
    p.ex_link = gr.Textbox(label="Share link of this check", interactive=False, elem_id="exactness-link")


def wire(p: Page, remember) -> None:
    """Run the check (wrapped here: its endpoint takes the knob table's rows as they stand when the page is
    built), then add its link to this browser's sessions list. The check follows the editor's model and domain."""
    p.model.change(follow_editor, [p.model, p.ex_text, p.ex_model], [p.ex_model, p.ex_text, p.ex_in_view],
                   api_visibility="private", queue=False, show_progress="hidden")
    p.ex_model.change(lambda m: in_view(m), [p.ex_model], [p.ex_in_view], api_visibility="private", queue=False,
                      show_progress="hidden")
    p.sampler.change(follow_sampler, [p.sampler, p.ex_samplers], [p.ex_samplers], api_visibility="private",
                     queue=False, show_progress="hidden")
    p.ex_stop.click(named(p, stop_check), None, components(p, ("ex_status",)), queue=False,
                    api_visibility="private", show_progress="hidden")
    p.ex_samplers.change(exactness_knobs.shown, [p.ex_samplers], list(p.ex_knobs.values()), api_visibility="private",
                         queue=False, show_progress="hidden")
    # Stop the check is enabled only while a check runs, as the main Stop is while a run streams
    buttons = [p.ex_run, p.ex_stop]
    p.ex_run.click(busy, None, buttons, queue=False, api_visibility="private", show_progress="hidden").then(
        named(p, guarded(exactness_knobs.takes_knobs(_check))),
        [p.ex_text, p.ex_model, p.ex_samplers, p.ex_n, p.ex_seed, *p.ex_knobs.values()],
        components(p, CHECK_OUTPUTS), api_name="exactness", show_progress="hidden",
        concurrency_id="model", concurrency_limit=p.run_limit,
        preprocess=False).then(  # raw values: prepare() reads each (a seed by app.run.form.served_seed)
        idle, None, buttons, api_visibility="private", show_progress="hidden").then(
        remember, [p.ex_link, p.history], [p.history, p.recent_html], api_visibility="private")
