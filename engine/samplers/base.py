"""What every sampler shares: the step recorder and the oracle protocol it drives."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch

from ..trace import Step, StepKind


class DensityOracle(Protocol):
    """An any-subset model seen as an oracle (see engine/samplers/oracle.py)."""

    calls: int

    def call(self, drafts: list[tuple[int, int]], queries: list[tuple[int, int]],
             states: bool = False, logit_rows: int | None = None) -> torch.Tensor:
        """Logits [len(queries), V]: drafts (position, token) are placed after the decided tokens in
        that order; query (position, j) sees the decided tokens and the first j drafts. With
        `states=True`, (logits, states [len(queries), d]): the model's normed query states, what a
        drafter reading the oracle's rows (the PTP head) needs; an oracle without them raises
        IncompatibleModelsError. With `logit_rows` (and states), logits of the first logit_rows
        queries at least (an oracle whose extra rows cost nothing gives every row's); `head_logits(states,
        positions)` gives the others' when they are read."""
        ...

    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Logits, as `call` gives them, of query rows a call returned as states only (`logit_rows`)."""
        ...

    def commit(self, pos: int, tok: int) -> None:
        """Decide the token at a position (later calls see it)."""
        ...


class Recorder:
    """Stamps steps with token text, calls so far and elapsed seconds."""

    def __init__(self, token_text: Callable[[int], str], calls: Callable[[], float]):
        self.token_text = token_text
        self.calls = calls
        self.t0 = time.perf_counter()

    def __call__(
        self,
        kind: StepKind,
        rnd: int,
        positions: list[int] | None = None,
        tokens: list[int] | None = None,
        p: list[float | None] | None = None,
        q: list[float | None] | None = None,
        note: str = "",
        tested: bool = True,
    ) -> Step:
        positions = list(positions or [])
        tokens = list(tokens or [])
        return Step(
            kind=kind,
            round=rnd,
            positions=positions,
            tokens=tokens,
            texts=[self.token_text(t) for t in tokens],
            p=list(p) if p is not None else [None] * len(tokens),
            q=list(q) if q is not None else [None] * len(tokens),
            calls=float(self.calls()),
            elapsed=time.perf_counter() - self.t0,
            note=note,
            tested=tested,
        )
