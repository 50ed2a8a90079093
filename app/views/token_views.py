"""A run's input as the page draws it, without its model: the token view (per-token texts with
the masked positions blank, token ids, spans) stored with each session, and the display state
(app.views.render.TraceState) of a view after some of its steps."""

from __future__ import annotations

import functools
from collections.abc import Callable

from app.views.render import TraceState, fold
from app.views.textmap import bytes_fn
from engine.api import InfillRun
from engine.loading import registry
from engine.trace import Step

MASK_PLACEHOLDER = "\u2581"


def token_view(run: InfillRun) -> dict:
    """What replay needs to draw the input without loading the model (token_ids lets it decode
    multi-byte characters by offsets when the model's tokenizer is still listed)."""
    codec = run.lm.codec
    ms = set(run.mi.masked)
    return {
        "model": run.lm.name,
        "token_texts": [MASK_PLACEHOLDER if i in ms else codec.token_text(t) for i, t in enumerate(run.mi.tokens)],
        "token_ids": [None if i in ms else int(t) for i, t in enumerate(run.mi.tokens)],
        "masked": list(run.mi.masked),
        "span_ranges": [list(r) for r in run.mi.span_ranges],
    }


@functools.lru_cache(maxsize=32)
def _bytes_for_folder(folder: str):
    from engine.inputs.tokenization import Codec

    return bytes_fn(Codec.load(folder))


def bytes_for(view: dict):
    """token id -> bytes for the view's model (None when its tokenizer is not available). Cached
    by the model's folder, not its name: two folders may carry the same name."""
    if view.get("token_ids") is None:
        return None
    try:
        return _bytes_for_folder(str(registry.resolve(view.get("model") or "", allow_paths=False)))
    except Exception:  # noqa: BLE001 - a model no longer listed: fall back to per-token texts
        return None


def new_state(view: dict, steps: list[Step] | None = None, upto: int | None = None,
              bytes_of: Callable[[int], bytes] | None = None) -> TraceState:
    """The display state of a view after `upto` of `steps` (all of them by default). `bytes_of`
    is the model's token id -> bytes when the caller holds it; else it is looked up by the view's
    model name (a replay, with no model loaded)."""
    return fold(list(view["token_texts"]), list(view["masked"]), steps or [], upto,
                ids=view.get("token_ids"), bytes_of=bytes_of if bytes_of is not None else bytes_for(view))


def run_state(run: InfillRun, view: dict) -> TraceState:
    """The empty display state of a run about to stream, drawn with the tokenizer the run already
    holds (never loaded again from the model's folder)."""
    return new_state(view, bytes_of=bytes_fn(run.lm.codec))
