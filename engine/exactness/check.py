"""The exactness check: draw N fills of a short masked span from each of several samplers and set
their frequencies against the model's exact law, so a visitor sees "same distribution, fewer
calls" on their own sentence (issue 26).

Flow: text -> MaskedInput (at most MAX_MASKED tokens) -> N runs per sampler, each with its own
seed (InfillRun, the same code path as every other run) -> counts of fills (token ids, in lattice
order) -> the exact law on the cells the test uses -> per sampler: total-variation distance, a
chi-square goodness-of-fit p-value and one plain verdict.

This module runs a check (ExactnessCheck, run_check: inputs checked, model loaded, draws streamed,
counts tested); the pieces it runs have their own homes, each readable alone:
engine/exactness/law.py (the model's exact law: the AS-ARM's chain by prefix search, the hybrid's
self-speculative likelihood; the rest of the mass is "other"), engine/exactness/fit.py (the
chi-square test and its verdict), engine/exactness/result.py (the result and its stored JSON) and
engine/exactness/wrong_samplers.py (the deliberately broken `wrong-...` samplers, which exist only here so a
visitor sees what a failed check looks like; the catalogue never lists them).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from engine.api import InfillRun, parse_for
from engine.errors import BadParameterError, IncompatibleModelsError, InfillError, NoMaskError
from engine.exactness.fit import MIN_EXPECTED, goodness_of_fit, tv_noise
from engine.exactness.law import Fill, asarm_cells, asarm_prob, hybrid_prob
from engine.exactness.result import CheckResult, SamplerReport
from engine.exactness.wrong_samplers import check_samplers
from engine.loading.registry import default_model, load
from engine.params import KNOBS, read_knobs, recorded, seed_number, whole_number, with_knobs
from engine.samplers import SAMPLERS
from engine.seeding import SEED_MAX
from engine.trace import decided_tokens, trace_counts

MAX_MASKED = 3  # longest span whose fills the check enumerates
MAX_SAMPLES = 20_000  # per sampler, library and CLI (the app's budget is smaller: CheckBudget)
DEFAULT_SAMPLES = 400


def sample_seed(seed: int, sampler: str, i: int) -> int:
    """Draw i of `sampler`'s seed: independent streams per sampler and per draw (numpy's
    SeedSequence of the check's seed, the sampler's name and i)."""
    ss = np.random.SeedSequence(entropy=seed, spawn_key=(zlib.crc32(sampler.encode()), i))
    return int(ss.generate_state(1, dtype=np.uint64)[0]) & SEED_MAX


@dataclass(frozen=True)
class CheckBudget:
    """What one check may spend: draws over all samplers, and computing seconds. The library and
    the CLI run unbounded (MAX_SAMPLES per sampler only); the app takes from_env()."""

    max_draws: int | None = None
    max_seconds: float | None = None

    @classmethod
    def from_env(cls) -> CheckBudget:
        """INFILL_CHECK_MAX_DRAWS (default 2000: N = 400 for five samplers) and
        INFILL_CHECK_MAX_SECONDS (default 300); 0 switches one off."""
        import os

        def num(name: str, default: float) -> float | None:
            try:
                v = float(os.environ.get(name, "") or default)
            except ValueError:
                v = default
            return None if v <= 0 or v != v else v

        draws = num("INFILL_CHECK_MAX_DRAWS", 2000)
        return cls(None if draws is None else int(draws), num("INFILL_CHECK_MAX_SECONDS", 300.0))


class CheckStopped(InfillError):
    """The check used its time budget; nothing is stored."""


def _kind(names: list[str]) -> str:
    specs = check_samplers()
    kinds = {specs[n].kind for n in names}
    if len(kinds) > 1:
        groups = {f: [n for n in names if specs[n].kind == f] for f in sorted(kinds)}
        raise BadParameterError(
            "These samplers sample from different models, so they have no common exact law: "
            + "; ".join(f"{', '.join(v)} need(s) {'a hybrid' if f == 'hybrid' else 'an AS-ARM'}" for f, v in groups.items())
            + ". Check them separately.")
    return kinds.pop()


class ExactnessCheck:
    """One check, prepared (inputs checked, model loaded) and then streamed draw by draw, like an
    InfillRun: `stream()` yields (sampler, draws done, draws in all); `result()` tests the counts.
    The sampler knobs (k, temperature, steps, dtau, window, inner: engine.params.KNOBS) are keyword
    arguments by name, each read and range-checked by the table; one not given takes its default."""

    def __init__(
        self,
        text: str | None = None,
        *,
        samplers: list[str] | str,
        samples: int = DEFAULT_SAMPLES,
        model: str | None = None,
        domain: str | None = None,
        seed: int = 0,
        allow_paths: bool = True,
        budget: CheckBudget | None = None,
        device: str | torch.device | None = None,
        **knobs: object,
    ):
        unknown = sorted(set(knobs) - set(KNOBS))
        if unknown:
            raise BadParameterError(f"The exactness check got unknown argument(s) {', '.join(unknown)}; its "
                                    f"sampler knobs are {', '.join(KNOBS)}.")
        names = [s.strip() for s in samplers.split(",")] if isinstance(samplers, str) else list(samplers)
        names = list(dict.fromkeys(n for n in names if n))
        specs = check_samplers()
        if not names:
            raise BadParameterError("Choose at least one sampler to check.")
        unknown = [n for n in names if n not in specs]
        if unknown:
            raise BadParameterError(f"Unknown sampler {unknown[0]!r}. Choose among: {', '.join(specs)}.")
        samples, seed = whole_number("N", samples), seed_number(seed)
        if samples < 1:
            raise BadParameterError("The number of samples N must be a whole number of at least 1.")
        if samples > MAX_SAMPLES:
            raise BadParameterError(f"N = {samples:,} samples per sampler is over the limit of {MAX_SAMPLES:,}.")
        self.budget = budget or CheckBudget()
        if self.budget.max_draws is not None and samples * len(names) > self.budget.max_draws:
            most = self.budget.max_draws // len(names)
            raise BadParameterError(
                f"N = {samples:,} for {len(names)} sampler(s) is {samples * len(names):,} runs, over this server's "
                f"budget of {self.budget.max_draws:,} runs per check: take N <= {most:,} or fewer samplers.")
        opts = read_knobs(knobs)  # the same types and ranges as every run; steps None: each sampler's own
        self.kind = kind = _kind(names)
        self.lm = load(model or default_model(domain or "text", kind), allow_paths, device)
        if self.lm.kind != kind:
            what = {"asarm": "an AS-ARM", "hybrid": "a hybrid (self-speculative) model"}
            raise IncompatibleModelsError(
                f"{', '.join(names)} need(s) {what[kind]}; {self.lm.name} is "
                f"{what.get(self.lm.kind, f'a {self.lm.kind} model')}.")
        if text is None:
            raise BadParameterError("Give the text to check, with one short [MASK:n] span (n <= 3).")
        self.mi = parse_for(text, self.lm)
        m = len(self.mi.masked)
        if m == 0:
            raise NoMaskError("The text has no [MASK]: mark the span to fill, e.g. [MASK:2].")
        if m > MAX_MASKED:
            raise BadParameterError(
                f"The masked span is {m} tokens; the check enumerates fills of at most {MAX_MASKED} tokens "
                f"(write [MASK:2] or [MASK:3] for a short span).")
        self.names, self.samples, self.seed = names, samples, seed
        self.opts = opts
        # what the check records: every knob one of its samplers reads (engine.params.recorded)
        self.params = {n: opts[n] for n in recorded({p for n in names for p in specs[n].params})}
        self.counts: dict[str, Counter] = {n: Counter() for n in names}
        self.calls: dict[str, float] = {n: 0.0 for n in names}
        self.seconds: dict[str, float] = {n: 0.0 for n in names}
        self.compute_seconds = 0.0
        self._runs: dict[str, InfillRun] = {}
        for n in names:  # each sampler's first draw now: one the model cannot run is refused before the rest
            try:
                self._runs[n] = self._run(n, seed)
                self._draw(n, 0)
            except InfillError as e:
                raise type(e)(f"{n} cannot run here: {e}") from None

    def _run(self, name: str, seed: int) -> InfillRun:
        spec = check_samplers()[name]
        base = name if name in SAMPLERS else "assd-cache"  # a wrong sampler borrows its base's checks
        o = self.opts
        run = InfillRun(masked_input=self.mi, model=self.lm, sampler=base, seed=seed, **o, device=self.lm.device)
        if name not in SAMPLERS:
            run.spec = spec
        return run

    def _draw(self, name: str, i: int) -> None:
        """Draw i of `name`: the prepared run again with its own seed (stream() starts a fresh
        RunContext: oracle, generator, recorder), so draws share nothing but the model."""
        run = self._runs[name]
        t0 = time.perf_counter()
        run.seed, run.trace = sample_seed(self.seed, name, i), []
        for _ in run.stream():
            pass
        decided = decided_tokens(run.trace)
        self.counts[name][tuple(decided[p] for p in self.mi.masked)] += 1
        self.calls[name] += trace_counts(run.trace)["calls"]
        self.seconds[name] += run.seconds
        self.compute_seconds += time.perf_counter() - t0

    def stream(self) -> Iterator[tuple[str, int, int]]:
        """Draw the rest of the N fills of each sampler (the first was drawn when it was prepared);
        yields (sampler, draws done, draws in all) after every draw. Raises CheckStopped once over
        the time budget."""
        total = self.samples * len(self.names)
        done = len(self.names)
        for name in self.names:
            for i in range(1, self.samples):
                self._draw(name, i)
                done += 1
                mx = self.budget.max_seconds
                if mx is not None and self.compute_seconds > mx:
                    raise CheckStopped(
                        f"Stopped after {done:,} of {total:,} runs: the check computed for {self.compute_seconds:.0f} s, "
                        f"over this server's budget of {mx:g} s per check. Take a smaller N or fewer samplers.")
                yield name, done, total

    def result(self) -> CheckResult:
        """The exact law on the cells and every drawn fill, and each sampler's test."""
        n = self.samples
        temperature = self.params["temperature"]
        drawn = set().union(*self.counts.values())
        if self.kind == "asarm":
            exact = asarm_cells(self.lm, self.mi, MIN_EXPECTED / n, temperature)
            for f in drawn - set(exact):
                exact[f] = asarm_prob(self.lm, self.mi, f, temperature)
            law = ("the AS-ARM's chain of conditionals in lattice order (what sequential decoding samples); "
                   "every fill with expected count >= 5 enumerated")
        else:
            exact = {f: hybrid_prob(self.lm, self.mi, f, self.params) for f in drawn}
            law = ("the self-speculative sampler's likelihood (Proposition 3.1) averaged over decode orders, "
                   "for every drawn fill")
        reports = []
        for name in self.names:
            rep = SamplerReport(name, dict(self.counts[name]), self.calls[name] / n, self.seconds[name] / n)
            rep.fit = goodness_of_fit(rep.counts, exact, n)
            reports.append(rep)
        texts = {f: self.fill_text(f) for f in exact}
        return CheckResult(model=self.lm.name, kind=self.kind, source=self.mi.source, samples=n, seed=self.seed,
                           params=dict(self.params), masked_tokens=len(self.mi.masked), exact=exact, texts=texts,
                           samplers=reports, law=law, tv_noise=tv_noise(exact, n))

    def fill_text(self, fill: Fill) -> str:
        """A fill as the text it puts in the span(s) (spans joined by ' | ')."""
        _, spans = self.mi.fill(self.lm.codec, dict(zip(self.mi.masked, fill)))
        return " | ".join(s.text for s in spans)


with_knobs(ExactnessCheck.__init__, after="seed")


def run_check(text: str, **kwargs) -> CheckResult:
    """Prepare, draw and test in one call. See ExactnessCheck for the keyword arguments."""
    chk = ExactnessCheck(text, **kwargs)
    for _ in chk.stream():
        pass
    return chk.result()


__all__ = ["DEFAULT_SAMPLES", "MAX_MASKED", "MAX_SAMPLES", "CheckBudget", "CheckStopped", "ExactnessCheck", "run_check"]
