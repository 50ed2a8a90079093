"""What a check says about each sampler, with the power behind it.

A verdict is only as good as the test's power: "consistent" from a test that could not have seen a
wrong rule misleads. So every verdict here is built from the p-value and the power against each
deliberately wrong contrast on this input at this N:
- p < ALPHA: "not consistent with exact sampling at this N";
- else, power >= TARGET_POWER against every contrast: "consistent with exact sampling at this N";
- else: "cannot tell at this N", with the power, the N that would reach TARGET_POWER and how long
  that would take (or: more masked tokens, a higher temperature).

Its own module because the CLI, the app and the stored JSON all read the same words; keeping
them in one place keeps them from contradicting each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.exactness.fit import ALPHA, CONSISTENT, NOT_CONSISTENT, UNTESTABLE
from engine.exactness.power import TARGET_POWER

CANNOT_TELL = "cannot tell at this N"


@dataclass(kw_only=True)
class Judgement:
    """One sampler's verdict and everything it rests on (stored with the check)."""

    p_value: float
    statistic: str  # the test's short name
    verdict: str
    power: dict[str, float] = field(default_factory=dict)  # contrast -> power at this N and level
    departure: str = ""  # the smallest departure the test sees, in words
    worst_position: int | None = None  # 0-based index into the masked positions
    position_p: list[float] = field(default_factory=list)
    advice: str = ""  # what would help, when it cannot tell
    detail: dict = field(default_factory=dict)  # the parts of the statistic (KS, LR p-values)

    def to_json(self) -> dict:
        """The judgement as the stored check and `--json` hold it."""
        return {"p_value": self.p_value, "statistic": self.statistic, "verdict": self.verdict,
                "power": self.power, "departure": self.departure, "worst_position": self.worst_position,
                "position_p": self.position_p, "advice": self.advice, "detail": self.detail}

    @classmethod
    def from_json(cls, d: dict) -> Judgement:
        """A stored judgement read back (a shared check replays without recomputing it)."""
        return cls(p_value=float(d["p_value"]), statistic=str(d.get("statistic", "")), verdict=str(d["verdict"]),
                   power={str(k): float(v) for k, v in d.get("power", {}).items()}, departure=str(d.get("departure", "")),
                   worst_position=d.get("worst_position"), position_p=[float(x) for x in d.get("position_p", [])],
                   advice=str(d.get("advice", "")), detail=dict(d.get("detail", {})))

    def power_words(self) -> str:
        """The power in one clause: the weakest contrast first, each named."""
        if not self.power:
            return ""
        parts = [f"{power_text(p)} against {c}" for c, p in sorted(self.power.items(), key=lambda kv: kv[1])]
        return "power " + ", ".join(parts)

    def sentence(self) -> str:
        """The verdict with its power and advice, as a visitor reads it."""
        bits = [self.verdict]
        pw = self.power_words()
        if pw:
            bits.append(f"({pw})")
        if self.advice:
            bits.append(f"- {self.advice}")
        return " ".join(bits)


def power_text(p: float) -> str:
    """A power in two decimals, three where two would round it up to the target (0.795 is not 0.80)."""
    s = f"{p:.2f}"
    return f"{p:.3f}" if p < TARGET_POWER <= float(s) else s


def judge(p_value: float, power: dict[str, float], alpha: float = ALPHA, untestable: bool = False) -> str:
    """The plain verdict from the p-value and the power against each contrast."""
    if untestable:
        return UNTESTABLE
    if p_value < alpha:
        return NOT_CONSISTENT
    if power and min(power.values()) < TARGET_POWER:
        return CANNOT_TELL
    return CONSISTENT


def advice(power: dict[str, float], n_needed: dict[str, int | None], seconds_per_draw: float, samplers: int,
           masked: int) -> str:
    """What would help when the power is too low: the N that reaches the target and its time."""
    weak = {c: n_needed.get(c) for c, p in power.items() if p < TARGET_POWER}
    if not weak:
        return ""
    if any(n is None for n in weak.values()):
        more = " or more masked tokens" if masked < 8 else ""
        return (f"even N = 20,000 would not reach power {TARGET_POWER:g} here: the wrong rules' laws are too close "
                f"to the chain on this span; try another span{more}, or a higher temperature.")
    n = max(v for v in weak.values() if v is not None)
    secs = n * seconds_per_draw * samplers
    return (f"N = {n:,} per sampler would reach power {TARGET_POWER:g} (about {_duration(secs)} for "
            f"{samplers} sampler(s) on this machine); more masked tokens also help.")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
