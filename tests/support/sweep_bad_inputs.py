"""The bad-input sweep of issue 28, as tables: every case must come back as a readable message,
through the engine's Python API, through the app's /infill handler and through Gradio's request
layer (what the HTTP API answers). tests/engine/loading/test_harden_engine.py runs the tables; run this module to
print them with the message each case gets:

    python -m tests.support.sweep_bad_inputs

It builds tiny random models in a temporary folder (nothing bundled is loaded, no network)."""

from __future__ import annotations

import asyncio
import math
import os
import sys
import tempfile
from pathlib import Path

NAN = math.nan
TEXT = "The cat sat on the [MASK:4] mat."

#: (case id, keyword arguments to engine.infill over the tiny text model; None: the model path)
ENGINE_CASES: list[tuple[str, dict]] = [
    ("k=5.5", {"k": 5.5}), ("k='abc'", {"k": "abc"}), ("k=True", {"k": True}), ("k=None", {"k": None}),
    ("k=0", {"k": 0}), ("k=65", {"k": 65}), ("k=NaN", {"k": NAN}), ("k=[5]", {"k": [5]}),
    ("steps=2.5", {"steps": 2.5}), ("steps='x'", {"steps": "x"}), ("inner=1.5", {"inner": 1.5}),
    ("temperature='hot'", {"temperature": "hot"}), ("temperature=NaN", {"temperature": NAN}),
    ("temperature=0", {"temperature": 0}), ("temperature=True", {"temperature": True}),
    ("temperature=inf", {"temperature": math.inf}), ("dtau=NaN", {"dtau": NAN}),
    ("seed=-1", {"seed": -1}), ("seed=2**64", {"seed": 2**64}), ("seed='18446744073709551616'", {"seed": "18446744073709551616"}),
    ("seed=1.5", {"seed": 1.5}), ("seed='٣' (Arabic-Indic 3)", {"seed": "٣"}), ("seed=[1]", {"seed": [1]}),
    ("seed=None", {"seed": None}), ("seed='1e3'", {"seed": "1e3"}), ("seed=' 7 '", {"seed": " 7 "}),
    ("cache='no'", {"cache": "no"}), ("cache=1", {"cache": 1}),
    ("window='square'", {"window": "square"}), ("window=None", {"window": None}), ("window=3", {"window": 3}),
    ("masked_input='x'", {"masked_input": "x"}), ("text=123", {"text": 123}), ("text=b'bytes'", {"text": b"a [MASK] b"}),
    ("text=None", {"text": None}), ("text=''", {"text": ""}), ("text without a mask", {"text": "no mask here"}),
    ("[MASK:٣] (Arabic-Indic digit)", {"text": "a [MASK:٣] b"}), ("[MASK:³] (superscript)", {"text": "a [MASK:³] b"}),
    ("[MASK:abc]", {"text": "a [MASK:abc] b"}), ("[MASK:0]", {"text": "a [MASK:0] b"}),
    ("10 MB text", {"text": "x" * 10_000_000 + "[MASK]"}), ("sampler='nope'", {"sampler": "nope"}),
    ("sampler=['assd']", {"sampler": ["assd"]}), ("sampler=None", {"sampler": None}), ("model=123", {"model": 123}),
    ("model='nope'", {"model": "nope"}), ("draft_model=5", {"draft_model": 5}), ("domain=5", {"domain": 5, "model": None}),
    ("allow_paths='yes'", {"allow_paths": "yes"}), ("budget='big'", {"budget": "big"}), ("device=5", {"device": 5}),
    ("device='tpu'", {"device": "tpu"}), ("unknown argument tempreature", {"tempreature": 1.0}),
]

#: (case id, keyword arguments to engine.score over the tiny text model)
SCORE_CASES: list[tuple[str, dict]] = [
    ("text=123", {"text": 123, "ranges": [(0, 1)]}), ("ranges='x'", {"text": "abc", "ranges": "x"}),
    ("range ('a', 1)", {"text": "abc", "ranges": [("a", 1)]}), ("range (0, 1.5)", {"text": "abc", "ranges": [(0, 1.5)]}),
    ("range of 3", {"text": "abc", "ranges": [(0, 1, 2)]}), ("range (2, 1)", {"text": "abc", "ranges": [(2, 1)]}),
    ("no ranges", {"text": "abc"}), ("result=5", {"result": 5}), ("domain=3", {"text": "abc", "ranges": [(0, 1)], "domain": 3}),
]

FORM = {"domain": "text", "model": "text-asarm", "text": TEXT, "sampler": "assd", "k": 4, "temperature": 1.0,
        "seed": 3, "steps": 32, "dtau": 0.05, "window": "cosine", "inner": 1}
#: (case id, changes to the page's form), sent to /infill (the handler and the HTTP layer)
APP_CASES: list[tuple[str, dict]] = [
    ("k='abc'", {"k": "abc"}), ("k=5.5", {"k": 5.5}), ("k=None", {"k": None}), ("k=NaN", {"k": NAN}),
    ("seed='abc'", {"seed": "abc"}), ("seed=-1", {"seed": -1}), ("seed=1.5", {"seed": 1.5}), ("seed=NaN", {"seed": NAN}),
    ("seed='18446744073709551616'", {"seed": "18446744073709551616"}), ("seed='٣'", {"seed": "٣"}),
    ("seed='1e3'", {"seed": "1e3"}), ("seed='-0'", {"seed": "-0"}), ("seed=' 7 '", {"seed": " 7 "}),
    ("temperature=NaN", {"temperature": NAN}), ("temperature='x'", {"temperature": "x"}), ("steps=2.5", {"steps": 2.5}),
    ("inner='x'", {"inner": "x"}), ("dtau=NaN", {"dtau": NAN}), ("domain=['text']", {"domain": ["text"]}),
    ("sampler=None", {"sampler": None}), ("sampler=['assd']", {"sampler": ["assd"]}), ("model=5", {"model": 5}),
    ("text=123", {"text": 123}), ("[MASK:٣]", {"text": "a [MASK:٣] b"}), ("[MASK:³]", {"text": "a [MASK:³] b"}),
    ("window=5", {"window": 5}),
]
#: digit-string seeds the docs promise (docs/API.md): accepted through the API and the page
GOOD_SEEDS = ["42", "18446744073709551615", 18446744073709551615]


def form_values(changes: dict) -> list:
    """The /infill inputs in the page's order with `changes` applied."""
    return list({**FORM, **changes}.values())


def setup(root: Path) -> Path:
    """Tiny models under root (listed through INFILL_MODEL_DIRS) and a temporary store; returns the
    text model's folder. Call before importing app.stored.store."""
    from engine.loading import folders as model_folders
    from tools.tiny_models import make_tiny_models

    os.environ["INFILL_MODEL_DIRS"] = str(root / "models")
    os.environ["INFILL_UI_MIN_INTERVAL"] = "0"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model_folders.ASSETS = root / "no-bundled-models"
    make_tiny_models(root / "models")
    return root / "models" / "text-asarm"


def engine_message(model_path: Path, kwargs: dict) -> str:
    """What engine.infill says to a case ('' when it raised nothing, 'NOT AN InfillError: ...' when
    it raised something else)."""
    import engine
    from engine.errors import InfillError

    kw = {"model": str(model_path), "text": TEXT, "k": 2, **kwargs}
    if kw.get("model", "") is None:
        kw.pop("model")
    try:
        engine.infill(**kw)
    except InfillError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - what the sweep is looking for
        return f"NOT AN InfillError: {type(e).__name__}: {e}"
    return ""


def score_message(model_path: Path, kwargs: dict) -> str:
    """What engine.score says to a case (as engine_message)."""
    import engine
    from engine.errors import InfillError

    try:
        engine.score(model=str(model_path), **kwargs)
    except InfillError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"NOT AN InfillError: {type(e).__name__}: {e}"
    return ""


def handler_message(values: list) -> str:
    """The status line app.tabs.player.run_infill (the /infill handler) gives first."""
    from app.tabs.player import run_infill

    gen = run_infill(*values)
    try:
        first = next(gen)
    finally:
        gen.close()
    status = first["status"]
    return status if isinstance(status, str) else repr(status)


def http_message(demo, api_name: str, values: list) -> str:
    """What the HTTP API answers for these values: the error payload of a refused request, or the
    first update's status line (the handler's own message)."""
    from gradio.utils import error_payload

    fn = next(f for f in demo.fns.values() if f.api_name == api_name)

    async def call():
        out = await demo.process_api(block_fn=fn, inputs=values, state=None)
        it = out.get("iterator")
        if it is not None:
            await it.aclose() if hasattr(it, "aclose") else None
        return out

    try:
        out = asyncio.run(call())
    except Exception as e:  # noqa: BLE001 - the queue turns this into the payload below
        return f"error: {error_payload(e, False)['error']}"  # show_error=False: how app.serve launches
    data = out["data"]
    return str(data[0] if api_name == "infill" else data[-1])


def main() -> int:
    """Print the three tables: case | message."""
    import warnings

    warnings.simplefilter("ignore")  # the handler's toasts, raised outside a request, warn instead
    with tempfile.TemporaryDirectory() as tmp:
        model = setup(Path(tmp))
        from app import create
        from app.stored import store as app_store
        from storage import open_store

        app_store._store = open_store(f"sqlite:///{Path(tmp) / 'studio.db'}")
        demo = create()
        rows = [("engine", c, engine_message(model, kw)) for c, kw in ENGINE_CASES]
        rows += [("engine.score", c, score_message(model, kw)) for c, kw in SCORE_CASES]
        rows += [("handler /infill", c, handler_message(form_values(ch))) for c, ch in APP_CASES]
        rows += [("HTTP /infill", c, http_message(demo, "infill", form_values(ch))) for c, ch in APP_CASES]
        rows += [("HTTP /infill", "3 of 11 values", http_message(demo, "infill", ["text", "text-asarm", TEXT]))]
        rows += [("HTTP /mask_selection", "NaN selection", http_message(demo, "mask_selection",
                                                                        ["hello", NAN, 3, "text-asarm", "text"]))]
        app_store._store.close()
    w = max(len(c) for _, c, _ in rows)
    for where, case, msg in rows:
        print(f"{where:<20} {case:<{w}}  {' '.join(msg.split())[:150] or '(accepted)'}")
    bad = [r for r in rows if not r[2] or "NOT AN" in r[2] or "error: None" in r[2]]
    print(f"\n{len(rows)} cases, {len(rows) - len(bad)} answered with a message, {len(bad)} without")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
