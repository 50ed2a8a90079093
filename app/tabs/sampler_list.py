"""Plain words beside the sampler list: each sampler's name with its one-line description (the
first sentence of its catalogue help), so twelve bare names are not all a newcomer gets."""

from __future__ import annotations

import gradio as gr

from app.views.render import esc
from engine.samplers import SAMPLERS

from .common import Page


def one_line(help_text: str) -> str:
    """The first sentence of a sampler's help."""
    first = help_text.split(". ")[0].strip()
    return first if first.endswith(".") else first + "."


def samplers_html() -> str:
    """Every sampler with its one-line description, in the list's order (escaped)."""
    rows = "".join(f"<tr><td><code>{esc(name)}</code></td><td>{esc(one_line(spec.help))}</td></tr>"
                   for name, spec in SAMPLERS.items())
    return f'<table class="sampler-list">{rows}</table>'


def layout(p: Page) -> None:
    """The list, folded under the pickers (the chosen sampler's full help is under Sampler parameters)."""
    with gr.Accordion(f"What each of the {len(SAMPLERS)} samplers does", open=False, elem_id="sampler-list"):
        p.sampler_list = gr.HTML(samplers_html())
