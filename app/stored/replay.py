"""Stored runs read back for the page: a stored session by share id (load_session -> Replay) and
a visitor's player state for a stored run (StoredTrace: its id, with the steps read from the
store when the player needs them)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from app.stored.share import share_id_from_link
from app.stored.store import store
from engine.errors import BadParameterError
from engine.trace import Step
from storage import SessionRecord


class StoredTrace(Mapping):
    """A stored run's trace as a visitor's player state holds it: the run's id, the input's token
    view and a title; the steps are read from the store when the player needs them (the few most
    recent runs cached process-wide). Why: Gradio keeps each visitor's state in memory, and a
    trace of a thousand steps with their probabilities per visitor added up; an id
    costs nothing. It reads as a {"view", "steps", "title"} mapping, the shape the player's handlers take."""

    __slots__ = ("run_id", "view", "title")

    def __init__(self, run_id: int, view: dict, title: str = ""):
        self.run_id, self.view, self.title = run_id, view, title

    def __getitem__(self, key: str):
        if key == "steps":
            return stored_steps(self.run_id)
        if key == "view":
            return self.view
        if key == "title":
            return self.title
        raise KeyError(key)

    def __iter__(self):
        return iter(("view", "steps", "title"))

    def __len__(self) -> int:
        return 3


_STEPS_KEEP = 16
_steps_cache: OrderedDict[tuple[int, int], list[Step]] = OrderedDict()
_steps_lock = threading.Lock()


def stored_steps(run_id: int) -> list[Step]:
    """The steps of stored run `run_id` ([] when retention deleted it), from a small LRU cache."""
    key = (id(store()), run_id)
    with _steps_lock:
        if key in _steps_cache:
            _steps_cache.move_to_end(key)
            return _steps_cache[key]
    run = store().get_run(run_id)
    steps = list(run.steps) if run is not None else []
    with _steps_lock:
        _steps_cache[key] = steps
        while len(_steps_cache) > _STEPS_KEEP:
            _steps_cache.popitem(last=False)
    return steps


def trace_ref(run_id: int | None, view: dict, steps: list[Step], title: str):
    """The player's state for a run: its id once stored (StoredTrace), else the steps themselves."""
    if run_id is None:
        return {"view": view, "steps": steps, "title": title}
    return StoredTrace(run_id, view, title)



@dataclass
class Replay:
    """A stored session read back for the page: its runs and the token views to draw them with."""

    session: SessionRecord
    runs: list  # RunRecord, oldest first
    views: dict

    def view_for(self, run) -> dict:
        """The token view of the model this run used (the first one for older sessions)."""
        m = run.params.get("model")
        if m in self.views:
            return self.views[m]
        return next(iter(self.views.values()))

    @property
    def kind(self) -> str:
        """'infill' or 'compare': which view the session restores into."""
        return self.session.spans.get("kind", "infill") if isinstance(self.session.spans, dict) else "infill"


def load_session(share_id: str) -> Replay:
    """A stored session by share id, with a message that says why when it cannot be replayed."""
    if not isinstance(share_id, str):
        raise BadParameterError("Give a share id or a share link (text).")
    share_id = share_id.strip()
    if "?" in share_id or "/" in share_id:  # a whole share link pasted: the id is its ?s= value
        share_id = share_id_from_link(share_id) or share_id
    if not share_id:
        raise BadParameterError("Give a share id or a share link (the id is the part after ?s=).")
    sess = store().get_session(share_id)
    if sess is None:
        raise BadParameterError("No stored session has this share id; check the link (a run is stored when it "
                                "ends, so a link opened while its run is still going is not there yet).")
    views = sess.spans.get("views") if isinstance(sess.spans, dict) else None
    if not views:
        raise BadParameterError("This session was stored without the data needed to replay it.")
    return Replay(sess, sorted(sess.runs, key=lambda r: r.id), views)
