"""The sampler catalogue: each name maps to a generator of Steps, the model kind it drives, the
knobs it reads (each knob is described once, in engine.params.KNOBS; `readers` turns the
catalogue around) and, for samplers that draft with a second network, that network's kind and
fit check (`SecondModel`, engine/samplers/drafter_contract.py). Each entry (engine/samplers/spec.py
`SamplerSpec`) is written at the end of its sampler's module; this module gathers them and reads
the domains' default samplers from the domain registry.

DRAFTER_KIND: samplers that also load a second network, and the model kind it must be (read from
the catalogue, kept for callers that only need the kind)."""

from __future__ import annotations

from engine.inputs.domains import DOMAINS, DefaultChoice

from . import assd, assd_reuse, mdm, ptp, selfspec, sequential
from .drafters import DIFFUSION_SPEC, NGRAM_SPEC
from .spec import SamplerSpec

#: The default sampler of the app and the CLI, per domain: each domain's measured choice, read from
#: the domain registry (engine/inputs/domains.py, `Domain.default`, where the measurement is cited)
DEFAULT_SAMPLERS: dict[str, DefaultChoice] = {d.name: d.default for d in DOMAINS.values() if d.default}

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
    s.name: s for s in [*sequential.SPECS, *assd.SPECS, assd_reuse.SPEC, NGRAM_SPEC, mdm.SPEC, selfspec.SPEC,
                        DIFFUSION_SPEC, ptp.SPEC]
}


def readers(knob: str) -> list[str]:
    """The samplers that read a knob (from their catalogue entries), in catalogue order."""
    return [s.name for s in SAMPLERS.values() if knob in s.reads]


#: Samplers that also load a second network -> the model kind it must be (from the catalogue above)
DRAFTER_KIND: dict[str, str] = {s.name: s.second.kind for s in SAMPLERS.values() if s.second is not None}
