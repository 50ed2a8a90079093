"""Per-run aggregates derived from a trace and stored beside it (rank_stats, round_stats), so the
statistics are GROUP BYs over a few rows per run instead of passes over every step."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from engine.trace import Step, StepKind, acceptance_by_position

_DECIDING = {
    StepKind.ACCEPT,
    StepKind.RESAMPLE,
    StepKind.BONUS,
    StepKind.SAMPLE,
    StepKind.REVEAL,
}


def rank_counts(trace: Sequence[Step]) -> dict[int, list[int]]:
    """rank within the round -> [accepted, rejected] of the drafts that went through the
    speculative test: engine.trace.acceptance_by_position, the one definition the app and the
    report share (untested exact rows are not counted as accepted)."""
    return acceptance_by_position(list(trace))


def round_counts(trace: Sequence[Step]) -> dict[int, tuple[int, float]]:
    """round -> (tokens decided in it, calls spent in it).

    Calls of a round = the calls counter at its last step minus the counter at the previous
    round's last step (steps carry the running total).
    """
    tokens: dict[int, int] = defaultdict(int)
    last_calls: dict[int, float] = {}
    for s in trace:
        tokens[s.round] += len(s.positions) if s.kind in _DECIDING else 0
        last_calls[s.round] = s.calls
    out: dict[int, tuple[int, float]] = {}
    prev = 0.0
    for r in sorted(last_calls):
        out[r] = (tokens[r], last_calls[r] - prev)
        prev = last_calls[r]
    return out
