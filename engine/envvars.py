"""Numbers read from environment variables, one rule for every knob of the server and the store
(run budgets, slots, sessions, retention): an unreadable value falls back to the default, so a
typo in a deployment's settings never stops the server from starting."""

from __future__ import annotations

import os


def env_int(name: str, default: int) -> int:
    """A positive whole number from `name`; the default when unset, unreadable or not above 0."""
    try:
        v = int(os.environ.get(name, default))
    except ValueError:
        return default
    return v if v > 0 else default


def env_limit(name: str, default: float) -> float | None:
    """A limit from `name`: a positive number, or None (no limit) for 0, a negative number or NaN;
    the default when unset, blank or unreadable."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        return default
    return v if v > 0 else None  # NaN compares false: no limit
