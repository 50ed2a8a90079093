"""The sampler catalogue: each name maps to a generator of Steps, the model kind it drives, the
knobs it reads (each knob is described once, in engine.params.KNOBS; `readers` turns the
catalogue around) and, for samplers that draft with a second network, that network's kind and
fit check (`SecondModel`, engine/samplers/drafting.py).

DRAFTER_KIND: samplers that also load a second network, and the model kind it must be (read from
the catalogue, kept for callers that only need the kind)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..trace import Step
from .assd import assd, assd_pipelined
from .diffusion_drafter import check_pair as diffusion_fits
from .drafters import drafted
from .drafting import SecondModel
from .hybrid_passes import CallCounter, require_hybrid
from .mdm import mdm
from .ptp import check_pair as ptp_fits
from .ptp import run_ptp
from .selfspec import self_spec
from .sequential import sequential


@dataclass(frozen=True)
class SamplerSpec:
    """One entry of the sampler catalogue: which model kind it drives (the `kind` of
    engine.model_loading.LoadedModel), whether it caches, which knobs it reads, its help text, how to
    run it, and the second model it drafts with (None: it drafts from the run's model or not at all)."""

    name: str
    kind: str  # the model kind it drives: "asarm" (an AS-ARM oracle) or "hybrid"
    cache: bool  # KV cache on by default (AS-ARM samplers)
    params: tuple[str, ...]  # the knobs it reads: names of engine.params.KNOBS
    help: str
    run: Callable[..., Iterator[Step]]
    default_steps: int = 32  # T when the caller gives none
    second: SecondModel | None = None  # the drafting network it also loads, and whether one fits
    calls_bounded: bool = True  # promises calls <= masked tokens (every round: <= 1 call per decided token)


def _hybrid_counter(ctx) -> CallCounter:
    require_hybrid(ctx.lm)
    ctx.counter = CallCounter()
    return ctx.counter


def _mdm(ctx) -> Iterator[Step]:
    counter = _hybrid_counter(ctx)
    return mdm(ctx.lm.model, ctx.mi, ctx.rec, ctx.gen, ctx.temperature, ctx.steps, counter)


def _self_spec(ctx) -> Iterator[Step]:
    counter = _hybrid_counter(ctx)
    return self_spec(ctx.lm.model, ctx.mi, ctx.rec, ctx.gen, ctx.temperature, ctx.dtau, ctx.window,
                     ctx.inner, counter)


@dataclass(frozen=True)
class DefaultChoice:
    """A domain's default sampler and the measurement that chose it: the fastest exact speculative
    sampler in the last benchmark of that domain, with its wall-clock ratio against cached
    sequential decoding (above 1: faster), so the page and the CLI can say what it costs."""

    sampler: str
    ratio: float  # wall-clock speed against cached sequential decoding, same inputs, same run
    ratio_range: tuple[float, float]  # lowest and highest per-input ratio of that run
    source: str


#: The default sampler of the app and the CLI, per domain (issue 24 §3): the fastest *speculative*
#: exact sampler measured, so a first run shows drafts, accepts and rejects. Measured in one quiet
#: run per domain, 2026-11-25 (`python -m engine bench assd --samples 4 --k 5 --threads 1`, 4 test
#: windows of 256 tokens 95% masked, 2-core CPU; README "Speed against cached sequential decoding",
#: raw JSON docs/results/bench_assd_*_k5_t1_2026-11-25.json): on text and code speculation is still
#: *slower* than cached sequential decoding on that CPU (the page and the README say so); on
#: protein it is about 2.5 times as fast.
DEFAULT_SAMPLERS: dict[str, DefaultChoice] = {
    "text": DefaultChoice("assd-cache", 0.96, (0.85, 1.05), "bench assd, 2026-11-25"),
    "code": DefaultChoice("assd-cache", 0.89, (0.86, 0.98), "bench assd, 2026-11-25"),
    "protein": DefaultChoice("assd-pipelined", 2.48, (2.41, 2.56), "bench assd, 2026-11-25"),
}

#: The API's default when it is given neither a sampler nor a domain (text's default).
DEFAULT_SAMPLER = DEFAULT_SAMPLERS["text"].sampler
#: InfillRun's sampler when none is named: the default of the run's domain (the model's when no
#: domain is given)
DOMAIN_DEFAULT = "default"


def default_sampler(domain: str | None) -> str:
    """The default sampler for a domain (text's for an unknown one)."""
    return DEFAULT_SAMPLERS.get(domain or "text", DEFAULT_SAMPLERS["text"]).sampler


def cost_sentence(domain: str) -> str:
    """One sentence on what the domain's default costs (or saves) against cached sequential decoding."""
    c = DEFAULT_SAMPLERS.get(domain, DEFAULT_SAMPLERS["text"])
    if c.ratio < 1:
        return (f"Default for {domain}: {c.sampler}, the fastest exact speculative sampler measured; on the "
                f"2-core CPU it runs at {c.ratio:.2f}x the speed of cached sequential decoding "
                f"({1 / c.ratio:.2f}x its time; {c.source}), so it shows speculation at work but does not "
                "save time there.")
    return (f"Default for {domain}: {c.sampler}, the fastest exact speculative sampler measured: "
            f"{c.ratio:.2f}x the speed of cached sequential decoding on the 2-core CPU ({c.source}).")


SAMPLERS: dict[str, SamplerSpec] = {
    s.name: s
    for s in [
        SamplerSpec("sequential", "asarm", False, ("temperature",),
                    "One network call per masked token, left to right: the exact reference.",
                    lambda c: sequential(c.oracle, c.mi, c.rec, c.gen, c.temperature)),
        SamplerSpec("sequential-cache", "asarm", True, ("temperature",),
                    "Sequential decoding with a KV cache of decided tokens: same samples as sequential, "
                    "one small call per token. The strongest non-speculative baseline.",
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
                    drafted("ngram")),
        SamplerSpec("mdm", "hybrid", False, ("steps", "temperature"),
                    "Masked diffusion baseline: T steps on a cosine grid, each samples every masked token "
                    "and reveals a schedule-sized random subset. Calls: raw (best case in the notes).",
                    _mdm, calls_bounded=False),
        SamplerSpec("self-spec", "hybrid", False, ("dtau", "window", "inner", "temperature"),
                    "Self-speculative masked diffusion (paper's Algorithm 3): the non-causal head drafts a "
                    "window, the causal head verifies it; fractional calls per pass.",
                    _self_spec, calls_bounded=False),
        SamplerSpec("assd-diffusion", "asarm", True, ("k", "steps", "temperature"),
                    "ASSD whose drafts come from T masked-diffusion steps of a hybrid on the same tokenizer; "
                    "the AS-ARM verifies them. Exact. A few steps per round (default 4) keep drafting cheap.",
                    drafted("diffusion"), default_steps=4, second=SecondModel("hybrid", diffusion_fits),
                    calls_bounded=False),
        SamplerSpec("assd-ptp", "asarm", True, ("k", "temperature"),
                    "Parallel Token Prediction drafts: a small head distilled from the AS-ARM turns one call's "
                    "parallel rows into k dependent drafts in one pass (draft j sees the uniforms, and so the "
                    "drafts, before it); the next call verifies them and proposes the next round. Exact. Needs "
                    "a PTP drafter (text-ptp1, code-ptp).",
                    run_ptp, second=SecondModel("ptp", ptp_fits, "python -m engine train --kind ptp --teacher {model} ...")),
    ]
}


def readers(knob: str) -> list[str]:
    """The samplers that read a knob (from their catalogue entries), in catalogue order."""
    return [s.name for s in SAMPLERS.values() if knob in s.params]


#: Samplers that also load a second network -> the model kind it must be (from the catalogue above)
DRAFTER_KIND: dict[str, str] = {s.name: s.second.kind for s in SAMPLERS.values() if s.second is not None}
