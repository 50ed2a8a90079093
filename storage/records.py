"""What the store hands back: plain dataclasses, so no ORM object outlives its short transaction
and callers never touch SQLAlchemy (storage.repository fills them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.trace import Step


class StorageInputError(ValueError):
    """Input the store refuses (too large, wrong type, not JSON); the message says what to fix."""


@dataclass(kw_only=True)
class RunRecord:
    """A stored run with its trace (steps in order, as engine Step objects)."""

    id: int
    share_id: str
    sampler: str
    params: dict[str, Any]
    seed: int | None
    status: str
    error: str | None
    completed_text: str
    calls: float
    rounds: int
    masked_tokens: int
    wall_seconds: float
    #: seconds inside the sampler (None for a run stored before they were kept)
    compute_seconds: float | None = None
    accepted: int
    rejected: int
    resampled: int
    logprob: float | None
    created_at: datetime
    steps: list[Step] = field(default_factory=list)


@dataclass(kw_only=True)
class SessionRecord:
    """A stored input with all its runs."""

    share_id: str
    domain: str
    model: str
    text: str
    spans: Any
    created_at: datetime
    runs: list[RunRecord] = field(default_factory=list)


@dataclass(kw_only=True)
class SessionSummary:
    """A row of the session list: enough to show and link, without the runs."""

    share_id: str
    domain: str
    model: str
    created_at: datetime
    text_preview: str
    run_count: int
    #: the samplers of its runs, oldest run first (a compare session has two)
    samplers: list[str] = field(default_factory=list)


@dataclass
class RankRate:
    """Acceptance at one rank within a round (rank 0 = first draft of the round)."""

    rank: int
    accepted: int
    rejected: int

    @property
    def rate(self) -> float | None:
        """Share of the tested drafts at this rank that were accepted (None when none were tested)."""
        n = self.accepted + self.rejected
        return self.accepted / n if n else None


@dataclass(kw_only=True)
class GroupStats:
    """Statistics of the 'ok' runs of one model x sampler x parameters group."""

    model: str
    sampler: str
    params: dict[str, Any]
    runs: int
    masked_tokens: int
    calls: float
    rounds: int
    acceptance_by_rank: list[RankRate]
    #: one value per run: masked tokens / calls
    tokens_per_call: list[float]
    #: tokens decided in a round -> number of rounds that decided that many
    tokens_per_round: dict[int, int]
    #: one (masked tokens, calls) pair per run, in run order
    calls_vs_masked: list[tuple[int, float]]

    @property
    def mean_tokens_per_call(self) -> float | None:
        """Pooled: all masked tokens over all calls (not the mean of per-run ratios)."""
        return self.masked_tokens / self.calls if self.calls else None

    @property
    def mean_tokens_per_round(self) -> float | None:
        """Mean tokens decided per round over every round of the group (None without rounds)."""
        n = sum(self.tokens_per_round.values())
        return sum(k * v for k, v in self.tokens_per_round.items()) / n if n else None
