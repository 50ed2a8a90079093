"""The Watch pace: a run that computed faster than a person can follow is shown again, step by
step, at a pace a person can read before its last frame (no model involved: the steps are already
computed); Skip to end or Stop ends it. The scrubber follows it, as it follows a live run."""

from __future__ import annotations

import threading

import gradio as gr

from app.run.streaming import Live
from app.serving import stops
from app.timing.speedup import fmt_seconds
from app.views.render import counters_md, view_html

from .common import detail_table, status_md
from .playback import paced

#: the Watch pace: a run that computed in under WATCH_UNDER seconds is shown at WATCH_RATE decided
#: tokens a second (faster when that would take more than WATCH_MAX seconds), drafts held on screen
WATCH_RATE = 5.0
WATCH_MAX = 10.0
WATCH_UNDER = 3.0
WATCH_ENDS: dict[str, threading.Event] = {}  # share id -> set once its Watch replay has ended


def scrub_live(i: int, n: int | None = None):
    """The scrubber following a run as it plays (step i of n, n = i while it computes): not
    draggable until the run is stored."""
    return gr.update(minimum=0, maximum=max(n if n is not None else i, 1), value=i, interactive=False)


def watch_rate(decided: int) -> float:
    """The Watch pace for a run that decides `decided` tokens: WATCH_RATE, faster when that would
    take more than WATCH_MAX seconds."""
    return max(WATCH_RATE, decided / WATCH_MAX)


def watched(live: Live, note: str):
    """A run that computed faster than a person can follow, shown again at the Watch pace before
    its last frame (no model involved: the steps are already computed). Skip to end ends it; Stop
    ends it too, and then True is returned and no frame follows (Stop's own update shows the run)."""
    st0 = live.state
    rate = watch_rate(st0.decided)
    took = fmt_seconds(live.run.compute_seconds)
    sid = live.share_id
    skip = lambda: stops.skip_requested(sid) or stops.stop_requested(sid)  # noqa: E731
    done = WATCH_ENDS.setdefault(sid, threading.Event())
    stopped = False
    try:
        yield from _watch_frames(live, note, rate, took, skip)
        stopped = stops.stop_requested(sid)  # read before stop_run may clear it
    finally:
        done.set()  # stop_run waits for this: no Watch frame arrives after Stop's update
        WATCH_ENDS.pop(sid, None)
    return stopped


def _watch_frames(live: Live, note: str, rate: float, took: str, skip):
    st0, n, title = live.state, len(live.steps), run_title(live.run.spec.name, live.run.lm.name)
    for i, st in paced(live.view, live.steps, 0, rate, skip, bytes_of=st0.bytes_of):
        msg = status_md(f"Watching {live.run.spec.name}: round {st.round + 1}, {st.decided} of {len(st.masked)} "
                        f"tokens, shown at {rate:.0f} tokens/s (it computed in {took}). "
                        f"Skip to end shows the result now.{note}")
        yield {"status": msg, "counters": counters_md(st, f"watching at {rate:.0f} tokens/s: skip to end shows the "
                                                          "result now"),
               "player": view_html(st, title), "detail": detail_table(st.detail), "completed": "", "link": "",
               "run_sid": live.share_id, "scrub_sl": scrub_live(i, n)}


def run_title(sampler: str, model: str) -> str:
    """A run's title over its token view."""
    return f"{sampler} on {model}"
