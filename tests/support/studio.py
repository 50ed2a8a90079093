"""The app's run logic on tiny random models and a temporary store, for the tests that drive the app's run
logic without a browser (test_harden, test_serving): one home for the set-up and its undoing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEXT = "The cat sat on the [MASK:12] mat."


@contextmanager
def tiny_studio(root: Path) -> Iterator:
    """Tiny random models (every printable character is a token) under root/models, no bundled
    models, and the app's store (app.stored.store) in root/studio.db, which it yields; everything
    restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "INFILL_UI_MIN_INTERVAL")}
    os.environ["INFILL_MODEL_DIRS"] = str(root / "models")
    os.environ["INFILL_UI_MIN_INTERVAL"] = "0"
    from app.stored import store as app_store
    from engine.loading import folders as model_folders
    from storage import open_store
    from tools.tiny_models import make_tiny_models

    saved_assets, saved_store = model_folders.ASSETS, app_store._store
    model_folders.ASSETS = root / "no-bundled-models"
    make_tiny_models(root / "models")
    app_store._store = open_store(f"sqlite:///{root / 'studio.db'}")
    try:
        yield app_store._store
    finally:
        app_store._store.close()
        app_store._store, model_folders.ASSETS = saved_store, saved_assets
        restore_env(saved)


@contextmanager
def launched_studio(root: Path) -> Iterator:
    """The app launched in this process on a free port over `tiny_studio(root)`: yields
    (demo, url, store); the server is closed and everything restored afterwards."""
    from tools.tiny_models import launch_for_tests

    with tiny_studio(root) as store:
        demo, url = launch_for_tests()
        try:
            yield demo, url, store
        finally:
            demo.close()


def restore_env(saved: dict[str, str | None]) -> None:
    """Put environment variables back as `saved` recorded them (None: it was unset)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def form(text: str = TEXT, sampler: str = "assd", seed: int = 3, **kw):
    """A Form for the tiny text-asarm (k = 4 unless given)."""
    from app.run.form import Form

    return Form(domain="text", model="text-asarm", text=text, sampler=sampler, k=kw.pop("k", 4), seed=seed, **kw)


def run_to_round(round_no: int = 2) -> tuple[Iterator, list[dict]]:
    """A 60-token sequential run on the tiny text model, streamed as the page streams it until the page
    shows round `round_no`: (the rest of the stream, the frames so far). What a Stop or a domain switch
    meets in the middle of a run."""
    from app.tabs import player

    gen = player.run_infill("text", "text-asarm", "x[MASK:60]y", "sequential", 4, 1.0, 8, 32, 0.05, "cosine", 1)
    frames = []
    for f in gen:
        frames.append(f)
        if f"round {round_no}" in str(f.get("status", "")):
            break
    return gen, frames
