"""Stop and Skip to end, pressed by a visitor for a session's run: the page's cooperative path,
which works whether or not the web framework manages to cancel the streaming task. Keyed by share id.

Stop answers from the run's own state (`track` / `tracked`: the player's runs in progress, and
the last few that ended), never by polling the store: a run stopped before its first round is
never stored, and polling for it held a server thread for 10 s per press."""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Stop / Skip requests remembered at most (oldest forgotten first: a flood of made-up share ids
#: must not grow them; a real run's request is read within one round)
_REQUESTS_MAX = 4096
#: ended runs kept for a Stop that crossed the run's last update (most recent last)
_ENDED_MAX = 64

_stops: OrderedDict[str, None] = OrderedDict()
_stops_lock = threading.Lock()
_running: dict[str, object] = {}
_ended: OrderedDict[str, object] = OrderedDict()


def _remember(requests: OrderedDict, share_id: str) -> None:
    requests[share_id] = None
    requests.move_to_end(share_id)
    while len(requests) > _REQUESTS_MAX:
        requests.popitem(last=False)


def request_stop(share_id: str) -> None:
    """Ask the run of this session to stop after the round it is in (Stop's cooperative path:
    it works whether or not the web framework manages to cancel the streaming task)."""
    with _stops_lock:
        _remember(_stops, share_id)


def clear_stop(share_id: str) -> None:
    """Forget a Stop request (the consumer of the session's runs calls this when they are over)."""
    with _stops_lock:
        _stops.pop(share_id, None)


def stop_requested(share_id: str) -> bool:
    """Whether Stop was pressed for this session's runs."""
    with _stops_lock:
        return share_id in _stops


_skips: OrderedDict[str, None] = OrderedDict()


def request_skip(share_id: str) -> None:
    """Skip to end: the Watch pace of this session's run stops and its last frame shows (bounded:
    presses for runs that never watch are forgotten, oldest first, never piled up)."""
    with _stops_lock:
        _remember(_skips, share_id)


def skip_requested(share_id: str) -> bool:
    """Whether Skip to end was pressed for this session's run."""
    with _stops_lock:
        return share_id in _skips


def clear_skip(share_id: str) -> None:
    """Forget a Skip to end request (the run's last frame has gone out)."""
    with _stops_lock:
        _skips.pop(share_id, None)


def track(share_id: str, run: object) -> None:
    """A run of the player is in progress under this share id (Stop reads its state)."""
    with _stops_lock:
        _running[share_id] = run
        _ended.pop(share_id, None)


def untrack(share_id: str) -> None:
    """The run has left the player: kept among the last few ended runs, for a late Stop."""
    with _stops_lock:
        run = _running.pop(share_id, None)
        if run is not None:
            _ended[share_id] = run
            while len(_ended) > _ENDED_MAX:
                _ended.popitem(last=False)


def tracked(share_id: str) -> object | None:
    """The run in progress (or recently ended) under this share id; None for any other id."""
    with _stops_lock:
        return _running.get(share_id) or _ended.get(share_id)
