"""The Infilling studio web app (Gradio): `python -m app`.

`create()` builds the queued Blocks page; `serve()` launches it. Queue settings come from the
environment: INFILL_CONCURRENCY (simultaneous model runs, default 2) and INFILL_QUEUE_SIZE
(waiting requests, default 64). Request limits (app.serving.limits) and per-run budgets (engine.budget)
are installed here too, and the public server's upkeep: idle visitor sessions dropped (app.serving.memory)
and old stored sessions deleted (storage.retention)."""

from __future__ import annotations

import os


def create():
    """The page with its queue and file-cache settings, not launched (tests and serve() share it)."""
    from app.serving.limits import DELETE_CACHE

    from .ui import build

    demo = build()
    demo.queue(
        default_concurrency_limit=int(os.environ.get("INFILL_CONCURRENCY", "2")),
        max_size=int(os.environ.get("INFILL_QUEUE_SIZE", "64")),
        api_open=False,  # a queued event only through the queue: a direct POST would skip its concurrency bound
    )
    if demo.delete_cache is None:  # Gradio's file cache (stats CSV downloads) must not grow forever
        demo.delete_cache = DELETE_CACHE
    return demo


def serve(host: str = "127.0.0.1", port: int = 7860, **kwargs):
    """Launch the page with its request limits on host:port (what `python -m app` runs), with the
    store's retention policy applied in the background (storage.retention: on for the public
    server, INFILL_RETENTION_DAYS / INFILL_RETENTION_MB; the library keeps everything)."""
    from app.serving.limits import launch_limits
    from app.stored.store import store
    from engine.loading.loaded_model import warm_imports
    from storage.retention import Pruner, Retention, period

    from .ui import launch_kwargs

    warm_imports()  # before the first request: concurrent first loads must not race transformers' imports
    Pruner(lambda: store().engine, Retention.from_env(), period()).start()
    demo = create()
    return demo.launch(server_name=host, server_port=port, footer_links=["api"],
                       **{**launch_kwargs(), **launch_limits(), **kwargs})
