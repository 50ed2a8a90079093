"""Compare's answer to "which is faster, and by how much": side A against side B in alternating
unstored reruns (the Compare run itself is the first pair), until the interval of the speed ratio
(A's speed over B's: the geometric mean of the pairs' ratios with its 95% t interval) excludes 1 or
lies within +-10%, or the budget (MAX_PAIRS pairs, INFILL_COMPARE_SECONDS of compute) is spent. It
says so in the page's one unit: "A is 1.40x faster (1.20-1.60, 12 pairs)", "no difference within
+-10% (24 pairs)", or no call within the budget, with the interval. Sides on different models, or
runs too short to time, get a plain reason instead of a ratio. The timing runs are admitted as the
visitor's own (they count against the visitor who asked, never against the seats kept for
others). The verdict is stored with the comparison's session (app.tabs.compare.verdict), so its
share link shows it."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from app.run.streaming import Live
from app.serving import cancels
from app.serving.admission import admission, small_run_tokens
from app.serving.slots import Cancelled
from app.timing.speedup import (
    MIN_TIMED_SECONDS,
    MIN_TIMED_TOKENS,
    fmt_seconds,
    machine_here,
    timed_rerun,
)
from app.timing.units import speed_words
from engine.errors import InfillError

log = logging.getLogger("app")

#: the budget of one verdict: at most MAX_PAIRS alternating pairs (the Compare run is the first) and
#: compare_seconds() of compute; it ends sooner once the speed ratio's interval decides
MAX_PAIRS = 48
#: no call before this many pairs (a t interval from fewer is too wide to trust)
MIN_PAIRS_TO_CALL = 4
#: "no difference": the whole interval of the speed ratio lies within 1 -+ this
EQUIVALENT = 0.10
#: the interval's level (two-sided)
LEVEL = 0.95


def compare_seconds() -> float:
    """Compute a verdict may spend on its pairs (INFILL_COMPARE_SECONDS, default 30)."""
    import os

    try:
        return max(0.0, float(os.environ.get("INFILL_COMPARE_SECONDS", "30")))
    except ValueError:
        return 30.0


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


def interval(ta: list[float], tb: list[float]) -> tuple[float, float, float]:
    """A's speed as a multiple of B's (above 1: A is faster): the geometric mean of the pairs' ratios
    tb/ta and its LEVEL t interval on the log scale; (ratio, ratio, ratio) for a single pair."""
    import math

    from scipy.stats import t as student

    logs = [math.log(b / a) for a, b in zip(ta, tb) if a > 0 and b > 0]
    n = len(logs)
    mean = sum(logs) / max(n, 1)
    if n < 2:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = float(student.ppf(0.5 + LEVEL / 2, n - 1)) * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def decided(ta: list[float], tb: list[float]) -> str:
    """"faster" / "slower" once the interval excludes 1, "same" once it lies within 1 -+ EQUIVALENT,
    "" while neither (or too few pairs)."""
    if len(ta) < MIN_PAIRS_TO_CALL:
        return ""
    _, lo, hi = interval(ta, tb)
    if lo > 1:
        return "faster"
    if hi < 1:
        return "slower"
    if lo >= 1 - EQUIVALENT and hi <= 1 + EQUIVALENT:
        return "same"
    return ""


def timed_pairs(a: Live, b: Live) -> tuple[list[float], list[float]]:
    """Alternating compute seconds of A and B until decided() or the budget (MAX_PAIRS pairs,
    compare_seconds() of compute) is spent. The Compare run is the first pair; then the order
    alternates (B first, then A first), so neither side always runs on a warmer machine."""
    ta, tb = [a.run.compute_seconds], [b.run.compute_seconds]
    budget = compare_seconds()
    while len(ta) < MAX_PAIRS and not decided(ta, tb):
        spent = sum(ta) + sum(tb)
        if spent + ta[-1] + tb[-1] > budget:  # the next pair would pass the budget
            break
        if len(ta) % 2:
            tb.append(timed_rerun(b, b.run.spec.name))
            ta.append(timed_rerun(a, a.run.spec.name))
        else:
            ta.append(timed_rerun(a, a.run.spec.name))
            tb.append(timed_rerun(b, b.run.spec.name))
    return ta, tb


def verdict_text(name_a: str, name_b: str, ta: list[float], tb: list[float]) -> str:
    """The verdict in the page's one unit (a speed ratio, app.timing.speedup.speed_words): "A is 1.40x
    faster (1.20-1.60, 12 pairs)", "no difference within +-10% (24 pairs)", or, the budget spent
    first, neither said, with the interval."""
    from statistics import median

    ratio, lo, hi = interval(ta, tb)
    n = len(ta)
    pairs = f"{n} pair" + ("s" if n != 1 else "")
    call = decided(ta, tb)
    a, b = f"A ({name_a})", f"B ({name_b})"
    if call in ("faster", "slower"):
        words = speed_words(ratio, lo, hi)
        head = f"{a} is {words[:-1]}, {pairs}) than {b}" if words.endswith(")") else f"{a} is {words} than {b}"
    elif call == "same":
        head = (f"no difference within ±{EQUIVALENT:.0%} ({pairs}): {a} runs at {lo:.2f}-{hi:.2f}x the speed "
                f"of {b}")
    else:
        head = (f"no call within the budget ({pairs}, at most {MAX_PAIRS} pairs or {compare_seconds():g} s of "
                f"compute): {a} runs at {lo:.2f}-{hi:.2f}x the speed of {b}, so neither is shown faster, nor are "
                f"they shown within ±{EQUIVALENT:.0%} of each other")
    return (f"**Verdict:** {head}. Per run: A {fmt_seconds(median(ta))}, B {fmt_seconds(median(tb))}; "
            f"{LEVEL:.0%} interval of the speed ratio over alternating unstored reruns, measured now on this "
            f"server ({machine_here()}).")


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
