"""Holding a run at a chosen call until the test lets it go: a first round (or a preparation)
that takes as long as the test needs, so that a Stop can land inside it."""

from __future__ import annotations

import threading


def hold(monkeypatch, owner, name: str) -> tuple[threading.Event, threading.Event]:
    """Patch `owner.name` so that each call sets `reached`, waits (at most 60 s) for `release`,
    then runs the real one; returns (reached, release)."""
    reached, release = threading.Event(), threading.Event()
    real = getattr(owner, name)

    def held(*a, **kw):
        reached.set()
        release.wait(60)
        return real(*a, **kw)

    monkeypatch.setattr(owner, name, held)
    return reached, release
