"""The drafter contract: what a proposal source for ASSD may do, and which second model it needs.

Why a contract: ASSD is exact for *any* proposal (the paper's Theorem 2) only under one condition,
that each draft's proposal row is fixed before the acceptance randomness of that row is drawn and
depends only on the context and on the drafts of earlier ranks (the verification walks left to
right). A drafter that broke this would still produce plausible text, so no output check would
notice; the rule is stated here, once, so a new drafter is written against it and the exactness
tests (tests/engine/samplers/test_rounds.py, tests/engine/samplers/test_selfspec.py,
tests/engine/samplers/test_sampler_contract.py) hold it to it.

Adding a drafter (docs/EXTENDING.md, "Add a drafter"): a class with `propose` (below), one row in engine/samplers/drafters.py's
DRAFTERS (how it is built from a RunContext), one catalogue entry beside it (a `SamplerSpec`,
engine/samplers/spec.py, with its `SecondModel` when it drafts with another network, gathered into
engine.samplers.SAMPLERS), and its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class Drafter(Protocol):
    """A proposal source for `engine.samplers.assd.assd_drafted`.

    When it is called: once per round, before the round's density pass, with the round's positions
    (the next k masked positions in decode order) and every token known so far (visible or decided).

    What it may read: `known` (the context), its own network and state, and `gen` for its own draws,
    taken in rank order (draft j's row from the context and drafts < j only). It never sees the
    acceptance randomness of the rows it proposes: the verifier draws that from `gen` *after*
    `propose` returns, so every proposal row is fixed first, which is all exactness needs.

    How many it drafts: drafts for a prefix of the positions, possibly none (the verifier's rows
    decide the rest of the round exactly). Whether it drafts position j may depend on what row j may
    read (the context, the drafts before j, its own randomness), never on draft j itself: stopping
    *because of* the token drawn would turn the proposal into p restricted to the kept tokens while
    the test still divides by p (tests/engine/samplers/test_rounds.py watches such a drafter fail).
    """

    name: str  # shown in the trace ("ngram drafts")
    passes: int  # forward passes of its network so far (0 for one without a network)

    def propose(
        self, known: list[int | None], positions: list[int], gen: torch.Generator, temperature: float = 1.0
    ) -> tuple[list[int], list[torch.Tensor], float]:
        """Drafts for `positions` (or a prefix of them), the proposal rows (probability vectors over the
        vocabulary) they were drawn from, and the calls spent, in the drafting network's own units (0
        without a network)."""
        ...


#: A pair check: (the run's model, the second model) -> None, or IncompatibleModelsError saying why not
PairCheck = Callable[[Any, Any], None]


@dataclass(frozen=True)
class SecondModel:
    """The second network a sampler drafts with: the model kind it must be (and the bundled
    `{domain}-{kind}` a run takes when none is named) and the check that a given one fits the
    run's model (same tokenizer, same width...). Samplers without one draft from the run's model."""

    kind: str
    check: PairCheck
    how: str = ""  # how to make one when the domain has none ("{model}": the run's model), for the refusal


__all__ = ["Drafter", "PairCheck", "SecondModel"]
