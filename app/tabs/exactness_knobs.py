"""The Exactness tab's knobs, from the one knob table (engine.params.KNOBS) as the editor's are: one
control per row (app.tabs.editor.knob_control), shown when a chosen sampler reads it (SamplerSpec.reads),
and the check receives the values its samplers read, settled by the engine (engine.params.settle) within
the page's ranges, as every served run's are."""

from __future__ import annotations

import functools
import inspect

import gradio as gr

from app.run.form import unread_knob
from engine.exactness.wrong_samplers import check_samplers
from engine.params import KNOBS, settle

from .editor import knob_control

#: the knobs /exactness was published with, in their places; the table's others follow, in its order
PUBLISHED = ("temperature", "k")
#: the tab's start values where they differ from the editor's: a cooler law puts its mass on fewer
#: fills, so the check needs fewer draws to tell
START = {"temperature": 0.5}


def knob_names() -> tuple[str, ...]:
    """The tab's knobs in the /exactness endpoint's order: the published ones, then the table's others."""
    return (*PUBLISHED, *(n for n in KNOBS if n not in PUBLISHED))


def read_by(samplers) -> set[str]:
    """The knobs any of these samplers reads (the catalogue's and the deliberately wrong ones)."""
    specs = check_samplers()
    return {n for s in samplers or () if s in specs for n in specs[s].reads}


def controls(samplers) -> dict:
    """One control per knob, in knob_names() order, shown when one of `samplers` reads it."""
    listed = read_by(samplers)
    return {n: knob_control(n, n in listed, prefix="exactness-knob-", start=START.get(n)) for n in knob_names()}


def shown(samplers) -> list:
    """Each control shown or hidden for these samplers, in knob_names() order."""
    listed = read_by(samplers)
    return [gr.update(visible=n in listed) for n in knob_names()]


def settled(samplers, values: dict) -> dict:
    """The knobs the samplers read, as the check takes them: settled once within the page's ranges
    (engine.params.settle: its message names the knob and its range). One that none of them reads is
    not sent, but a malformed or out-of-range one is refused, as the editor refuses it."""
    reads = read_by(samplers)
    for name, v in values.items():
        if name not in reads:
            unread_knob(name, v, ", ".join(samplers or ()))
    given = {n: v for n, v in values.items() if n in reads}
    knobs = settle(given, served=True, who="The exactness check")
    return {n: knobs[n] for n in given}


def takes_knobs(fn):
    """`fn(..., knobs, ...)` as Gradio and the /exactness API call it: one parameter per knob in place of
    `knobs`, in knob_names() order (the published ones required; the others default to their page start
    values, so a client written before them keeps working), `knobs` receiving them as a dict. The names
    are read from the table when it is called, so a knob added later is taken by name."""
    def public() -> inspect.Signature:
        sig = inspect.signature(fn)
        own = list(sig.parameters.values())
        at = list(sig.parameters).index("knobs")
        knobs = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                   default=inspect.Parameter.empty if n in PUBLISHED else KNOBS[n].page_default)
                 for n in knob_names()]
        return sig.replace(parameters=own[:at] + knobs + own[at + 1:])

    def split(args, kwargs) -> dict:
        bound = public().bind(*args, **kwargs)
        bound.apply_defaults()
        names = knob_names()
        rest = {n: v for n, v in bound.arguments.items() if n not in names}
        return {**rest, "knobs": {n: bound.arguments[n] for n in names}}

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def handler(*args, **kwargs):
            yield from fn(**split(args, kwargs))
    else:
        @functools.wraps(fn)
        def handler(*args, **kwargs):
            return fn(**split(args, kwargs))
    handler.__signature__ = public()  # what Gradio reads when the tab is wired (the endpoint's parameters)
    return handler
