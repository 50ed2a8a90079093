"""The domains the page offers and the example inputs it starts with (the first example of each
domain is the page's default input), both from the domain registry (engine/inputs/domains.py). A leaf:
the editor, Statistics and the form checks read it."""

from __future__ import annotations

from engine.inputs.domains import DOMAINS as REGISTRY
from engine.inputs.domains import studio_domains
from engine.samplers import DEFAULT_SAMPLER as ENGINE_DEFAULT_SAMPLER

#: the domains the page offers, in the registry's order (engine/inputs/domains.py: studio domains)
DOMAINS = studio_domains()
#: the sampler the page starts with: the first domain's default (engine.samplers.DEFAULT_SAMPLERS:
#: the fastest exact speculative sampler measured for each domain; a domain switch picks its own)
DEFAULT_SAMPLER = ENGINE_DEFAULT_SAMPLER

#: each domain's example inputs (the registry's); the first is the page's default input
EXAMPLES: dict[str, list[str]] = {name: list(REGISTRY[name].examples) for name in DOMAINS}
