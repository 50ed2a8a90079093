"""The Gradio Blocks page: the editor on top, then tabs for the step player, the comparison, the
statistics and the stored sessions, one module each under app.tabs. Handlers are thin: the logic
lives in app.core (runs, replay), app.render (HTML), app.plots (figures) and app.share (links)."""

from __future__ import annotations

import gradio as gr

from .render import CSS
from .slots import active_runs
from .tabs import compare, editor, player, sessions, statistics
from .tabs.common import Page

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


def _layout(p: Page) -> None:
    """Every component, in page order."""
    editor.layout(p)
    with gr.Tabs(selected="player") as p.tabs:
        with gr.Tab("Step player", id="player"):
            player.layout(p)
        with gr.Tab("Compare", id="compare"):
            compare.layout(p)
        with gr.Tab("Statistics", id="stats") as p.stats_tab:
            statistics.layout(p)
        with gr.Tab("Sessions", id="sessions"):
            sessions.layout(p)
    p.history = gr.BrowserState([], storage_key="infill-studio-history")


def build() -> gr.Blocks:
    """The whole page: laid out tab by tab, then each part's events wired."""
    with gr.Blocks(title="Infilling studio") as demo:
        p = Page(demo=demo)
        _layout(p)
        # runs in progress at once; app.slots lets INFILL_CONCURRENCY of them compute at the same time
        p.run_limit = active_runs()
        editor.wire(p)
        player.wire(p, sessions.remember)
        compare.wire(p, sessions.remember)
        statistics.wire(p)
        sessions.wire(p)
    return demo


def launch_kwargs() -> dict:
    """What demo.launch needs from the page (its CSS)."""
    return {"css": CSS + EXTRA_CSS}
