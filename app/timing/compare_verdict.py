"""Compare's answer to "which is faster, and by how much": side A against side B timed the way the
player's "vs cached sequential" line times (app.timing.speedup): alternating unstored reruns, the median
of the pairs' time ratios and their range. Each side is timed once by the Compare run itself, and
one timing flips with machine noise (issue: 0.30 s / 0.28 s, then 0.86 s / 1.04 s), so a winner is
named only when every pair agrees; otherwise the verdict says "too close to call". Sides on
different models, or runs too short to time, get a plain reason instead of a ratio. The timing
runs are admitted as the visitor's own (they count against the visitor who asked, never against
the seats kept for others)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from app.run.streaming import Live
from app.serving import cancels
from app.serving.admission import admission, small_run_tokens
from app.serving.slots import Cancelled
from app.timing.speedup import MIN_TIMED_SECONDS, MIN_TIMED_TOKENS, fmt_seconds, speed_ratio, speedup_seconds, timed_rerun
from engine.errors import InfillError

log = logging.getLogger("app")

MAX_PAIRS = 7
#: fewer pairs than this give a ratio but never a winner
MIN_PAIRS_TO_CALL = 3

_PENDING: OrderedDict[str, tuple[Live, Live]] = OrderedDict()  # share id -> (A, B), newest last
_KEEP = 32
_lock = threading.Lock()


def remember(share_id: str, a: Live, b: Live) -> None:
    """Keep a finished comparison until the page's chained verdict event asks for it (bounded)."""
    with _lock:
        _PENDING[share_id] = (a, b)
        while len(_PENDING) > _KEEP:
            _PENDING.popitem(last=False)


def take(share_id: str) -> tuple[Live, Live] | None:
    """The comparison remembered under `share_id` (each is judged once)."""
    with _lock:
        return _PENDING.pop(share_id, None)


def reason_not_to_time(a: Live, b: Live) -> str:
    """Why A and B cannot be timed against each other ("" when they can)."""
    if a.result is None or b.result is None:
        return "No verdict: a side did not finish (stopped or failed), so there is nothing to time."
    if a.run.lm.name != b.run.lm.name:
        return (f"No speed verdict: A runs on {a.run.lm.name} and B on {b.run.lm.name}, so a time ratio would "
                "compare the models, not the samplers. Pick the same model on both sides to time them.")
    n = len(a.run.mi.masked)
    if n < MIN_TIMED_TOKENS:
        return (f"Too short to time: {n} masked token" + ("s" if n != 1 else "") + f"; below {MIN_TIMED_TOKENS} "
                "timing noise decides the ratio. Mask more tokens to compare speeds.")
    quick = min(a.run.compute_seconds, b.run.compute_seconds)
    if quick < MIN_TIMED_SECONDS:
        return (f"Too short to time: the quicker side computed in {fmt_seconds(quick)}, below "
                f"{fmt_seconds(MIN_TIMED_SECONDS)} timing noise decides the ratio. Mask more tokens to compare speeds.")
    return ""


def pair_count(a_seconds: float, b_seconds: float) -> int:
    """How many alternating pairs fit in INFILL_SPEEDUP_SECONDS of compute (1 to MAX_PAIRS), the
    Compare run itself being the first."""
    return int(max(1, min(MAX_PAIRS, speedup_seconds() // max(a_seconds + b_seconds, 1e-9))))


def timed_pairs(a: Live, b: Live) -> tuple[list[float], list[float]]:
    """Alternating compute seconds of A and B (the Compare run is the first pair; B goes first in
    the next pair, so neither side always runs on a warmer machine)."""
    ta, tb = [a.run.compute_seconds], [b.run.compute_seconds]
    for _ in range(pair_count(ta[0], tb[0]) - 1):
        tb.append(timed_rerun(b, b.run.spec.name))
        ta.append(timed_rerun(a, a.run.spec.name))
    return ta, tb


def verdict_text(name_a: str, name_b: str, ta: list[float], tb: list[float]) -> str:
    """The verdict from the pairs: A's time as a multiple of B's (median, range, pairs) and what it
    means; "too close to call" when the range reaches 1 or there are too few pairs."""
    med, lo, hi = speed_ratio(ta, tb)  # per pair: A's seconds / B's seconds
    n = len(ta)
    pairs = f"{n} alternating pair" + ("s" if n != 1 else "")
    span = f"range {lo:.2f}-{hi:.2f}, {pairs}" if n > 1 else pairs
    head = f"A ({name_a}) took {med:.2f}x the time of B ({name_b}) ({span})"
    if n < MIN_PAIRS_TO_CALL:
        what = f"too few pairs to call (a long run: more would cost over {speedup_seconds():g} s of compute)"
    elif lo <= 1.0 <= hi:
        what = "too close to call: the pairs disagree on which is faster"
    elif med > 1:
        what = f"A is slower on this machine; B is {med:.2f}x as fast"
    else:
        what = f"A is faster on this machine, {1 / med:.2f}x as fast as B"
    from statistics import median

    return (f"**Verdict:** {head}: {what}. Median compute time A {fmt_seconds(median(ta))}, "
            f"B {fmt_seconds(median(tb))}; measured now on this server, unstored reruns.")


def judge(a: Live, b: Live) -> str:
    """The verdict line for a finished comparison: a reason, or the timed pairs' verdict ("" when
    the timing was cancelled or refused; a refusal's message says why)."""
    reason = reason_not_to_time(a, b)
    if reason:
        return f"**Verdict:** {reason}"
    long = len(a.run.mi.masked) > small_run_tokens()
    cancelled = lambda: cancels.cancelled_since(a.owner, a.created)  # noqa: E731
    try:
        # the visitor's own timing: it counts against their runs in progress (a third run is refused)
        with admission().enter(a.address or a.owner, long, cancelled):
            ta, tb = timed_pairs(a, b)
    except Cancelled:
        return ""
    except InfillError as e:  # refused (admission.Busy) or over its budget: say so
        return f"**Verdict:** not timed: {e}"
    except Exception:  # noqa: BLE001 - the timing must never spoil the stored comparison
        log.exception("timing the compare verdict failed")
        return ""
    return verdict_text(a.run.spec.name, b.run.spec.name, ta, tb)
