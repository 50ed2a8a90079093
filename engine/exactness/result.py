"""A finished exactness check as data: each sampler's counts and test (SamplerReport), the exact
law, the settings (CheckResult), and their JSON both ways. The CLI prints to_json(); the app
stores it as a session and its share link replays from_json() without running anything.

Its own module because the stored form is a contract with sessions already saved: a change here
is a change to what old share links read back, and it should be seen as such."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine.exactness.fit import ALPHA, MIN_EXPECTED, Fit, verdict
from engine.exactness.judgement import Judgement
from engine.exactness.law import Fill, fill_key

EXTRA_KEYS = ("statistic", "power", "pilot", "seconds_per_draw", "enumerated", "seconds", "auto")


@dataclass(kw_only=True)
class SamplerReport:
    """One sampler's part of a check: its counts and what the test made of them."""

    name: str
    counts: dict[Fill, int]
    calls_per_sample: float
    seconds_per_sample: float
    fit: Fit | None = None  # the chi-square on the enumerated law's cells, where it is enumerated
    judgement: Judgement | None = None  # the verdict, its test and its power

    @property
    def p_value(self) -> float | None:
        """The p-value the verdict rests on."""
        if self.judgement is not None:
            return self.judgement.p_value
        return self.fit.p_value if self.fit else None

    @property
    def verdict(self) -> str | None:
        """The plain verdict (the judgement's; a check stored before it had one: the chi-square's)."""
        if self.judgement is not None:
            return self.judgement.verdict
        return verdict(self.fit) if self.fit else None

    def to_json(self) -> dict:
        """The JSON the CLI prints and the store keeps (fills keyed by token ids)."""
        f, j = self.fit, self.judgement
        return {
            "counts": {fill_key(k): v for k, v in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))},
            "tv_to_exact": f.tv if f else None,
            "p_value": self.p_value,
            "chi2": f.statistic if f and math.isfinite(f.statistic) else None,
            "chi2_p_value": f.p_value if f else None,
            "dof": f.dof if f else None,
            "verdict": self.verdict,
            "statistic": j.statistic if j else "chi-square",
            "power": j.power if j else {},
            "judgement": j.to_json() if j else None,
            "impossible": f.impossible if f else 0,
            "note": f.note if f else "",
            "calls_per_sample": self.calls_per_sample,
            "seconds_per_sample": self.seconds_per_sample,
        }


@dataclass(kw_only=True)
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
            **{k: v for k, v in self.extra.items() if k not in ("version",)},
        }


def from_json(d: dict) -> CheckResult:
    """A stored check read back (the share link replays it without running anything)."""
    def fill(key: str) -> Fill:
        return tuple(int(t) for t in key.split(",")) if key else ()

    exact = {fill(k): float(v) for k, v in d["exact"].items() if k != "other"}
    texts = {fill(k): str(v) for k, v in d.get("fills", {}).items()}
    reports = []
    for name, s in d["samplers"].items():
        counts = {fill(k): int(v) for k, v in s["counts"].items()}
        fit = None
        if s.get("tv_to_exact") is not None:
            fit = Fit(p_value=float(s.get("chi2_p_value", s["p_value"])),
                      statistic=float(s["chi2"]) if s.get("chi2") is not None else math.inf, dof=int(s.get("dof") or 0),
                      tv=float(s["tv_to_exact"]), cells=0, impossible=int(s.get("impossible", 0)), note=str(s.get("note", "")))
        j = Judgement.from_json(s["judgement"]) if s.get("judgement") else None
        reports.append(
            SamplerReport(
                name=name,
                counts=counts,
                calls_per_sample=float(s["calls_per_sample"]),
                seconds_per_sample=float(s["seconds_per_sample"]),
                fit=fit,
                judgement=j,
            )
        )
    return CheckResult(model=str(d["model"]), kind=str(d.get("kind", d.get("family", "asarm"))), source=str(d["text"]),
                       samples=int(d["samples"]), seed=int(d["seed"]), params=dict(d.get("params", {})),
                       masked_tokens=int(d.get("masked_tokens", 0)), exact=exact, texts=texts, samplers=reports,
                       law=str(d.get("law", "")), tv_noise=float(d.get("tv_noise", 0.0)),
                       alpha=float(d.get("alpha", ALPHA)),
                       extra={k: d[k] for k in EXTRA_KEYS if k in d})
