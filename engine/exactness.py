"""The exactness check: draw N fills of a short masked span from each of several samplers and set
their frequencies against the model's exact law, so a visitor sees "same distribution, fewer
calls" on their own sentence (issue 26).

Flow: text -> MaskedInput (at most MAX_MASKED tokens) -> N runs per sampler, each with its own
seed (InfillRun, the same code path as every other run) -> counts of fills (token ids, in lattice
order) -> the exact law on the cells the test uses -> per sampler: total-variation distance, a
chi-square goodness-of-fit p-value and one plain verdict.

The exact law is the model's, not the sampler's:
- an AS-ARM: the chain of (tempered) conditionals in lattice order, which is what sequential
  decoding samples and what every exact speculative sampler must match. Every fill with
  probability >= the cell threshold is found exactly by a prefix search (a prefix is kept only if
  its own probability is >= the threshold, so at most 1/threshold prefixes per position);
- a hybrid: the self-speculative sampler's own likelihood (Proposition 3.1,
  engine/samplers/selfspec_likelihood.py) averaged over the uniformly random decode orders, under
  the check's dtau / window / inner. It is computed for every fill some sampler drew (no prefix
  search exists for it), so the test's cells are the drawn fills with an expected count >= 5.
The rest of the mass is "other".

The test: Pearson's chi-square on the cells with expected count >= MIN_EXPECTED (N p >= 5), every
other fill pooled into "other" (merged with the smallest cells while its own expected count is
below 5); p-value from the chi-square law with cells - 1 degrees of freedom. A fill whose exact
probability is 0 is an impossible outcome: p = 0. Consistent means p >= ALPHA.

`wrong-...` samplers (WRONG_SAMPLERS) are deliberately broken and exist only here, so a visitor
sees what a failed check looks like; the catalogue (engine.samplers.SAMPLERS) never lists them.
"""

from __future__ import annotations

import math
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import chi2

from .acceptance import Verdict, sample_categorical, tempered_probs, uniform
from .api import InfillRun, _check, make_oracle, parse_for
from .errors import BadParameterError, IncompatibleModelsError, InfillError, NoMaskError
from .params import KNOBS, LIMITS, read_knob, whole_number
from .registry import LoadedModel, default_model, load
from .samplers import SAMPLERS, SamplerSpec
from .samplers.assd import assd
from .seeding import SEED_MAX
from .trace import decided_tokens, trace_counts

MAX_MASKED = 3  # longest span whose fills the check enumerates
MAX_SAMPLES = 20_000  # per sampler, library and CLI (the app's budget is smaller: CheckBudget)
DEFAULT_SAMPLES = 400
MIN_EXPECTED = 5.0  # a cell of the chi-square test has an expected count of at least this
ALPHA = 0.01  # p below this: "not consistent"
CONSISTENT = "consistent with exact sampling at this N"
NOT_CONSISTENT = "not consistent with exact sampling at this N"
UNTESTABLE = "nothing to test at this N"


# ----------------------------------------------------------------------------- the wrong samplers


def residual_from_q(draft: int, p: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> Verdict:
    """A wrong speculative test: on rejection it draws from the target q instead of the residual
    norm(max(q - p, 0)), so tokens the draft over-proposes come out too often (mutant M1 of
    tests/test_mutations.py)."""
    px, qx = float(p[draft]), float(q[draft])
    a = min(1.0, qx / px)
    if uniform(gen) < a:
        return Verdict(True, draft, a, px, qx, qx)
    tok = sample_categorical(q, gen)
    return Verdict(False, tok, a, px, qx, float(q[tok]))


def accept_every_draft(draft: int, p: torch.Tensor, q: torch.Tensor, gen: torch.Generator) -> Verdict:
    """No test at all: every draft is kept, so the drafted tokens come out independently from their
    parallel rows (the factorisation error of parallel decoding that verification removes)."""
    px, qx = float(p[draft]), float(q[draft])
    return Verdict(True, draft, 1.0, px, qx, qx)


WRONG_SAMPLERS: dict[str, SamplerSpec] = {
    s.name: s
    for s in [
        SamplerSpec("wrong-assd-residual-from-q", "asarm", True, ("k", "temperature"),
                    "DELIBERATELY WRONG: ASSD (cached) that resamples a rejected draft from the target q "
                    "instead of the residual max(q - p, 0). Offered only in the exactness check, to show "
                    "what a failed check looks like.",
                    lambda c: assd(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k, accept=residual_from_q)),
        SamplerSpec("wrong-assd-accept-all", "asarm", True, ("k", "temperature"),
                    "DELIBERATELY WRONG: ASSD (cached) that keeps every draft without testing it, i.e. parallel "
                    "decoding: each token of a round comes from its own marginal, ignoring the others. Offered "
                    "only in the exactness check.",
                    lambda c: assd(c.oracle, c.mi, c.rec, c.gen, c.temperature, c.k, accept=accept_every_draft)),
    ]
}


def check_samplers() -> dict[str, SamplerSpec]:
    """Every sampler the check offers: the catalogue plus the wrong ones."""
    return {**SAMPLERS, **WRONG_SAMPLERS}


# ----------------------------------------------------------------------------- the exact law


Fill = tuple[int, ...]  # token ids at the masked positions, in lattice (left-to-right) order


def fill_key(fill: Fill) -> str:
    """A fill as a JSON key: its token ids joined by commas."""
    return ",".join(str(t) for t in fill)


def asarm_cells(lm: LoadedModel, mi, threshold: float, temperature: float) -> dict[Fill, float]:
    """Every fill whose exact probability (chain of tempered conditionals in lattice order) is at
    least `threshold`, with that probability. A prefix below the threshold cannot grow into a fill
    above it, so the search is complete; it spends one network call per kept prefix."""
    frontier: list[tuple[Fill, float]] = [((), 1.0)]
    for r, pos in enumerate(mi.masked):
        grown = []
        for prefix, pp in frontier:
            oracle = make_oracle(lm, mi, use_cache=False)
            row = tempered_probs(oracle.call(list(zip(mi.masked[:r], prefix)), [(pos, r)]), temperature)[0]
            joint = row * pp
            for tok in torch.nonzero(joint >= threshold).flatten().tolist():
                grown.append((prefix + (tok,), float(joint[tok])))
        frontier = grown
    return dict(frontier)


def asarm_prob(lm: LoadedModel, mi, fill: Fill, temperature: float) -> float:
    """The exact probability of one fill: the chain of tempered conditionals, one density pass."""
    oracle = make_oracle(lm, mi, use_cache=False)
    drafts = list(zip(mi.masked, fill))
    logits = oracle.call(drafts, [(pos, i) for i, (pos, _) in enumerate(drafts)])
    rows = tempered_probs(logits, temperature)
    return float(math.prod(float(rows[i, t]) for i, t in enumerate(fill)))


def hybrid_prob(lm: LoadedModel, mi, fill: Fill, params: dict) -> float:
    """The self-speculative sampler's probability of one fill (Proposition 3.1), averaged over the
    decode orders, under the check's temperature / dtau / window / inner."""
    from .samplers.selfspec_likelihood import log_prob_marginal

    tokens = list(mi.tokens)
    for pos, tok in zip(mi.masked, fill):
        tokens[pos] = tok
    return math.exp(log_prob_marginal(
        lm.model, mi, tokens, temperature=params["temperature"], dtau=params.get("dtau", KNOBS["dtau"].default),
        window=params.get("window", KNOBS["window"].default), inner=params.get("inner", KNOBS["inner"].default)))


# ----------------------------------------------------------------------------- the test


@dataclass
class Fit:
    """One sampler's counts against the exact law on the test's cells."""

    p_value: float
    statistic: float
    dof: int
    tv: float  # between frequencies and exact probabilities on the test's cells
    cells: int
    impossible: int  # draws of fills the exact law gives probability 0
    note: str = ""


def pooled_cells(exact: dict[Fill, float], n: int) -> list[Fill]:
    """The fills that get a cell of their own: expected count >= MIN_EXPECTED, and enough left over
    for "other" to reach it too (else its smallest cells join "other"). Most likely first."""
    kept = sorted((f for f, p in exact.items() if n * p >= MIN_EXPECTED), key=lambda f: (-exact[f], f))
    rest = 1.0 - sum(exact[f] for f in kept)
    while kept and n * rest < MIN_EXPECTED - 1e-9 and rest > 1e-12:
        rest += exact[kept.pop()]
    return kept


def goodness_of_fit(counts: dict[Fill, int], exact: dict[Fill, float], n: int) -> Fit:
    """Pearson's chi-square of `counts` (n draws) against `exact` on the pooled cells (pooled_cells);
    p-value from the chi-square law with cells - 1 degrees of freedom."""
    impossible = sum(c for f, c in counts.items() if f in exact and exact[f] <= 0.0)
    kept = pooled_cells(exact, n)
    obs = [counts.get(f, 0) for f in kept]
    probs = [exact[f] for f in kept]
    rest_p = max(0.0, 1.0 - sum(probs))
    if rest_p > 1e-12:
        obs.append(n - sum(obs))
        probs.append(rest_p)
    tv = 0.5 * sum(abs(o / n - p) for o, p in zip(obs, probs)) if n else 0.0
    if impossible:
        return Fit(0.0, math.inf, len(obs) - 1, tv, len(obs), impossible,
                   f"{impossible} draw(s) of a fill the model gives probability 0")
    if len(obs) < 2:
        why = ("the exact law puts almost all its mass on one fill" if kept else
               "no fill has 5 or more expected draws at this N: take a larger N or a lower temperature")
        return Fit(1.0, 0.0, 0, tv, len(obs), 0, why)
    stat = float(sum((o - n * p) ** 2 / (n * p) for o, p in zip(obs, probs)))
    dof = len(obs) - 1
    return Fit(float(chi2.sf(stat, dof)), stat, dof, tv, len(obs), 0)


def verdict(fit: Fit, alpha: float = ALPHA) -> str:
    """The one plain sentence a visitor reads (UNTESTABLE when the test has no degrees of freedom)."""
    if fit.dof < 1 and not fit.impossible:
        return UNTESTABLE
    return CONSISTENT if fit.p_value >= alpha else NOT_CONSISTENT


def tv_noise(exact: dict[Fill, float], n: int, draws: int = 200, seed: int = 0) -> float:
    """The median TV (on the test's cells) that an exact sampler shows at this N: the yardstick a
    sampler's own TV is read against (sampling noise alone is never 0)."""
    kept = pooled_cells(exact, n)
    probs = [exact[f] for f in kept]
    rest = max(0.0, 1.0 - sum(probs))
    if rest > 1e-12:
        probs.append(rest)
    if not n or len(probs) < 2:
        return 0.0
    pv = np.array(probs) / sum(probs)
    sims = np.random.default_rng(seed).multinomial(n, pv, size=draws) / n
    return float(np.median(0.5 * np.abs(sims - pv).sum(axis=1)))


# ----------------------------------------------------------------------------- the check


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


@dataclass
class SamplerReport:
    """One sampler's part of a check: its counts and what the test made of them."""

    name: str
    counts: dict[Fill, int]
    calls_per_sample: float
    seconds_per_sample: float
    fit: Fit | None = None

    def to_json(self) -> dict:
        """The JSON the CLI prints and the store keeps (fills keyed by token ids)."""
        f = self.fit
        return {
            "counts": {fill_key(k): v for k, v in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))},
            "tv_to_exact": f.tv if f else None,
            "p_value": f.p_value if f else None,
            "chi2": f.statistic if f and math.isfinite(f.statistic) else None,
            "dof": f.dof if f else None,
            "verdict": verdict(f) if f else None,
            "impossible": f.impossible if f else 0,
            "note": f.note if f else "",
            "calls_per_sample": self.calls_per_sample,
            "seconds_per_sample": self.seconds_per_sample,
        }


@dataclass
class CheckResult:
    """A finished check: settings, the exact law on the fills that matter, each sampler's report."""

    model: str
    kind: str  # the model kind the checked samplers drive (engine.samplers.SamplerSpec.kind)
    source: str
    samples: int
    seed: int
    params: dict
    masked_tokens: int
    exact: dict[Fill, float]
    texts: dict[Fill, str]
    samplers: list[SamplerReport]
    law: str
    tv_noise: float = 0.0
    alpha: float = ALPHA
    extra: dict = field(default_factory=dict)

    @property
    def other(self) -> float:
        """The exact mass of every fill not listed."""
        return max(0.0, 1.0 - math.fsum(self.exact.values()))

    def to_json(self) -> dict:
        """`exact` (fill -> probability, plus "other"), `fills` (fill -> decoded text) and `samplers`
        (name -> counts, tv_to_exact, p_value, calls_per_sample, seconds_per_sample, verdict)."""
        exact = {fill_key(f): p for f, p in sorted(self.exact.items(), key=lambda kv: (-kv[1], kv[0]))}
        exact["other"] = self.other
        return {
            "version": 1,
            "model": self.model,
            "kind": self.kind,
            "text": self.source,
            "samples": self.samples,
            "seed": self.seed,
            "params": self.params,
            "masked_tokens": self.masked_tokens,
            "law": self.law,
            "alpha": self.alpha,
            "min_expected": MIN_EXPECTED,
            "tv_noise": self.tv_noise,
            "exact": exact,
            "fills": {fill_key(f): t for f, t in self.texts.items()},
            "samplers": {r.name: r.to_json() for r in self.samplers},
        }


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
        samples, seed = whole_number("N", samples), whole_number("seed", seed)
        given = {name: knobs.get(name, k.default) for name, k in KNOBS.items()}
        opts = {name: None if v is None else read_knob(name, v) for name, v in given.items()}  # steps None: the sampler's
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
        if not 0 <= seed <= SEED_MAX:
            raise BadParameterError("seed must be a whole number between 0 and 2**64 - 1.")
        for name in LIMITS:
            if opts[name] is not None:
                _check(name, opts[name])  # the same ranges as every run (engine.params.KNOBS)
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
        self.params = {"temperature": opts["temperature"]}
        if any("k" in specs[n].params for n in names):
            self.params["k"] = opts["k"]
        if self.kind == "hybrid" or any("steps" in specs[n].params for n in names):
            self.params.update({n: opts[n] for n in ("steps", "dtau", "window", "inner")})
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
        run = InfillRun(masked_input=self.mi, model=str(self.lm.path) if self.lm.hub_id is None else self.lm.hub_id,
                        sampler=base, seed=seed, **o, device=self.lm.device)
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


def run_check(text: str, **kwargs) -> CheckResult:
    """Prepare, draw and test in one call. See ExactnessCheck for the keyword arguments."""
    chk = ExactnessCheck(text, **kwargs)
    for _ in chk.stream():
        pass
    return chk.result()


def from_json(d: dict) -> CheckResult:
    """A stored check read back (the share link replays it without running anything)."""
    def fill(key: str) -> Fill:
        return tuple(int(t) for t in key.split(",")) if key else ()

    exact = {fill(k): float(v) for k, v in d["exact"].items() if k != "other"}
    texts = {fill(k): str(v) for k, v in d.get("fills", {}).items()}
    reports = []
    for name, s in d["samplers"].items():
        counts = {fill(k): int(v) for k, v in s["counts"].items()}
        fit = Fit(float(s["p_value"]), float(s["chi2"]) if s.get("chi2") is not None else math.inf,
                  int(s.get("dof") or 0), float(s["tv_to_exact"]), 0, int(s.get("impossible", 0)),
                  str(s.get("note", "")))
        reports.append(SamplerReport(name, counts, float(s["calls_per_sample"]), float(s["seconds_per_sample"]), fit))
    return CheckResult(model=str(d["model"]), kind=str(d.get("kind", d.get("family", "asarm"))), source=str(d["text"]),
                       samples=int(d["samples"]), seed=int(d["seed"]), params=dict(d.get("params", {})),
                       masked_tokens=int(d.get("masked_tokens", 0)), exact=exact, texts=texts, samplers=reports,
                       law=str(d.get("law", "")), tv_noise=float(d.get("tv_noise", 0.0)),
                       alpha=float(d.get("alpha", ALPHA)))


__all__ = ["ALPHA", "CONSISTENT", "NOT_CONSISTENT", "UNTESTABLE", "WRONG_SAMPLERS", "CheckBudget", "CheckResult", "CheckStopped",
           "ExactnessCheck", "Fit", "from_json", "goodness_of_fit", "run_check", "verdict"]
