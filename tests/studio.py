"""app.core on tiny random models and a temporary store, for the tests that drive the app's run
logic without a browser (test_harden, test_serving): one home for the set-up and its undoing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEXT = "The cat sat on the [MASK:12] mat."


@contextmanager
def tiny_studio(root: Path) -> Iterator:
    """app.core with tiny random models (every printable character is a token) under root/models,
    no bundled models, and a store in root/studio.db; everything restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "INFILL_UI_MIN_INTERVAL")}
    os.environ["INFILL_MODEL_DIRS"] = str(root / "models")
    os.environ["INFILL_UI_MIN_INTERVAL"] = "0"
    from app import core
    from app.testing import make_tiny_models
    from engine import registry
    from storage import open_store

    saved_assets, saved_store = registry.ASSETS, core._store
    registry.ASSETS = root / "no-bundled-models"
    make_tiny_models(root / "models")
    core._store = open_store(f"sqlite:///{root / 'studio.db'}")
    try:
        yield core
    finally:
        core._store.close()
        core._store, registry.ASSETS = saved_store, saved_assets
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def form(core, text: str = TEXT, sampler: str = "assd", seed: int = 3, **kw):
    """A Form for the tiny text-asarm (k = 4 unless given)."""
    return core.Form(domain="text", model="text-asarm", text=text, sampler=sampler, k=kw.pop("k", 4), seed=seed, **kw)
