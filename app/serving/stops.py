"""Stop and Skip to end, pressed by a visitor for a session's run: the page's cooperative path,
which works whether or not the web framework manages to cancel the streaming task. Keyed by share id."""

from __future__ import annotations

import threading

_stops: set[str] = set()
_stops_lock = threading.Lock()


def request_stop(share_id: str) -> None:
    """Ask the run of this session to stop after the round it is in (Stop's cooperative path:
    it works whether or not the web framework manages to cancel the streaming task)."""
    with _stops_lock:
        _stops.add(share_id)


def clear_stop(share_id: str) -> None:
    """Forget a Stop request (the consumer of the session's runs calls this when they are over)."""
    with _stops_lock:
        _stops.discard(share_id)


def stop_requested(share_id: str) -> bool:
    """Whether Stop was pressed for this session's runs."""
    with _stops_lock:
        return share_id in _stops


_skips: set[str] = set()


def request_skip(share_id: str) -> None:
    """Skip to end: the Watch pace of this session's run stops and its last frame shows (bounded:
    presses for runs that never watch are forgotten in bulk, never piled up)."""
    with _stops_lock:
        if len(_skips) >= 4096:
            _skips.clear()
        _skips.add(share_id)


def skip_requested(share_id: str) -> bool:
    """Whether Skip to end was pressed for this session's run."""
    with _stops_lock:
        return share_id in _skips


def clear_skip(share_id: str) -> None:
    """Forget a Skip to end request (the run's last frame has gone out)."""
    with _stops_lock:
        _skips.discard(share_id)
