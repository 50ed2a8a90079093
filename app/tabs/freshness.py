"""What keeps the page from showing a stale state: a person's domain switch clears the last run's
view (a code run's "Done: 14 tokens" must not sit beside a protein input), an input refused by
Run says so once (under the input, where it is fixed) and that refusal goes away as soon as the
input is fixed, not at the next Run."""

from __future__ import annotations

import gradio as gr

from app.views.render import DETAIL_HEADERS, view_html

from .common import Page, components, empty_table, named, status_md
from .editor import input_info

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


def clear_fixed_error(status, text, model, domain):
    """The input changed: Run's "not run" message goes once the line under the input has no error."""
    if status != status_md(NOT_RUN, "error"):
        return gr.skip()
    fixed = not input_info(text, model, domain).startswith(ERROR_ICON)
    return "" if fixed else gr.skip()


def wire(p: Page) -> None:
    """A person's domain switch (not a restored share link, which sets the domain itself) resets the
    run view; an input change clears a refusal it fixed."""
    p.domain.input(named(p, reset_view), None, components(p, RESET_OUTPUTS), api_visibility="private", queue=False,
                   show_progress="hidden")
    p.text.change(clear_fixed_error, [p.status, p.text, p.model, p.domain], [p.status], api_visibility="private",
                  trigger_mode="always_last", show_progress="hidden")
