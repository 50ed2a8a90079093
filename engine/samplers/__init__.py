"""The sampler catalogue: each name maps to a generator of Steps and the knobs it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..trace import Step
from .assd import assd, assd_drafted, assd_pipelined
from .drafters import NgramDrafter
from .sequential import sequential


@dataclass(frozen=True)
class SamplerSpec:
    name: str
    family: str  # "asarm": drives an AS-ARM oracle; "hybrid": drives a hybrid model
    cache: bool  # KV cache on by default (AS-ARM family)
    params: tuple[str, ...]
    help: str
    run: Callable[..., Iterator[Step]]


def _ngram(ctx) -> Iterator[Step]:
    cfg = ctx.lm.codec
    drafter = NgramDrafter(cfg.vocab_size, cfg.special_ids)
    return assd_drafted(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, ctx.temperature, ctx.k, drafter, ctx.extra_calls)


SAMPLERS: dict[str, SamplerSpec] = {
    s.name: s
    for s in [
        SamplerSpec("sequential", "asarm", False, ("temperature",),
                    "One network call per masked token, left to right: the exact reference.",
                    lambda c: sequential(c.oracle, c.mi, c.rec, c.gen, c.temperature)),
        SamplerSpec("assd", "asarm", False, ("k", "temperature"),
                    "Any-Subset Speculative Decoding (paper's Algorithm 1): draft k tokens in parallel, "
                    "verify them with one density pass. Exact.",
                    lambda c: assd(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k)),
        SamplerSpec("assd-bonus", "asarm", False, ("k", "temperature"),
                    "ASSD whose density pass also answers the next position: a free token when all drafts pass.",
                    lambda c: assd(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k, bonus=True)),
        SamplerSpec("assd-cache", "asarm", True, ("k", "temperature"),
                    "ASSD with a KV cache of decided tokens (rejected drafts rolled back): same samples, less compute.",
                    lambda c: assd(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k)),
        SamplerSpec("assd-pipelined", "asarm", True, ("k", "temperature"),
                    "One network call per round: each density pass also proposes the next round. Exact.",
                    lambda c: assd_pipelined(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k)),
        SamplerSpec("assd-ngram", "asarm", True, ("k", "temperature"),
                    "ASSD whose drafts come from bigrams of the context instead of the network. Exact.",
                    _ngram),
    ]
}
