"""Playing a stored trace in the Step player: a frame after any step, step forward and back over
the steps that change what is seen, scrubbing, and playback at a chosen pace (N decided tokens a
second, or as fast as it ran). No model is involved: the steps are read from the trace (a
StoredTrace reads them from the store). Run and Stop, which make the trace, are in app.tabs.player."""

from __future__ import annotations

import time

from app.stored import share
from app.views import token_views
from app.views.render import DETAIL_HEADERS, counters_md, esc, view_html
from engine.trace import DECIDING_KINDS, PASS_KINDS

from .common import detail_table, empty_table, guarded

SPEEDS = ["as fast as it ran", "2 tokens/s", "5 tokens/s", "10 tokens/s", "30 tokens/s", "100 tokens/s"]
DEFAULT_SPEED = "5 tokens/s"
FRAME_GAP = 0.1  # seconds: frames closer than this are merged (ten a second are plenty to watch)
#: what the player's controls over a stored trace update
FRAME_OUTPUTS = ("player", "detail", "counters", "scrub_sl")


def _event(s) -> str:
    if s.kind in PASS_KINDS:
        return f"round {s.round + 1}: network pass ({s.kind.value.replace('_', ' ')})"
    n = len(s.positions)
    return f"round {s.round + 1}: {s.kind.value} {n} token" + ("s" if n != 1 else "")


def frame(trace, i: int, st=None) -> dict:
    """The player, round table, counters and scrubber position (FRAME_OUTPUTS, by name) after the
    first i steps of a stored trace."""
    steps = trace["steps"]
    i = max(0, min(int(i or 0), len(steps)))
    if st is None:
        st = token_views.new_state(trace["view"], steps, i)
    where = f"step {i}/{len(steps)}" + (f" · {_event(steps[i - 1])}" if i else "")
    return {"player": view_html(st, trace.get("title", "")), "detail": detail_table(st.detail),
            "counters": counters_md(st, where), "scrub_sl": i}


#: what the player says without a trace: never run, or the server dropped this page's session from its
#: memory (idle too long, app.serving.memory); the run is still stored and its share link reloads it
NO_TRACE = ("Run something (or open a share link) first. If a run was shown here, the server has since "
            "let go of this page's copy: the share link under the player reloads it from the store.")


#: the same, when the page still shows the run's share link (it lives in the browser, so it outlasts
#: the server's copy): the link itself, to reload the run from the store
LOST = ("The server has let go of this page's copy of the run (the page was idle, or the server restarted); "
        "the run is still stored. Its share link reloads it:")


def _nothing(msg=NO_TRACE, link=None) -> dict:
    """The player with nothing to play: `msg`, or, when the page holds a run's share link, LOST
    with that link (escaped; only a link to this app's ?s= share id is made a link)."""
    sid = share.share_id_from_link(link) if isinstance(link, str) and link.strip() else ""
    if sid:
        link = link.strip()
        href = link if link.startswith(("http://", "https://")) else f"?{share.QUERY_KEY}={sid}"
        html_ = f'<div class="tv-wrap tv-lost">{esc(LOST)} <a href="{esc(href)}">{esc(link)}</a></div>'
        return {"player": html_, "detail": empty_table(DETAIL_HEADERS), "counters": ""}
    return {"player": view_html(None, message=msg), "detail": empty_table(DETAIL_HEADERS), "counters": ""}


@guarded
def scrub(i, trace, link=None):
    """Render the stored trace after its first i steps."""
    if not trace:
        return _nothing(link=link)
    update = frame(trace, i)
    del update["scrub_sl"]  # the visitor is dragging it
    return update


def _visible_step(steps, i: int, direction: int) -> int:
    """The next position (forward or back) after which something visible changed: network passes
    only move the counters, so a step skips over them."""
    n = len(steps)
    j = i + direction
    while 0 < j < n and steps[j - 1].kind in PASS_KINDS:
        j += direction
    return max(0, min(j, n))


@guarded
def step_forward(i, trace, link=None):
    """One visible step forward in the stored trace."""
    if not trace:
        return _nothing(link=link)
    return frame(trace, _visible_step(trace["steps"], int(i or 0), +1))


@guarded
def step_back(i, trace, link=None):
    """One visible step back in the stored trace."""
    if not trace:
        return _nothing(link=link)
    return frame(trace, _visible_step(trace["steps"], int(i or 0), -1))


@guarded
def to_end(trace, link=None) -> dict:
    """The stored trace's last step (Skip to end once the run is stored; the page's `cancels` stop
    play and replay first). With no trace: the share link when the page still shows one (LOST),
    else nothing changes (a run is still being prepared: nothing to skip to)."""
    if not trace:
        return _nothing(link=link) if share.share_id_from_link(link) else {}
    return frame(trace, len(trace["steps"]))


def _rate(speed) -> float | None:
    """Decided tokens per second of a speed label ("5 tokens/s" -> 5.0; None: as fast as it ran)."""
    if isinstance(speed, (int, float)):
        return max(float(speed), 0.1)
    if speed == SPEEDS[0]:
        return None
    try:
        return max(float(str(speed).split()[0]), 0.1)
    except ValueError:
        return 5.0


def _delay(steps, j: int, speed) -> float:
    """Seconds between showing step j-1 and step j: at a playback rate, the tokens step j decides
    divided by the rate (drafts, rejections and network passes decide none, so they show at once
    and stay until the decision after them); as fast as it ran, the time it really took."""
    s = steps[j]
    rate = _rate(speed)
    if rate is None:
        prev = steps[j - 1].elapsed if j else 0.0
        return max(0.0, (s.elapsed or 0.0) - (prev or 0.0))
    return len(s.positions) / rate if s.kind in DECIDING_KINDS else 0.0


def paced(view: dict, steps: list, start: int, speed, stop=lambda: False, bytes_of=None):
    """(i, state) after each group of steps from `start`, each group shown when it is due at `speed`:
    a frame goes out before every wait (so drafts stay on screen until the decision after them),
    except that states less than FRAME_GAP apart are merged. `stop()` ends it early. `bytes_of`:
    the tokenizer's token id -> bytes when the caller holds the model (app.views.token_views.new_state)."""
    n = len(steps)
    st = token_views.new_state(view, steps, start, bytes_of=bytes_of)
    due = shown = time.perf_counter()
    for j in range(start, n):
        due += _delay(steps, j, speed)
        st.apply(steps[j])
        nxt = _delay(steps, j + 1, speed) if j + 1 < n else 0.0
        # show this state when the next step waits and this one is not merely an instant after the last
        if j == n - 1 or (nxt > 0 and (nxt >= FRAME_GAP or due - shown >= FRAME_GAP)):
            shown = due
            while True:  # sleep until due, looking at stop() now and then
                wait = due - time.perf_counter()
                if wait <= 0 or stop():
                    break
                time.sleep(min(wait, 0.1))
            if stop():
                return
            yield j + 1, st


@guarded
def play(i, trace, speed, link=None):
    """Play a stored trace from the current step (from the start when at the end) at the chosen
    speed: "N tokens/s" shows N decided tokens a second. Pause stops it where it is. No model involved."""
    if not trace:
        yield _nothing("Nothing stored to play yet.", link)
        return
    steps = trace["steps"]
    i = int(i or 0)
    if i >= len(steps):
        i = 0
    yield frame(trace, i)
    for j, st in paced(trace["view"], steps, i, speed):
        yield frame(trace, j, st)


@guarded
def replay(trace, speed=DEFAULT_SPEED, link=None):
    """Play a stored trace from the start at the chosen speed (no model involved)."""
    yield from play(0, trace, speed, link)
