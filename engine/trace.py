"""The trace: the single record of what a sampler did.

Samplers are generators of `Step` events; the result, the database rows, the statistics and the
app's step player are all built from this stream and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum


class StepKind(str, Enum):
    """What a step of the trace records: a network pass or a decision about tokens."""

    # network passes (each carries the calls counter after the pass)
    DRAFT_PASS = "draft_pass"  # AS-ARM: parallel queries on the decided tokens
    DENSITY_PASS = "density_pass"  # AS-ARM: exact factors of the drafted tokens
    NC_PASS = "nc_pass"  # hybrid: non-causal stack (drafts for the window)
    CAUSAL_PASS = "causal_pass"  # hybrid: causal block (targets for the drafts)
    MDM_PASS = "mdm_pass"  # masked diffusion step (MDM sampler or diffusion drafter)
    # decisions
    DRAFT = "draft"  # proposed tokens, not yet decided
    ACCEPT = "accept"  # a draft kept by the speculative test
    REJECT = "reject"  # a draft thrown away by the speculative test
    RESAMPLE = "resample"  # token drawn from the residual after a rejection
    BONUS = "bonus"  # token drawn from a free exact row (no test needed)
    SAMPLE = "sample"  # token drawn directly from the target (sequential decoding)
    REVEAL = "reveal"  # MDM: a position revealed with its sampled token


#: kinds whose tokens become part of the output
DECIDING_KINDS = frozenset(
    {StepKind.ACCEPT, StepKind.RESAMPLE, StepKind.BONUS, StepKind.SAMPLE, StepKind.REVEAL}
)
PASS_KINDS = frozenset(
    {StepKind.DRAFT_PASS, StepKind.DENSITY_PASS, StepKind.NC_PASS, StepKind.CAUSAL_PASS, StepKind.MDM_PASS}
)


@dataclass(kw_only=True)
class Step:
    """One event. Lists are parallel: positions[i] got tokens[i] with proposal p[i], target q[i].

    positions are indices into MaskedInput.tokens (not model positions). p and q are the tempered
    probabilities of the token under the proposal and target (None where not applicable).
    """

    kind: StepKind
    round: int
    positions: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    p: list[float | None] = field(default_factory=list)
    q: list[float | None] = field(default_factory=list)
    calls: float = 0.0
    elapsed: float = 0.0
    note: str = ""
    #: ACCEPT / REJECT only: the draft went through the speculative test min(1, q/p). Samplers set
    #: it False for a draft kept without a test because its proposal row already was the exact
    #: target (ASSD's first draft of a round, the pipelined exact row, self-spec's first slot).
    tested: bool = True

    def to_dict(self) -> dict:
        """The step as JSON (the store and the API)."""
        d = asdict(self)
        d["kind"] = self.kind.value
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Step:
        """A stored step back, marking `tested` for traces saved before the flag existed."""
        d = dict(d)
        d["kind"] = StepKind(d["kind"])
        if "tested" not in d:  # a trace saved before the flag existed
            d["tested"] = legacy_tested(d["kind"], d.get("note", ""))
        return cls(**d)


#: notes that marked untested accepts before Step.tested existed (only for old stored traces)
LEGACY_UNTESTED_NOTES = ("first draft", "exact row", "first draft: causal = non-causal")


def legacy_tested(kind: StepKind | str, note: str) -> bool:
    """Step.tested for a trace recorded before the flag: every REJECT was tested, an ACCEPT unless
    its note said it was an exact row."""
    kind = StepKind(kind)
    return kind == StepKind.REJECT or (kind == StepKind.ACCEPT and note not in LEGACY_UNTESTED_NOTES)


def tested_decisions(trace: list[Step]) -> Iterator[tuple[int, bool, float | None, float | None]]:
    """(position in the round, accepted, p, q) of every draft that went through the speculative test.

    The position in the round is the draft's index in its round's most recent DRAFT step (drafted
    positions are listed in decode order; 0 = the round's first draft). Untested accepts (exact
    rows) are left out: they say nothing about how often drafts pass the test."""
    where: dict[int, int] = {}
    for s in trace:
        if s.kind == StepKind.DRAFT:
            where = {pos: i for i, pos in enumerate(s.positions)}
        elif s.kind in (StepKind.ACCEPT, StepKind.REJECT) and s.tested:
            for j, pos in enumerate(s.positions):
                if pos in where:
                    p = s.p[j] if j < len(s.p) else None
                    q = s.q[j] if j < len(s.q) else None
                    yield where[pos], s.kind == StepKind.ACCEPT, p, q


def acceptance_by_position(trace: list[Step]) -> dict[int, list[int]]:
    """Position in the round -> [accepted, rejected] over tested drafts: the one definition the
    app's statistics, the store and the report all use."""
    out: dict[int, list[int]] = {}
    for i, accepted, _, _ in tested_decisions(trace):
        out.setdefault(i, [0, 0])[0 if accepted else 1] += 1
    return dict(sorted(out.items()))


def untested_accepts(trace: list[Step]) -> int:
    """Drafts kept without a test (exact rows)."""
    return sum(len(s.positions) for s in trace if s.kind == StepKind.ACCEPT and not s.tested)


def decided_tokens(trace: list[Step]) -> dict[int, int]:
    """Position -> token for every position a step decided (later decisions win)."""
    out: dict[int, int] = {}
    for s in trace:
        if s.kind in DECIDING_KINDS:
            out.update(zip(s.positions, s.tokens))
    return out


def best_case_calls(trace: list[Step]) -> float:
    """Calls when a masked-diffusion step that revealed nothing is free (the input did not change,
    so the next step reuses its output), as the self-speculative paper counts MDM; equal to the
    raw count for every other sampler."""
    productive = {s.round for s in trace if s.kind == StepKind.REVEAL}
    saved, before = 0.0, 0.0
    for s in trace:
        if s.kind in PASS_KINDS:
            if s.kind == StepKind.MDM_PASS and s.round not in productive:
                saved += s.calls - before
            before = s.calls
    return (trace[-1].calls if trace else 0.0) - saved


def trace_counts(trace: list[Step]) -> dict[str, float]:
    """Calls (raw and best case), rounds and decision counts, all derived from the trace."""
    calls = trace[-1].calls if trace else 0.0
    rounds = max((s.round for s in trace), default=-1) + 1
    n = {k: 0 for k in ("accepted", "rejected", "resampled", "bonus", "sampled", "revealed")}
    names = {
        StepKind.ACCEPT: "accepted",
        StepKind.REJECT: "rejected",
        StepKind.RESAMPLE: "resampled",
        StepKind.BONUS: "bonus",
        StepKind.SAMPLE: "sampled",
        StepKind.REVEAL: "revealed",
    }
    for s in trace:
        if s.kind in names:
            n[names[s.kind]] += len(s.positions)
    return {"calls": calls, "calls_best": best_case_calls(trace), "rounds": rounds, **n}
