"""What a sampler's catalogue entry holds (`SamplerSpec`). Each sampler module ends with its own
entries, beside the algorithm they run, so a sampler and the knobs it reads are written in one
file; engine/samplers/__init__.py only gathers them into SAMPLERS, in the page's order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..trace import Step
from .drafting import SecondModel


@dataclass(frozen=True)
class SamplerSpec:
    """One entry of the sampler catalogue: which model kind it drives (the `kind` of
    engine.loading.loaded_model.LoadedModel), whether it caches, which knobs it reads, its help text, how to
    run it, and the second model it drafts with (None: it drafts from the run's model or not at all)."""

    name: str
    kind: str  # the model kind it drives: "asarm" (an AS-ARM oracle) or "hybrid"
    cache: bool  # KV cache on by default (AS-ARM samplers)
    params: tuple[str, ...]  # the knobs it reads: names of engine.params.KNOBS
    help: str
    run: Callable[..., Iterator[Step]]  # run(ctx): the run's context (engine.api.RunContext) -> Steps
    default_steps: int = 32  # T when the caller gives none
    second: SecondModel | None = None  # the drafting network it also loads, and whether one fits
    # why its calls can exceed the tokens it fills, said next to its help on the page; empty: the entry
    # promises calls <= masked tokens (every round: <= 1 call per decided token), which the contract test holds
    calls_note: str = ""

    @property
    def calls_bounded(self) -> bool:
        """Whether it promises calls <= masked tokens: it does unless its entry says why not."""
        return not self.calls_note
