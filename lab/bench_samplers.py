"""The samplers the benchmarks and the report measure: one list, read from the engine's sampler
catalogue (engine.samplers.SAMPLERS), so a sampler added there is measured with no line here and
`bench assd`, the GPU campaign and the report cannot disagree on what they compare."""

from __future__ import annotations

from engine.samplers import SAMPLERS

#: the uncached reference and the strongest exact baseline, measured in every comparison
BASELINES = ("sequential", "sequential-cache")
#: every exact AS-ARM sampler, in catalogue order; assd-bonus (assd plus one density row a round)
#: stays on the page and out of the tables
MEASURED = [s.name for s in SAMPLERS.values() if s.kind == "asarm" and s.name != "assd-bonus"]
#: `bench assd`'s default: those the AS-ARM runs alone (no second network to load), the baseline its
#: ratios are against first
ASSD_BENCH = ["sequential-cache", *(n for n in MEASURED if SAMPLERS[n].second is None and n != "sequential-cache")]
