"""The Gradio Blocks page: the editor on top, then tabs for the step player, the comparison, the
exactness check, the statistics and the stored sessions, one module each under app.tabs. Handlers are
thin: the logic lives in app.run.form (checks), app.run.streaming (runs), app.timing.speedup, app.stored.replay, app.views.render
(HTML), app.views.plots (figures) and app.stored.share (links)."""

from __future__ import annotations

import html
import logging

import gradio as gr

from app.run.form import added_fields
from app.serving.admission import run_seats
from app.views.render import CSS
from engine.params import KNOBS

from .tabs import compare, editor, exactness, exactness_knobs, freshness, player, sessions, statistics
from .tabs.common import Page

log = logging.getLogger("app.requests")

EXTRA_CSS = """
#token-toggle .wrap {gap: 2px !important;}
#token-toggle label {padding: 1px 4px !important; font-family: ui-monospace, monospace; min-width: 0 !important;}
.tv-recent td, .tv-recent th {padding: 2px 8px; text-align: left;}
#stop {max-width: 110px; min-width: 80px;}
#model-card {font-size: 0.85em; line-height: 1.35;}
#model-card p {margin: 2px 0;}
#token-count {font-size: 0.85em; margin-top: -6px;}
#player-controls button {min-width: 0;}
/* the three domains on one line at 1366 px (protein wrapped under the others), and an example's text
   stopping short of the dropdown's caret (it ran under it) */
#domain .wrap {flex-wrap: nowrap; gap: 6px;}
#domain label {padding: 6px 8px !important;}
#examples input {padding-right: 28px !important; text-overflow: ellipsis;}
#player-options {gap: 4px 16px; font-size: 0.9em;}
.sampler-list td {padding: 1px 8px; vertical-align: top; font-size: 0.9em;}
/* knob help: Gradio's light grey 12px (contrast 1.9:1 on white) made readable, #4b5563 = 7.6:1 (WCAG AA) */
.info-text {color: #4b5563 !important; font-size: 13px !important;}
.dark .info-text {color: #d1d5db !important;}
/* contrast AA (4.5:1) for every text and control (measured from the page by
   tests/e2e/test_every_view_true.py): Gradio's orange primary buttons (white on #f97316, 2.8:1) and
   selected tab (orange on white, 2.8:1) take orange-700 (#c2410c: 5.2:1), the slider's end labels and
   the footer its grey (#4b5563: 7.6:1 instead of 1.9:1), an enabled Stop red-700 (#b91c1c: 6.5:1, not
   3.8:1); drafts of earlier rounds are muted by colour,
   struck through and dashed, not by opacity (1.9:1) */
button.primary, button.primary:hover {background: #c2410c !important; border-color: #c2410c !important;
  color: #ffffff !important;}
button.primary:hover {background: #9a3412 !important;}
button.stop:not(:disabled) {background: #b91c1c !important; border-color: #b91c1c !important; color: #ffffff !important;}
button[role="tab"].selected, button[role="tab"][aria-selected="true"] {color: #c2410c !important;}
.min_value, .max_value, footer, footer * {color: #4b5563 !important;}
/* the controls drawn without text: a checkbox's or radio's edge grey-500 (#6b7280: 4.8:1, Gradio's
   #d4d4d8 is 1.5:1), checked filled orange-700; a slider's thumb and filled track orange-700 */
input[type="checkbox"], input[type="radio"] {border-color: #6b7280 !important;}
input[type="checkbox"]:checked, input[type="radio"]:checked {background-color: #c2410c !important;
  border-color: #c2410c !important;}
input[type="range"] {--color-accent: #c2410c; --slider-color: #c2410c;}
.tv-tok.tv-faded {opacity: 1 !important; color: #4b5563 !important; background: #f3f4f6 !important;
  text-decoration: line-through; outline: 1px dashed #9ca3af;}
"""


def _layout(p: Page) -> None:
    """Every component, in page order."""
    editor.layout(p)
    with gr.Tabs(selected="player") as p.tabs:
        with gr.Tab("Step player", id="player"):
            player.layout(p)
        with gr.Tab("Compare", id="compare"):
            compare.layout(p)
        with gr.Tab("Exactness", id="exactness"):
            exactness.layout(p)
        with gr.Tab("Statistics", id="stats") as p.stats_tab:
            statistics.layout(p)
        with gr.Tab("Sessions", id="sessions"):
            sessions.layout(p)
    p.history = gr.BrowserState([], storage_key="infill-studio-history")


class StudioBlocks(gr.Blocks):
    """gr.Blocks whose request-level refusals carry a message. Gradio answers a request with too
    few values, or a value its component cannot read (NaN in a whole-number box, "abc" for a
    slider), with a plain exception, which its API sends as `{"error": null}`; here each
    becomes a gr.Error saying which input and why. Handlers that read raw values themselves (Run,
    Compare: preprocess=False) never get here for their values. A request short by only knobs added
    to the table after its endpoint was published (app.run.form.added_fields) is no refusal: it gets
    those knobs' page defaults, so an HTTP client written against the published endpoint keeps working."""

    #: the page's controls of the knobs added since publication, by component id -> their page defaults (build())
    late_defaults: dict[int, object] = {}

    def with_late_defaults(self, block_fn, inputs: list) -> list:
        """`inputs`, with the page defaults of the knobs added since publication appended when those
        are all it lacks (they are every form endpoint's last inputs, app.tabs.common.endpoint_fields, and
        /exactness's after its published temperature and k, app.tabs.exactness_knobs)."""
        missing = block_fn.inputs[len(inputs):]
        if not missing or not all(getattr(b, "_id", None) in self.late_defaults for b in missing):
            return inputs
        return [*inputs, *(self.late_defaults[b._id] for b in missing)]

    def validate_inputs(self, block_fn, inputs):
        """Gradio's count check, its refusal turned into a message naming the inputs."""
        try:
            super().validate_inputs(block_fn, inputs)
        except gr.Error as e:
            raise _refused(block_fn, e) from None
        except Exception:  # noqa: BLE001 - Gradio's own check: too few values
            names = ", ".join(_label(b, i) for i, b in enumerate(block_fn.inputs))
            raise _refused(block_fn, gr.Error(html.escape(f"This request sent {len(inputs)} values; {_api(block_fn)} "
                                                          f"takes {len(block_fn.inputs)}: {names}.", quote=False))) from None

    async def preprocess_data(self, block_fn, inputs, *args, **kwargs):
        """Gradio's reading of the values, a refusal turned into a message naming the input."""
        inputs = self.with_late_defaults(block_fn, inputs)
        try:
            return await super().preprocess_data(block_fn, inputs, *args, **kwargs)
        except gr.Error as e:  # a component's own refusal ("Value ... is not in the list of choices")
            raise _refused(block_fn, e) from None
        except Exception as e:  # noqa: BLE001 - a value a component could not read
            i = _failing_input(block_fn, inputs)
            what = f"the value for {_label(block_fn.inputs[i], i)} ({_short(inputs[i])})" if i is not None \
                else "one of its values"
            raise _refused(block_fn, gr.Error(html.escape(f"{_api(block_fn)} could not read {what}: "
                                                          f"{type(e.__cause__ or e).__name__}.", quote=False))) from None


def _refused(block_fn, e: gr.Error) -> gr.Error:
    """A request refused for its input: one log line, no traceback (Gradio prints one per gr.Error
    unless told not to; 29 of 206 bad requests did)."""
    e.print_exception = False
    log.info("refused a request to %s: %s", _api(block_fn), html.unescape(str(e.message))[:200])
    return e


def _api(block_fn) -> str:
    name = getattr(block_fn, "api_name", None) or getattr(block_fn, "name", None) or "this event"
    return f"/{name}" if getattr(block_fn, "api_name", None) else str(name)


def _label(block, i: int) -> str:
    return repr(getattr(block, "label", None) or f"input {i + 1} ({type(block).__name__})")


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:40] + "…"


def _failing_input(block_fn, inputs) -> int | None:
    """The first input whose component refuses its value (inputs are form values: cheap to re-read)."""
    for i, (block, v) in enumerate(zip(block_fn.inputs, inputs)):
        if getattr(block, "stateful", False):
            continue
        try:
            block.preprocess(v)
        except Exception:  # noqa: BLE001
            return i
    return None


def build() -> gr.Blocks:
    """The whole page: laid out tab by tab, then each part's events wired."""
    with StudioBlocks(title="Infilling studio") as demo:
        p = Page(demo=demo)
        _layout(p)
        # runs in progress at once: long runs' seats and line plus seats only small runs reach
        # (app.serving.admission.Admission); INFILL_CONCURRENCY of them compute at the same time
        p.run_limit = run_seats()
        editor.wire(p)
        player.wire(p, sessions.remember)
        compare.wire(p, sessions.remember)
        exactness.wire(p, sessions.remember)
        statistics.wire(p)
        sessions.wire(p)
        freshness.wire(p, sessions.remember)
        demo.late_defaults = {p.knobs[name]._id: KNOBS[name].page_default for name in added_fields()}
        # /exactness was published with temperature and k: its other knobs are late too
        demo.late_defaults |= {c._id: KNOBS[n].page_default for n, c in p.ex_knobs.items()
                               if n not in exactness_knobs.PUBLISHED}
    return demo


def launch_kwargs() -> dict:
    """What demo.launch needs from the page (its CSS)."""
    return {"css": CSS + EXTRA_CSS + player.HIDE_OLD_CSS}
