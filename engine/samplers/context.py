"""What one sampler run works with besides its knobs: the models, the input, the random numbers,
the recorder, the AS-ARM oracle and the call counters (`RunContext`), and how the oracle is made.

The knobs are not attributes of the context: `RunContext.steps()` passes each knob the sampler's
entry reads as a keyword argument (engine/samplers/spec.py), so a reader looking for where a
sampler's `k` comes from finds it in the entry's signature, filled from the run's knob values."""

from __future__ import annotations

from collections.abc import Iterator

from engine.inputs.masking import MaskedInput
from engine.loading.loaded_model import LoadedModel
from engine.params import KnobValues
from engine.samplers.base import Recorder
from engine.samplers.oracle import make_oracle  # noqa: F401 - RunContext's oracle (tests patch it here)
from engine.samplers.spec import SamplerSpec
from engine.seeding import generator_for
from engine.trace import Step


class RunContext:
    """Everything one sampler run reads apart from its knobs; samplers take what they need from it.
    `knobs`: the run's knob values as the request settled them (engine.params.settle), passed on as
    they are: nothing here fills a default. `cache`: the AS-ARM's KV cache on or off (None: the entry's)."""

    def __init__(self, *, lm: LoadedModel, mi: MaskedInput, spec: SamplerSpec, knobs: KnobValues, seed: int,
                 draft_lm: LoadedModel | None = None, cache: bool | None = None):
        if not isinstance(knobs, KnobValues):
            raise TypeError("RunContext takes the settled knob values (engine.params.settle), not a dict")
        self.lm, self.mi, self.spec, self.draft_lm = lm, mi, spec, draft_lm
        self.gen = generator_for(seed)
        self.knobs = knobs
        self.extra_calls = [0.0]  # calls of a second network (drafters), fractional allowed
        self.drafter_passes = [0]  # forward passes of a drafting network (PTP head, diffusion drafter)
        self.drafter_seconds = [0.0]  # wall seconds spent drafting outside the AS-ARM (bench assd)
        self.oracle = make_oracle(lm, mi, spec.cache if cache is None else cache) if spec.kind == "asarm" else None
        self.counter = None  # hybrid samplers install their own call counter
        self.rec = Recorder(lm.codec.token_text, self.calls)

    def steps(self) -> Iterator[Step]:
        """The sampler's steps: its entry's run function with each knob it reads passed by name."""
        return self.spec.run(self, **{name: self.knobs[name] for name in self.spec.reads})

    def calls(self) -> float:
        """Network calls so far, in the run's units: the oracle's or the hybrid's counter plus a
        drafter's own calls."""
        base = self.oracle.calls if self.oracle is not None else (self.counter() if self.counter else 0.0)
        return base + self.extra_calls[0]
