"""What a sampler's catalogue entry holds (`SamplerSpec`). Each sampler module ends with its own
entries, beside the algorithm they run, so a sampler and the knobs it reads are written in one
file; engine/samplers/__init__.py only gathers them into SAMPLERS, in the page's order.

The knobs an entry reads are named once, as the keyword-only parameters of its `run` function,
each annotated with its table type (`def _run(ctx, *, k: int, temperature: float)`): `params` is
read from that signature, and the run passes each knob by name (engine.samplers.context.RunContext).
`knob_problems` says what is wrong with an entry's signature (the contract test holds every entry
to it), so an entry cannot read a knob the table lacks, or read it with another type."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..params import KNOBS
from ..trace import Step
from .drafter_contract import SecondModel


def knob_names(fn: Callable) -> tuple[str, ...]:
    """The knobs a run function (or a drafter builder) reads: its keyword-only parameters, in order."""
    return tuple(p.name for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY)


def knob_problems(fn: Callable) -> list[str]:
    """What breaks the entry rule in `fn`'s signature: one positional parameter (the run's context),
    then only knobs of engine.params.KNOBS, keyword-only, annotated with the table's type and
    without a default of their own (the table's default is the one default). Empty: it keeps it."""
    params = list(inspect.signature(fn).parameters.values())
    out = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != 1:
        out.append(f"takes {len(positional)} positional parameters; a run function takes the context only")
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            out.append(f"*{p.name}: every knob is named in the signature")
        if p.kind is not p.KEYWORD_ONLY:
            continue
        k = KNOBS.get(p.name)
        if k is None:
            out.append(f"{p.name} is not a knob of engine.params.KNOBS")
            continue
        if p.annotation not in (k.type, k.type.__name__):
            out.append(f"{p.name} is annotated {p.annotation!r}; its table type is {k.type.__name__}")
        if p.default is not p.empty:
            out.append(f"{p.name} has a default of its own ({p.default!r}); the table's is the default")
    return out


@dataclass(frozen=True, kw_only=True)
class SamplerSpec:
    """One entry of the sampler catalogue: which model kind it drives (the `kind` of
    engine.loading.loaded_model.LoadedModel), whether it caches, its help text, how to run it (the
    knobs it reads are that function's keyword arguments), and the second model it drafts with
    (None: it drafts from the run's model or not at all)."""

    name: str
    kind: str  # the model kind it drives: "asarm" (an AS-ARM oracle) or "hybrid"
    cache: bool  # KV cache on by default (AS-ARM samplers)
    help: str
    run: Callable[..., Iterator[Step]]  # run(ctx, *, knob: type, ...): the run's context and its knobs -> Steps
    default_steps: int = 32  # T when the caller gives none
    second: SecondModel | None = None  # the drafting network it also loads, and whether one fits
    # why its calls can exceed the tokens it fills, said next to its help on the page; empty: the entry
    # promises calls <= masked tokens (every round: <= 1 call per decided token), which the contract test holds
    calls_note: str = ""

    @property
    def reads(self) -> tuple[str, ...]:
        """The knobs it reads (names of engine.params.KNOBS): its run function's keyword arguments."""
        return knob_names(self.run)

    @property
    def calls_bounded(self) -> bool:
        """Whether it promises calls <= masked tokens: it does unless its entry says why not."""
        return not self.calls_note
