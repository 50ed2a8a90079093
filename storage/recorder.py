"""Recording a streamed run: the steps are kept in memory while the sampler streams and stored in
one transaction when the stream ends, however it ends, so no database session stays open across
a generator and a run is never half-written."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Protocol, Self

from engine.trace import Step
from storage.models import RUN_STATUSES
from storage.new_session import NewSession


class RunSink(Protocol):
    """Where a recorder stores its run: storage.repository.Store (a protocol, so the recorder does
    not import the store that builds it)."""

    def record_run(self, share_id: str, sampler: str, params: dict[str, Any], seed: int | None,
                   steps: list[Step], **fields: Any) -> int:
        """Store one run with its steps in one transaction; its id."""
        ...

    def record_runs(self, share_id: str, runs: list[dict[str, Any]], session: NewSession | None = None) -> list[int]:
        """Store several runs (record_run's arguments each) and their session in one transaction; their ids."""
        ...


class RunRecorder:
    """Collects a streamed trace in memory and stores it once, however the stream ends.

    Usage::

        with store.recorder(share_id, "assd", {"k": 5}, seed) as rec:
            for step in rec.wrap(sampler_steps):   # yields the steps through
                show(step)
            rec.finish(completed_text=text, masked_tokens=n, logprob=lp)
        rec.run_id  # the stored run

    Exit after finish(): status 'ok'. Exit without finish() (the caller stopped early), or by
    KeyboardInterrupt / GeneratorExit: 'cancelled'. Exit by an exception with a `run_status`
    attribute (engine.budget.BudgetExceededError: 'stopped'): that status and its message. Exit
    by any other exception: 'failed' with the error message; the exception propagates. In every
    case the steps seen so far are stored in one transaction, so a run is never half-written;
    unless discard() was called (a job cancelled before it showed anything): then nothing is.
    """

    def __init__(
        self,
        *,
        store: RunSink,
        share_id: str,
        sampler: str,
        params: dict[str, Any],
        seed: int | None,
        session: NewSession | None = None,
    ) -> None:
        self.store, self.share_id, self.sampler, self.params, self.seed = (
            store,
            share_id,
            sampler,
            params,
            seed,
        )
        self.session = session
        self.group: RunGroup | None = None  # set by RunGroup.recorder: stored with its group, not alone
        self.discarded = False
        self.steps: list[Step] = []
        self.run_id: int | None = None
        self._result: dict[str, Any] | None = None
        self._t0 = 0.0
        #: seconds inside the sampler, set by the caller that streams it (stored beside the wall time,
        #: however the run ends; None: not known)
        self.compute_seconds: float | None = None

    def __enter__(self) -> Self:
        self._t0 = time.perf_counter()
        return self

    def add(self, step: Step) -> None:
        """Keep one step (for callers that do not stream through wrap())."""
        self.steps.append(step)

    def wrap(self, steps: Iterable[Step]) -> Iterator[Step]:
        """Yield each step through, keeping it."""
        for st in steps:
            self.steps.append(st)
            yield st

    def discard(self) -> None:
        """Store nothing on exit (the run never reached anyone)."""
        self.discarded = True

    def finish(
        self,
        *,
        completed_text: str = "",
        masked_tokens: int | None = None,
        logprob: float | None = None,
        wall_seconds: float | None = None,
    ) -> None:
        """Mark the run complete with its result fields (stored on exit)."""
        self._result = {
            "completed_text": completed_text,
            "masked_tokens": masked_tokens,
            "logprob": logprob,
            "wall_seconds": wall_seconds,
        }

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        res = dict(self._result or {})
        if res.get("wall_seconds") is None:
            res["wall_seconds"] = time.perf_counter() - self._t0
        if self.compute_seconds is not None:
            res["compute_seconds"] = self.compute_seconds
        if exc is None:
            status, error = ("ok" if self._result is not None else "cancelled"), None
        elif isinstance(exc, KeyboardInterrupt | GeneratorExit):
            status, error = "cancelled", type(exc).__name__
        elif getattr(exc, "run_status", None) in RUN_STATUSES:
            status, error = exc.run_status, str(exc)
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        if self.discarded:
            return
        if self.group is not None:
            self.group.ended(self, dict(sampler=self.sampler, params=self.params, seed=self.seed, trace=self.steps,
                                        status=status, error=error, **res))
            return
        self.run_id = self.store.record_run(
            self.share_id,
            self.sampler,
            self.params,
            self.seed,
            self.steps,
            status=status,
            error=error,
            session=self.session,
            **res,
        )


class RunGroup:
    """Runs that are stored together or not at all: a comparison's two sides. Each side records
    through its own recorder (group.recorder(...)); when a side's stream ends, however it ends, its
    record is kept here; commit() stores the session and every side in one transaction, once all
    have ended. A process killed before then leaves nothing, so a share link never opens half a
    comparison (a failed or stopped side is stored with its status). A side that stored nothing
    (refused at admission, cancelled before it computed) makes the whole group store nothing."""

    def __init__(self, *, store: RunSink, share_id: str, sides: int, session: NewSession | None = None) -> None:
        self.store, self.share_id, self.sides, self.session = store, share_id, sides, session
        self._side: dict[RunRecorder, int] = {}
        self._ended: dict[int, tuple[RunRecorder, dict[str, Any]]] = {}
        self.committed = False

    def recorder(self, side: int, sampler: str, params: dict[str, Any], seed: int | None) -> RunRecorder:
        """A recorder for side `side` (0 .. sides - 1), stored when the group commits."""
        rec = RunRecorder(store=self.store, share_id=self.share_id, sampler=sampler, params=params, seed=seed)
        rec.group = self
        self._side[rec] = side
        return rec

    def ended(self, rec: RunRecorder, record: dict[str, Any]) -> None:
        """A side's stream ended: keep its record (RunRecorder.__exit__ calls this)."""
        self._ended[self._side[rec]] = (rec, record)

    def complete(self) -> bool:
        """Whether every side has ended with a record."""
        return sorted(self._ended) == list(range(self.sides))

    def commit(self) -> list[int] | None:
        """Store the session and every side in one transaction, in side order (their ids, also set
        on each recorder's run_id); None, storing nothing, unless every side ended with a record."""
        if self.committed or not self.complete():
            return None
        ended = [self._ended[i] for i in range(self.sides)]
        ids = self.store.record_runs(self.share_id, [r for _, r in ended], session=self.session)
        for (rec, _), run_id in zip(ended, ids):
            rec.run_id = run_id
        self.committed = True
        return ids
