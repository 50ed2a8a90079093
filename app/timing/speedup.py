"""The "vs cached sequential" line under a finished AS-ARM run: the same input, model, seed and
temperature timed again with cached sequential decoding and the run's sampler alternating
(unstored, each on a compute slot), and the median of the pairs' wall-time ratios. The page's
chained `speedup` event asks for it after the run (remember_for_speedup / speedup_for)."""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict

from app.run.streaming import Live
from app.serving import cancels
from app.serving.admission import admission, small_run_tokens
from app.serving.slots import Cancelled, Turns, slots
from app.timing.machine_speed import describe_machine
from app.timing.units import speed_words
from engine.api import InfillRun
from engine.budget import Budget
from engine.errors import InfillError
from engine.params import KNOBS

log = logging.getLogger("app")

BASELINE_SAMPLER = "sequential-cache"  # the strongest exact baseline (docs/DESIGN.md §5)


def speedup_applies(live: Live) -> bool:
    """A finished AS-ARM run of a sampler other than the baseline, with the line switched on."""
    run = live.run
    return (live.result is not None and os.environ.get("INFILL_SPEEDUP", "1") != "0"
            and run.spec.kind != "hybrid" and run.lm.kind == "asarm" and run.spec.name != BASELINE_SAMPLER)


_SPEEDUP_PENDING: OrderedDict[str, Live] = OrderedDict()  # share id -> finished run, newest last
_SPEEDUP_KEEP = 64
_speedup_lock = threading.Lock()


def remember_for_speedup(live: Live) -> None:
    """Keep a finished run until the page's chained `speedup` event asks for it (bounded: the
    oldest are dropped, so an unasked run never piles up)."""
    if not speedup_applies(live):
        return
    with _speedup_lock:
        _SPEEDUP_PENDING[live.share_id] = live
        while len(_SPEEDUP_PENDING) > _SPEEDUP_KEEP:
            _SPEEDUP_PENDING.popitem(last=False)


def speedup_for(share_id: str) -> tuple[Live | None, str]:
    """(the run, its speed-up line) for a run remembered by remember_for_speedup; each is timed once."""
    with _speedup_lock:
        live = _SPEEDUP_PENDING.pop(share_id, None)
    return (live, speedup_line(live)) if live is not None else (None, "")


#: below this much work (masked tokens, or compute for one cached sequential run) timing noise
#: swamps any ratio: five identical one-token runs read 0.30x to 0.99x
MIN_TIMED_TOKENS = 8
MIN_TIMED_SECONDS = 0.05


def speedup_seconds() -> float:
    """Compute the speed-up line may spend on its repetitions (INFILL_SPEEDUP_SECONDS, default 6)."""
    try:
        return max(0.0, float(os.environ.get("INFILL_SPEEDUP_SECONDS", "6")))
    except ValueError:
        return 6.0


def _rerun(live: Live, sampler: str) -> InfillRun:
    """The finished run again (same masked input, model, seed and knobs), or with another sampler."""
    run = live.run
    same = sampler == run.spec.name
    knobs = dict(run.knobs)  # the values the run was settled with (engine.params.settle)
    if not same:  # another sampler: its own draft length and step count
        knobs.update(k=KNOBS["k"].default, steps=KNOBS["steps"].default)
    # the models the run holds, not their names: no second trip through the registry
    return InfillRun(masked_input=run.mi, model=run.lm, sampler=sampler, seed=run.seed, **knobs,
                     draft_model=run.draft_lm if same and run.draft_lm else None,
                     allow_paths=False, budget=Budget.from_env())


def timed_rerun(live: Live, sampler: str) -> float:
    """Compute seconds of one unstored rerun on a compute slot (slot waits excluded); the Compare
    verdict (app.timing.compare_verdict) times its pairs with it too."""
    r = _rerun(live, sampler)
    turns = Turns(slots(), lambda: cancels.cancelled_since(live.owner, live.created))
    r.pause = turns.preempt
    for _ in turns.iterate(r.stream()):
        pass
    return r.compute_seconds


def speed_ratio(base: list[float], run: list[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of the per-pair ratios base_i / run_i (above 1: the run is faster)."""
    import statistics

    ratios = sorted(b / r for b, r in zip(base, run) if r > 0)
    return statistics.median(ratios), ratios[0], ratios[-1]


def speedup_line(live: Live) -> str:
    """After a finished AS-ARM run: the same input, model, seed and temperature timed again, cached
    sequential decoding and this sampler alternating (unstored, each on a compute slot like any
    run; the finished run's own compute time is the first sample of its sampler), and the median
    of the pairs' wall-time ratios with their range. The first pair decides how many pairs fit in
    INFILL_SPEEDUP_SECONDS (1 to 7: a long run gets one, as before); below MIN_TIMED_TOKENS masked
    tokens or MIN_TIMED_SECONDS of cached sequential work the line says "too short to time" instead
    of a ratio. "" where it does not apply or is switched off (INFILL_SPEEDUP=0). The timing runs are
    admitted like any run (a long input needs a long-run seat), so they cannot take the seats kept
    for small runs, but not counted as the visitor's own; refused, there is no line."""
    if not speedup_applies(live):
        return ""
    name = live.run.spec.name
    n = len(live.run.mi.masked)
    if n < MIN_TIMED_TOKENS:
        return (f"**vs cached sequential** too short to time: {n} masked token" + ("s" if n != 1 else "")
                + f"; below {MIN_TIMED_TOKENS} timing noise decides the ratio. Mask more tokens to compare speeds.")
    cancelled = lambda: cancels.cancelled_since(live.owner, live.created)  # noqa: E731
    try:
        # the server's own measurement: it takes a long-run seat when long, but does not count
        # against the visitor's runs in progress (a Compare started right after Run is two runs)
        with admission().enter(None, n > small_run_tokens(), cancelled):
            base, run = _timed_pairs(live, name)
    except (Cancelled, InfillError):  # cancelled, refused (admission.Busy) or over its budget: no line
        return ""
    except Exception:  # noqa: BLE001 - the extra timing must never spoil a finished, stored run
        log.exception("timing cached sequential decoding failed")
        return ""
    if base is None:
        return (f"**vs cached sequential** too short to time: cached sequential decoding of this input took "
                f"{fmt_seconds(run[0])}, below {fmt_seconds(MIN_TIMED_SECONDS)} timing noise decides the "
                "ratio. Mask more tokens to compare speeds.")
    return _ratio_line(name, base, run)


def _timed_pairs(live: Live, name: str) -> tuple[list[float] | None, list[float]]:
    """Alternating compute times (cached sequential, this sampler); the finished run's own time is
    the sampler's first sample. (None, [base]) when cached sequential is too short to time."""
    base, run = [timed_rerun(live, BASELINE_SAMPLER)], [live.run.compute_seconds]
    if base[0] < MIN_TIMED_SECONDS:
        return None, base
    pairs = int(max(1, min(7, speedup_seconds() // max(base[0] + run[0], 1e-9))))
    for _ in range(pairs - 1):
        run.append(timed_rerun(live, name))
        base.append(timed_rerun(live, BASELINE_SAMPLER))
    return base, run


def _ratio_line(name: str, base: list[float], run: list[float]) -> str:
    """The speed-up line from the timed pairs: median ratio and its range."""
    import statistics

    if run[0] <= 0:
        return ""
    med, lo, hi = speed_ratio(base, run)
    n = len(run)
    said = speed_words(med, lo, hi) if n > 1 else speed_words(med)
    spread = (f"median of {n} alternating pairs, range in brackets" if n > 1 else
              "one pair: a long run, more pairs would cost more than INFILL_SPEEDUP_SECONDS"
              f" = {speedup_seconds():g} s of compute")
    return (f"**vs cached sequential** {name} is {said} than cached sequential decoding on this input ({spread}; "
            f"per run {fmt_seconds(statistics.median(run))} against {fmt_seconds(statistics.median(base))}), "
            f"timed just now on this server ({machine_here()})")


def machine_here() -> str:
    """This server's machine in a few words (app.timing.machine_speed.describe_machine)."""
    return describe_machine()


def fmt_seconds(seconds: float) -> str:
    """Seconds as a person reads them: milliseconds below one second, so two short runs differ."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
