"""The exactness check: draw N fills of a masked span from each of several samplers and test them
against the model's exact law, so a visitor sees "same distribution, fewer calls" on their own
sentence, and how much the test could have seen.

Flow: text -> MaskedInput -> N runs per sampler, each with its own seed (InfillRun, the same code
path as every other run) -> counts of fills (token ids, in lattice order) -> per sampler a p-value,
the power against each deliberately wrong rule at this N, and one plain verdict.
- AS-ARM samplers (any span length): every drawn fill gets one density call, whose rows give the
  randomised transforms and the wrong rules' likelihood ratios (engine/exactness/contrast.py,
  pit.py, power.py); spans of at most ENUMERATE_MAX tokens also get the enumerated law's table
  and its chi-square (law.py, fit.py).
- Hybrid samplers: the self-speculative likelihood (Proposition 3.1) on spans of at most
  ENUMERATE_MAX tokens, chi-square, with the smallest shift it sees at power 0.8.

This module runs a check (ExactnessCheck, run_check: inputs checked, model loaded, draws streamed,
pilots of the wrong rules drawn where needed, N chosen for `samples="auto"`); the verdict's words
live in engine/exactness/judgement.py, the stored form in result.py, the deliberately broken
`wrong-...` samplers in wrong_samplers.py (the catalogue never lists them).
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
from engine.exactness.analysis import chain_reports, contrast_records, hybrid_reports
from engine.exactness.contrast import CONTRASTS
from engine.exactness.fit import ALPHA
from engine.exactness.law import Fill
from engine.exactness.power import AUTO_POWER, n_for_power
from engine.exactness.result import CheckResult
from engine.exactness.wrong_samplers import check_samplers
from engine.loading.registry import default_model, load
from engine.params import recorded, refuse_unknown, seed_number, settle, whole_number, with_knobs
from engine.samplers import SAMPLERS
from engine.seeding import SEED_MAX
from engine.trace import decided_tokens, trace_counts

ENUMERATE_MAX = 3  # longest span whose law is enumerated (the table; the hybrid's only test)
MAX_SAMPLES = 20_000  # per sampler, library and CLI (the app's budget is smaller: CheckBudget)
DEFAULT_SAMPLES = 400
PILOT = 200  # draws of a wrong rule not among the checked samplers, simulated for the power
AUTO_PILOT = 100  # draws of each wrong rule before `samples="auto"` chooses N
#: a one-token span: the draft is the target's own conditional, so no draft is ever rejected and the
#: wrong rules (which differ only after a rejection) draw from the exact law itself
ONE_TOKEN = ("The masked span is one token. There the deliberately wrong samplers draw from the exact law itself "
             "(they draft with the model's own conditional, so no draft is rejected, and they differ from the exact "
             "rule only after a rejection), so no number of draws can tell an exact sampler from a wrong one. Mask "
             "two or more tokens, e.g. [MASK:3].")
AUTO_BUDGET = (2000, 300.0)  # the page's budget: draws over all samplers, seconds; auto stays within it


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
    `samples` is N, or "auto": N chosen from a pilot of the wrong rules so that the power against
    each reaches AUTO_POWER within the budget (the page's, AUTO_BUDGET, when none is given).
    The sampler knobs (engine.params.KNOBS: k, temperature, steps ...) are keyword
    arguments by name, each read and range-checked by the table; one not given takes its default."""

    def __init__(
        self,
        text: str | None = None,
        *,
        samplers: list[str] | str,
        samples: int | str = DEFAULT_SAMPLES,
        model: str | None = None,
        domain: str | None = None,
        seed: int = 0,
        allow_paths: bool = True,
        budget: CheckBudget | None = None,
        device: str | torch.device | None = None,
        **knobs: object,
    ):
        refuse_unknown(knobs, "The exactness check")
        names = [s.strip() for s in samplers.split(",")] if isinstance(samplers, str) else list(samplers)
        names = list(dict.fromkeys(n for n in names if n))
        specs = check_samplers()
        if not names:
            raise BadParameterError("Choose at least one sampler to check.")
        unknown = [n for n in names if n not in specs]
        if unknown:
            raise BadParameterError(f"Unknown sampler {unknown[0]!r}. Choose among: {', '.join(specs)}.")
        self.auto = isinstance(samples, str) and samples.strip().lower() == "auto"
        samples = AUTO_PILOT if self.auto else whole_number("N", samples)
        seed = seed_number(seed)
        if samples < 1:
            raise BadParameterError("The number of samples N must be a whole number of at least 1 (or auto).")
        if samples > MAX_SAMPLES:
            raise BadParameterError(f"N = {samples:,} samples per sampler is over the limit of {MAX_SAMPLES:,}.")
        self.budget = budget or (CheckBudget(*AUTO_BUDGET) if self.auto else CheckBudget())
        if not self.auto and self.budget.max_draws is not None and samples * len(names) > self.budget.max_draws:
            most = self.budget.max_draws // len(names)
            raise BadParameterError(
                f"N = {samples:,} for {len(names)} sampler(s) is {samples * len(names):,} runs, over this server's "
                f"budget of {self.budget.max_draws:,} runs per check: take N <= {most:,} or fewer samplers.")
        # the check's one knob value: the same types and ranges as every run; steps None: each sampler's own
        opts = settle(knobs, who="The exactness check")
        self.kind = kind = _kind(names)
        self.lm = load(model or default_model(domain or "text", kind), allow_paths, device)
        if self.lm.kind != kind:
            what = {"asarm": "an AS-ARM", "hybrid": "a hybrid (self-speculative) model"}
            raise IncompatibleModelsError(
                f"{', '.join(names)} need(s) {what[kind]}; {self.lm.name} is "
                f"{what.get(self.lm.kind, f'a {self.lm.kind} model')}.")
        if text is None:
            raise BadParameterError("Give the text to check, with one [MASK:n] span.")
        self.mi = parse_for(text, self.lm)
        m = len(self.mi.masked)
        if m == 0:
            raise NoMaskError("The text has no [MASK]: mark the span to fill, e.g. [MASK:2].")
        if kind == "asarm" and m == 1:
            raise BadParameterError(ONE_TOKEN)
        if kind == "hybrid" and m > ENUMERATE_MAX:
            raise BadParameterError(
                f"The masked span is {m} tokens; the hybrid samplers' law (Proposition 3.1) is checked by "
                f"enumerating fills of at most {ENUMERATE_MAX} tokens (write [MASK:2] or [MASK:3]). AS-ARM "
                f"samplers take any span length.")
        self.names, self.samples, self.seed = names, samples, seed
        self.knobs = opts  # what every draw, the power and the law read
        # what the check records: every knob one of its samplers reads (engine.params.recorded)
        self.params = {n: opts[n] for n in recorded({p for n in names for p in specs[n].reads})}
        if kind == "asarm":
            self.params.setdefault("k", opts["k"])  # the wrong rules' rounds, which the power simulates
        self.counts: dict[str, Counter] = {n: Counter() for n in names}
        self.pilot_counts: dict[str, Counter] = {}  # wrong rules drawn only for the power
        self.done: dict[str, int] = {n: 0 for n in names}
        self.calls: dict[str, float] = {n: 0.0 for n in names}
        self.seconds: dict[str, float] = {n: 0.0 for n in names}
        self.compute_seconds = 0.0
        self.chosen = ""  # how auto chose N
        self._runs: dict[str, InfillRun] = {}
        for n in names:  # each sampler's first draw now: one the model cannot run is refused before the rest
            try:
                self._runs[n] = self._run(n, seed)
                self._draw(n, 0)
            except InfillError as e:
                raise type(e)(f"{n} cannot run here: {e}") from None
        if self.auto:
            self._choose_n()

    def _run(self, name: str, seed: int) -> InfillRun:
        spec = check_samplers()[name]
        base = name if name in SAMPLERS else "assd-cache"  # a wrong sampler borrows its base's checks
        o = self.knobs
        run = InfillRun(masked_input=self.mi, model=self.lm, sampler=base, seed=seed, **o, device=self.lm.device)
        if name not in SAMPLERS:
            run.spec = spec
        return run

    def _draw(self, name: str, i: int) -> None:
        """Draw i of `name`: the prepared run again with its own seed (stream() starts a fresh
        RunContext: oracle, generator, recorder), so draws share nothing but the model. A wrong rule
        drawn only for the power goes into pilot_counts."""
        if name not in self._runs:
            self._runs[name] = self._run(name, self.seed)
        run = self._runs[name]
        t0 = time.perf_counter()
        run.seed, run.trace = sample_seed(self.seed, name, i), []
        for _ in run.stream():
            pass
        decided = decided_tokens(run.trace)
        fill = tuple(decided[p] for p in self.mi.masked)
        if name in self.counts:
            self.counts[name][fill] += 1
            self.done[name] = i + 1
            self.calls[name] += trace_counts(run.trace)["calls"]
            self.seconds[name] += run.seconds
        else:
            self.pilot_counts.setdefault(name, Counter())[fill] += 1
        self.compute_seconds += time.perf_counter() - t0

    def pilot(self, size: int) -> None:
        """At least `size` draws of every wrong rule (AS-ARM checks): a checked one's own draws, the
        others drawn apart (pilot_counts) only to simulate the power."""
        if self.kind != "asarm":
            return
        for c in CONTRASTS:
            have = self.done[c] if c in self.counts else sum(self.pilot_counts.get(c, Counter()).values())
            for i in range(have, size):
                self._draw(c, i)

    def _choose_n(self) -> None:
        """`samples="auto"`: a pilot of AUTO_PILOT draws of each wrong rule, then the smallest N whose
        simulated power reaches AUTO_POWER against every rule, within the draws and seconds left."""
        if self.kind != "asarm":
            self.chosen = f"auto: N = {self.samples} (the hybrid's enumeration test has no wrong-rule pilot)"
            return
        self.pilot(AUTO_PILOT)
        t0 = time.perf_counter()
        recs = contrast_records(self)
        cap = MAX_SAMPLES
        if self.budget.max_draws is not None:
            cap = min(cap, self.budget.max_draws // len(self.names))
        drawn = sum(self.done.values()) + sum(sum(c.values()) for c in self.pilot_counts.values())
        per_draw = (self.compute_seconds + time.perf_counter() - t0) / max(1, drawn)
        if self.budget.max_seconds is not None:
            left = self.budget.max_seconds - self.compute_seconds
            cap = min(cap, int(left / (per_draw * 1.5 * len(self.names))))  # 1.5: the draws' own density calls
        cap = max(cap, AUTO_PILOT)
        need = {c: n_for_power(r, AUTO_POWER, ALPHA, 25, cap, own=c) for c, r in recs.items()}
        if all(v is not None for v in need.values()):
            n = max(AUTO_PILOT, *[v for v in need.values() if v is not None])
            self.chosen = (f"auto: N = {n:,}, the smallest that reaches power {AUTO_POWER:g} against "
                           + ", ".join(f"{c} (N = {v:,})" for c, v in need.items()) + f" (pilot of {AUTO_PILOT})")
        else:
            n = cap
            self.chosen = (f"auto: N = {n:,}, the most the budget allows ({self.budget.max_draws or 'no'} draws, "
                           f"{self.budget.max_seconds or 'no'} s); power {AUTO_POWER:g} is out of reach against "
                           + ", ".join(c for c, v in need.items() if v is None))
        self.samples = n

    def stream(self) -> Iterator[tuple[str, int, int]]:
        """Draw the rest of the N fills of each sampler (the first, and auto's pilot, were drawn when
        it was prepared); yields (sampler, draws done, draws in all) after every draw. Raises
        CheckStopped once over the time budget."""
        total = self.samples * len(self.names)
        done = sum(min(v, self.samples) for v in self.done.values())
        for name in self.names:
            for i in range(self.done[name], self.samples):
                self._draw(name, i)
                done += 1
                mx = self.budget.max_seconds
                if mx is not None and self.compute_seconds > mx:
                    raise CheckStopped(
                        f"Stopped after {done:,} of {total:,} runs: the check computed for {self.compute_seconds:.0f} s, "
                        f"over this server's budget of {mx:g} s per check. Take a smaller N or fewer samplers.")
                yield name, done, total

    def result(self) -> CheckResult:
        """Each sampler's test, with its power; the exact law's table where it is small enough."""
        t0 = time.perf_counter()
        if self.kind == "asarm":
            self.pilot(min(self.samples, PILOT))
            res = chain_reports(self, ENUMERATE_MAX)
        else:
            res = hybrid_reports(self)
        self.compute_seconds += time.perf_counter() - t0
        res.extra.update({"seconds": round(self.compute_seconds, 3), "auto": self.chosen})
        return res

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


__all__ = ["DEFAULT_SAMPLES", "ENUMERATE_MAX", "MAX_SAMPLES", "CheckBudget", "CheckStopped", "ExactnessCheck",
           "run_check"]
