"""What one report run measures: the samplers, the size of every section, the significance level,
and the progress line every part of the report writes to stderr."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

from engine.inputs.domains import studio_domains

from ..bench_samplers import BASELINES, MEASURED

DOMAINS = tuple(studio_domains())  # the report measures the studio's domains (engine/inputs/domains.py)
EXACT = MEASURED  # lab/bench_samplers.py: every exact AS-ARM sampler of the engine's catalogue
SPECULATIVE = [s for s in EXACT if s not in BASELINES]
ALPHA = 0.01  # significance level of the exactness checks
ERROR_MARK = "**error**"  # prefix of notes about a failed section (the test looks for it)


@dataclass(kw_only=True)
class Plan:
    """Sizes and settings of every section, fixed before anything runs (quick mode shrinks them)."""

    quick: bool
    samples: int
    length: int
    k: int
    seed: int
    scaling_lengths: tuple[int, ...]
    scaling_rates: tuple[float, ...]
    scaling_length: int
    scaling_samples: int
    ss_samples: int
    ss_length: int
    mdm_steps: list[int]
    self_spec: list[tuple[float, int]]
    scaling_mdm_steps: int
    scaling_window_growth: float  # self-spec's window growth per outer step in the scaling section
    humaneval_limit: int | None
    mask_rate_main: float = 0.95
    samplers: list[str] = field(default_factory=lambda: list(EXACT))


def make_plan(a: argparse.Namespace) -> Plan:
    """The plan the command line asks for: quick or full sizes, then the explicit overrides."""
    from ..bench_selfspec import MDM_STEPS, SELF_SPEC

    if a.quick:
        n = a.samples or 2
        plan = Plan(
            quick=True,
            samples=n,
            length=32,
            k=a.k,
            seed=a.seed,
            scaling_lengths=(16, 32, 64, 512),
            scaling_rates=(0.25, 0.5, 0.95),
            scaling_length=32,
            scaling_samples=2,
            ss_samples=2,
            ss_length=32,
            mdm_steps=[4, 8, 16],
            self_spec=[(0.2, 1), (0.1, 1), (0.1, 2)],
            scaling_mdm_steps=8,
            scaling_window_growth=0.1,
            humaneval_limit=3,
        )
    else:
        n = a.samples or 100
        plan = Plan(
            quick=False,
            samples=n,
            length=256,
            k=a.k,
            seed=a.seed,
            scaling_lengths=(64, 128, 256, 512),
            scaling_rates=(0.25, 0.5, 0.95),
            scaling_length=256,
            scaling_samples=max(2, n // 10),
            ss_samples=max(2, n // 4),
            ss_length=256,
            mdm_steps=list(MDM_STEPS),
            self_spec=list(SELF_SPEC),
            scaling_mdm_steps=32,
            scaling_window_growth=0.05,
            humaneval_limit=100,
        )
    if a.samples and not a.quick:
        plan.scaling_samples, plan.ss_samples = max(2, n // 10), max(2, n // 4)
    if a.samplers:
        chosen = [s.strip() for s in a.samplers.split(",") if s.strip()]
        plan.samplers = list(BASELINES) + [s for s in EXACT if s in chosen and s not in BASELINES]
    if getattr(a, "scaling_samples", None):
        plan.scaling_samples = a.scaling_samples
    if getattr(a, "ss_samples", None):
        plan.ss_samples = a.ss_samples
    if a.humaneval_limit is not None:
        plan.humaneval_limit = a.humaneval_limit or None  # 0: every task
    return plan


def log(msg: str) -> None:
    """A timestamped progress line on stderr (the report itself goes to a file); the main process's
    only when several share the work."""
    if os.environ.get("RANK", "0") not in ("", "0"):
        return
    print(f"[report {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
