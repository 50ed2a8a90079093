"""The sampler catalogue: each name maps to a generator of Steps, the model kind it drives, the
knobs it reads (each knob is described once, in engine.params.KNOBS; `readers` turns the
catalogue around) and, for samplers that draft with a second network, that network's kind and
fit check (`SecondModel`, engine/samplers/drafting.py). Each entry (engine/samplers/spec.py
`SamplerSpec`) is written at the end of its sampler's module; this module gathers them and holds
the domains' default samplers.

DRAFTER_KIND: samplers that also load a second network, and the model kind it must be (read from
the catalogue, kept for callers that only need the kind)."""

from __future__ import annotations

from dataclasses import dataclass

from . import assd, mdm, ptp, selfspec, sequential
from .drafters import DIFFUSION_SPEC, NGRAM_SPEC
from .spec import SamplerSpec


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
#: windows of 256 tokens 95% masked, 2-core CPU; docs/RESULTS.md "Speed against cached sequential decoding",
#: raw JSON docs/results/bench_assd_*_k5_t1_2026-11-25.json): on text and code speculation is still
#: *slower* than cached sequential decoding on that CPU (the page and the docs say so); on
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


#: every sampler, in the page's order; each entry is written beside its algorithm (SPEC / SPECS at the
#: end of its module: the knobs it reads, its help, how it runs)
SAMPLERS: dict[str, SamplerSpec] = {
    s.name: s for s in [*sequential.SPECS, *assd.SPECS, NGRAM_SPEC, mdm.SPEC, selfspec.SPEC, DIFFUSION_SPEC, ptp.SPEC]
}


def readers(knob: str) -> list[str]:
    """The samplers that read a knob (from their catalogue entries), in catalogue order."""
    return [s.name for s in SAMPLERS.values() if knob in s.params]


#: Samplers that also load a second network -> the model kind it must be (from the catalogue above)
DRAFTER_KIND: dict[str, str] = {s.name: s.second.kind for s in SAMPLERS.values() if s.second is not None}
