"""What every part of the page shares: the `Page` that names its components, the one way a
handler failure becomes a readable message, status lines, tables and the form a run is made of."""

from __future__ import annotations

import functools
import html
import inspect
from types import SimpleNamespace

import gradio as gr

from app.errors import readable
from app.run.form import FORM_FIELDS, PUBLISHED_FIELDS, Form, added_fields, form_fields  # noqa: F401 (FORM_FIELDS: re-exported)
from app.views.render import DETAIL_HEADERS, view_html
from engine.errors import InfillError
from engine.params import KNOBS

#: the sampler parameters (engine.params.KNOBS), in the table's order
PARAMS = tuple(KNOBS)
# FORM_FIELDS (app.run.form, imported above): the form's inputs in order, the /infill endpoint's parameter names


class Page(SimpleNamespace):
    """The page's components by name: each tab module lays out its part into it and wires events
    that may touch another part's components (a restored session fills the editor, the player and
    the compare view). The knobs' controls are `knobs`, by knob name (app.tabs.editor builds one
    per row of engine.params.KNOBS); `component(name)` finds either kind."""

    def component(self, name: str):
        """The component called `name`: a knob's control, or the attribute of that name."""
        knobs = self.__dict__.get("knobs", {})
        return knobs[name] if name in knobs else getattr(self, name)


def warn(msg: str) -> None:
    """A toast with the message as text (Gradio renders toast messages as HTML)."""
    gr.Warning(html.escape(msg, quote=False))


def _as_error(e: Exception) -> gr.Error:
    # an input error is the visitor's, not a bug: no traceback in the server's log
    return gr.Error(html.escape(readable(e), quote=False), print_exception=not isinstance(e, InfillError))


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


def named(p: Page, fn):
    """`fn` as Gradio calls it: fn's updates are dicts keyed by the name of each component they set
    (Page.component: its attribute on `p` or its knob, e.g. {"status": ..., "link": ...}); this turns each into Gradio's
    {component: value} form. A component an update leaves out keeps its value, so no handler pads a
    positional tuple with blank updates, and reading `frame["link"]` in a test says what it checks.
    List the event's `outputs` with `components(p, names)`: the order of that list is what API
    clients receive, so it stays fixed while handlers set any subset of it."""
    def by_component(update: dict):
        return {p.component(name): value for name, value in update.items()} or gr.skip()

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            for update in fn(*args, **kwargs):
                yield by_component(update)
        return gen

    @functools.wraps(fn)
    def plain(*args, **kwargs):
        return by_component(fn(*args, **kwargs))
    return plain


def components(p: Page, names) -> list:
    """The page's components with these names, in this order (an event's outputs)."""
    return [p.component(name) for name in names]


def status_md(msg: str, kind: str = "info") -> str:
    """A status line (escaped) with an icon for errors and successes."""
    icon = {"error": "⚠️ ", "ok": "✓ ", "info": ""}[kind]  # ✓, not ✅: Debian chromium has no emoji font
    return f"{icon}{html.escape(msg, quote=False)}" if msg else ""


def detail_table(rows: list[list]) -> dict:
    """The current round's rows as the detail Dataframe's value (one blank row when empty)."""
    return {"headers": DETAIL_HEADERS, "data": [[str(c) for c in r] for r in rows] or [[""] * len(DETAIL_HEADERS)]}


def empty_table(headers: list[str]) -> dict:
    """A Dataframe value with these headers and one blank row (Gradio needs a row to show them)."""
    return {"headers": headers, "data": [[""] * len(headers)]}


def make_form(values: dict) -> Form:
    """The editor's values (by FORM_FIELDS name) as an app.run.form.Form (None and blanks read as the defaults;
    a knob the values lack, from a caller written before the knob was added, reads as its page default)."""
    v = dict(values)
    knobs = {name: v[name] if k.range or v[name] else k.default  # a blank choice: its default
             for name, k in KNOBS.items() if name in v}
    return Form(domain=v["domain"], model=v["model"] or None, text=v["text"] if v["text"] is not None else "",
                sampler=v["sampler"], seed=v["seed"], **knobs)


def endpoint_fields(*inputs: str) -> tuple[str, ...]:
    """A form endpoint's inputs in order: the published form fields, the endpoint's own `inputs`
    (Compare's sampler_b and model_b), then the knobs added to the table since (app.run.form.added_fields),
    so a new knob moves no published position."""
    return (*PUBLISHED_FIELDS, *inputs, *added_fields())


def form_components(p: Page, *inputs: str) -> list:
    """The page's components of a form endpoint, in endpoint_fields order (an event's inputs)."""
    return components(p, endpoint_fields(*inputs))


def takes_form(*inputs: str):
    """A run handler `fn(values, *inputs, ...)` whose first parameter receives the editor's values as
    a dict by form field, while Gradio (and so the HTTP API: /infill, /compare) sees one positional
    parameter per endpoint_fields(*inputs) entry, then fn's other parameters: an endpoint's parameter
    names come from the form and the knob table, so a new knob needs no handler edited. fn's
    annotations are kept (Gradio injects gr.Request by them). Wire it with form_components(p, *inputs)."""
    def decorate(fn):
        sig = inspect.signature(fn)
        own = {p.name: p for p in list(sig.parameters.values())[1:]}
        # a knob added after publication has its start value as default: a client (or a caller) that
        # does not know it yet still calls the endpoint as published
        fields = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=inspect.Parameter.empty if n in PUBLISHED_FIELDS or n in inputs
                                    else KNOBS[n].page_default) for n in endpoint_fields(*inputs)]
        public = sig.replace(parameters=[own.pop(n) if n in own else f for n, f in
                                         zip(endpoint_fields(*inputs), fields)] + list(own.values()))

        def split(args, kwargs):
            bound = public.bind(*args, **kwargs)
            bound.apply_defaults()
            values = {n: bound.arguments.pop(n) for n in form_fields()}
            return values, bound.arguments

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*args, **kwargs):
                values, rest = split(args, kwargs)
                yield from fn(values, **rest)
            handler = gen
        else:
            @functools.wraps(fn)
            def plain(*args, **kwargs):
                values, rest = split(args, kwargs)
                return fn(values, **rest)
            handler = plain
        handler.__signature__ = public
        return handler
    return decorate


def busy():
    """(Run, Stop) while a run streams: Run disabled, Stop enabled."""
    return gr.update(interactive=False), gr.update(interactive=True)


def idle():
    """(Run, Stop) when nothing runs: Run enabled, Stop disabled."""
    return gr.update(interactive=True), gr.update(interactive=False)


def idle_named(run: str, stop: str) -> dict:
    """idle() as a named update of the buttons called `run` and `stop` on the page."""
    return dict(zip((run, stop), idle()))


def cleared(message: str) -> dict:
    """Every view of the player emptied (counters, token view, round table, completed text, link,
    scrubber, trace to replay), the token view saying `message`: a run that has shown nothing yet,
    or that stored nothing, leaves nothing of itself or of the run before it on screen."""
    return {"counters": "", "player": view_html(None, message=message), "detail": empty_table(DETAIL_HEADERS),
            "completed": "", "link": "", "scrub_sl": gr.update(minimum=0, maximum=1, value=0, interactive=False),
            "trace_state": None}


#: what cleared() empties, in order
CLEARED = ("counters", "player", "detail", "completed", "link", "scrub_sl", "trace_state")
#: the status at Run's click, until the run's first frame
STARTING = "Starting the run… (a model's first run takes a few seconds to load)"

#: Stop's answer when the run had shown no round: nothing was stored, nothing of it is shown
STOPPED_FIRST = "Stopped before the first round; nothing was stored."
