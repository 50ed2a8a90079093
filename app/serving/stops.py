"""Stop and Skip to end, pressed by a visitor for a session's run: the page's cooperative path,
which works whether or not the web framework manages to cancel the streaming task. Keyed by share id.

Stop answers from the run's own state (`track` / `tracked`: the player's runs in progress, and
the last few that ended), never by polling the store: a run stopped before its first round is
never stored, and polling for it held a server thread for 10 s per press."""

from __future__ import annotations

import threading
import time
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
_owners: OrderedDict[str, str] = OrderedDict()  # a page (Gradio session hash) -> the share id of its run in progress
_clicks: OrderedDict[str, float] = OrderedDict()  # a page -> when it last pressed Run
_latest: OrderedDict[str, str] = OrderedDict()  # a page -> the share id of the last run it started
_owner_stops: OrderedDict[str, float] = OrderedDict()  # a page -> when it pressed Stop with no run id yet


def _remember(requests: OrderedDict, key: str, value: object = None) -> None:
    """Put `key` last (most recent), forgetting the oldest past _REQUESTS_MAX; hold _stops_lock."""
    requests[key] = value
    requests.move_to_end(key)
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
    """A run of the player is in progress under this share id (Stop reads its state); its page
    (`run.owner`, a session hash) finds it by `running_for` while the id has not reached the page."""
    with _stops_lock:
        _running[share_id] = run
        _ended.pop(share_id, None)
        owner = getattr(run, "owner", None)
        if owner:
            _remember(_owners, owner, share_id)
            _remember(_latest, owner, share_id)


def note_click(owner: str | None) -> None:
    """A page pressed Run (its click handler, before the run is queued)."""
    if owner:
        with _stops_lock:
            _remember(_clicks, owner, time.monotonic())


def clicked_at(owner: str | None) -> float:
    """When this page last pressed Run (time.monotonic; infinity when never noted)."""
    with _stops_lock:
        return _clicks.get(owner or "", float("inf"))


def note_start(owner: str | None, token: str) -> None:
    """A page pressed Run: its last run is now this one (`token` until it has a share id)."""
    if owner:
        with _stops_lock:
            _remember(_latest, owner, token)


def started_since(owner: str | None, share_id: str) -> bool:
    """Whether this page (its session hash) has started a run after the one under `share_id`."""
    if not owner or not share_id:
        return False
    with _stops_lock:
        latest = _latest.get(owner)
    return latest is not None and latest != share_id


def running_for(owner: str | None) -> str:
    """The share id of the run in progress on this page (its session hash), or "" when none is."""
    if not owner:
        return ""
    with _stops_lock:
        sid = _owners.get(owner, "")
        return sid if sid in _running else ""


def request_owner_stop(owner: str | None, now: float) -> None:
    """Stop pressed on a page whose run has no share id yet (it is being prepared, or waits in the
    queue): every run of that page started at or before `now` (time.monotonic) stops before its
    first frame and stores nothing (bounded, oldest forgotten first)."""
    if not owner:
        return
    with _stops_lock:
        _remember(_owner_stops, owner, now)


def owner_stopped_since(owner: str | None, t0: float) -> bool:
    """Whether this page pressed Stop (with no run id yet) at or after monotonic time t0."""
    if not owner:
        return False
    with _stops_lock:
        t = _owner_stops.get(owner)
    return t is not None and t >= t0


def untrack(share_id: str) -> None:
    """The run has left the player: kept among the last few ended runs, for a late Stop."""
    with _stops_lock:
        run = _running.pop(share_id, None)
        owner = getattr(run, "owner", None)
        if owner and _owners.get(owner) == share_id:
            _owners.pop(owner, None)
        if run is not None:
            _ended[share_id] = run
            while len(_ended) > _ENDED_MAX:
                _ended.popitem(last=False)


def tracked(share_id: str) -> object | None:
    """The run in progress (or recently ended) under this share id; None for any other id."""
    with _stops_lock:
        return _running.get(share_id) or _ended.get(share_id)
