"""The Python API: `infill` and `score`, and `InfillRun` for callers that stream steps (the app).

Flow: text + spans -> MaskedInput -> sampler drives a model -> Steps (the trace) -> InfillResult,
which is computed from the trace alone.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from engine.inputs.domains import unindented
from engine.inputs.masking import MaskedInput, Span, completed_from_ranges
from engine.loading.loaded_model import LoadedModel
from engine.loading.registry import default_model, load
from engine.samplers.context import RunContext, make_oracle

from .budget import Budget, Meter, install
from .errors import BadParameterError
from .params import LIMITS, with_knobs  # noqa: F401 (LIMITS: re-exported)
from .run_setup import admit, check_types, load_models, parse_for, parse_input, resolve_request
from .samplers import DOMAIN_DEFAULT
from .trace import Step, decided_tokens, trace_counts

# LIMITS (imported above, re-exported): the knobs' accepted ranges, engine.params.KNOBS


@dataclass(kw_only=True)
class InfillResult:
    """What one finished run gives back: the completed text and its spans, the cost (calls,
    rounds, seconds), the exact log-probability and the trace, for the API, the CLI and the store."""

    text: str
    spans: list[Span]
    masked_tokens: int
    calls: float
    rounds: int
    seconds: float
    log_prob: float | None
    sampler: str
    model: str
    seed: int
    params: dict
    source: str
    tokens: list[int]
    trace: list[Step] = field(repr=False)
    counts: dict = field(default_factory=dict)
    model_path: str = ""
    masked_input: MaskedInput | None = field(default=None, repr=False)  # the exact ids the run started from
    # what the domain's normaliser changed in the typed text ('' if nothing): "Read as a protein
    # sequence: dropped 1 FASTA header line, ..." (engine.run_setup.parse_for); `source` is the text as read
    note: str = ""

    def input_for(self, lm: LoadedModel) -> MaskedInput:
        """The run's MaskedInput: kept from the run itself (its source text, parsed again, may
        tokenize differently when the input was built from token positions)."""
        return self.masked_input if self.masked_input is not None else parse_for(self.source, lm)

    @property
    def tokens_per_call(self) -> float:
        """Masked tokens per network call: the speed-up measure every sampler is compared on."""
        return self.masked_tokens / self.calls if self.calls else float("nan")

    def to_json(self, with_steps: bool = True) -> dict:
        """The result as plain JSON (the CLI's --json, the benchmarks), with the steps unless told not to."""
        d = {
            "text": self.text,
            "spans": [s.to_dict() for s in self.spans],
            "masked_tokens": self.masked_tokens,
            "calls": self.calls,
            "calls_best": self.counts.get("calls_best", self.calls),
            "rounds": self.rounds,
            "seconds": self.seconds,
            "log_prob": self.log_prob,
            "tokens_per_call": self.tokens_per_call,
            "sampler": self.sampler,
            "model": self.model,
            "seed": self.seed,
            "params": self.params,
            "source": self.source,
            "counts": self.counts,
            "note": self.note,
        }
        if with_steps:
            d["steps"] = [s.to_dict() for s in self.trace]
        return d


class InfillRun:
    """One sampler execution, prepared (inputs checked, model loaded) and then streamed."""

    def __init__(
        self,
        text: str | None = None,
        *,
        model: str | LoadedModel | None = None,
        sampler: str = DOMAIN_DEFAULT,
        domain: str | None = None,
        seed: int = 0,
        cache: bool | None = None,
        draft_model: str | LoadedModel | None = None,
        masked_input: MaskedInput | None = None,
        allow_paths: bool = True,
        budget: Budget | None = None,
        device: str | torch.device | None = None,
        **knobs: object,
    ):
        """The sampler knobs (engine.params.KNOBS: k, temperature, steps, ...) are keyword arguments by
        name; the signature lists them (engine.params.with_knobs). Built in the four named steps of
        engine/run_setup.py; with a budget (a server's run) the knobs take the page's ranges."""
        check_types(text=text, model=model, sampler=sampler, domain=domain, draft_model=draft_model,
                    cache=cache, masked_input=masked_input, allow_paths=allow_paths, budget=budget, device=device)
        request = resolve_request(sampler, domain=domain, model=model, seed=seed, cache=cache, knobs=knobs,
                                  served=budget is not None, allow_paths=allow_paths, device=device)
        self.spec, self.seed, self.knobs, self.params = request.spec, request.seed, request.knobs, request.params
        self.lm, self.draft_lm = load_models(self.spec, model, domain=domain, draft_model=draft_model,
                                             allow_paths=allow_paths, device=device)
        self.mi = parse_input(text, masked_input, self.lm)
        self.note = self.mi.note  # what the domain's normaliser changed in `text` ('' if nothing)
        admit(self.mi, self.params, budget)
        self.budget = budget
        self.pause = None  # optional callable run between network passes (its time is not counted)
        self.trace: list[Step] = []
        self.drafter_passes = [0]  # forward passes of the drafting network (bench assd: one-pass drafting shows)
        self.call_shapes: list[tuple[int, int]] = []
        self.call_seconds: list[float] = []  # wall seconds of each AS-ARM call (bench assd prices call shapes by them)
        self.drafter_seconds = [0.0]  # wall seconds of drafting outside the AS-ARM (bench assd)
        self.asarm_seconds = 0.0  # wall seconds inside the AS-ARM's calls (bench assd)
        self.seconds = 0.0
        self.compute_seconds = 0.0  # time spent inside the sampler (what the budget counts)

    def stream(self) -> Iterator[Step]:
        """The run's steps as they happen. With a budget, the run raises BudgetExceededError (an
        InfillError) at the first network pass or step past it; the trace keeps every step so far."""
        ctx = RunContext(lm=self.lm, mi=self.mi, spec=self.spec, knobs=self.knobs, seed=self.seed, draft_lm=self.draft_lm,
                         cache=self.params["cache"])
        self.drafter_passes = ctx.drafter_passes
        self.call_shapes = getattr(ctx.oracle, "shapes", [])  # (content, query) rows per AS-ARM call
        self.call_seconds = getattr(ctx.oracle, "call_seconds", [])
        self.drafter_seconds = ctx.drafter_seconds
        for lm in (self.lm, self.draft_lm):
            if lm is not None and (self.budget is not None or self.pause is not None):
                install(lm.model)
        meter = Meter(self.budget, ctx.calls, self.pause)
        t0 = time.perf_counter()
        steps = ctx.steps()
        while True:
            try:
                with meter:
                    step = next(steps, None)
            finally:
                self.compute_seconds = meter.seconds
            self.asarm_seconds = getattr(ctx.oracle, "seconds", 0.0)
            if step is None:
                break
            self.trace.append(step)
            yield step
            if self.budget is not None:
                self.budget.check(self.compute_seconds, ctx.calls())
        self.seconds = time.perf_counter() - t0

    def result(self, with_log_prob: bool = True) -> InfillResult:
        """The finished (or stopped) run as an InfillResult, read from its trace; with_log_prob adds
        the model's exact joint log-probability of the filled tokens (AS-ARM only)."""
        decided = decided_tokens(self.trace)
        tokens = [decided.get(i, t) for i, t in enumerate(self.mi.tokens)]
        text, spans = self.mi.fill(self.lm.codec, decided)
        counts = trace_counts(self.trace)
        lp = joint_log_prob(self.lm, self.mi, tokens) if with_log_prob and self.lm.kind == "asarm" else None
        return InfillResult(
            text=text, spans=spans, masked_tokens=len(self.mi.masked), calls=counts["calls"],
            rounds=int(counts["rounds"]), seconds=self.seconds, log_prob=lp, sampler=self.spec.name,
            model=self.lm.name, seed=self.seed, params=dict(self.params), source=self.mi.source,
            tokens=tokens, trace=self.trace, counts=counts, model_path=str(self.lm.path), masked_input=self.mi,
            note=self.note,
        )


with_knobs(InfillRun.__init__, after="seed")


def infill(text: str | None = None, **kwargs) -> InfillResult:
    """Fill every [MASK] / [MASK:n] span of `text`. See InfillRun for the keyword arguments (an
    unknown one is a BadParameterError naming it, like every other misuse)."""
    unknown = sorted(set(kwargs) - set(inspect.signature(InfillRun.__init__).parameters) - {"self", "text"})
    if unknown:
        known = [p for p in inspect.signature(InfillRun.__init__).parameters if p not in ("self", "text")]
        raise BadParameterError(f"infill got unknown argument(s) {', '.join(unknown)}; it takes text and "
                                f"{', '.join(known)}.")
    run = InfillRun(text, **kwargs)
    for _ in run.stream():
        pass
    return run.result()


def joint_log_prob(lm: LoadedModel, mi: MaskedInput, tokens: list[int]) -> float:
    """log p(x_masked | x_visible) under the AS-ARM, untempered, in one density pass."""
    oracle = make_oracle(lm, mi, use_cache=False)
    drafts = [(pos, tokens[pos]) for pos in mi.masked]
    logits = oracle.call(drafts, [(pos, i) for i, (pos, _) in enumerate(drafts)])
    logp = torch.log_softmax(logits, dim=-1)
    return float(sum(logp[i, tok] for i, (_, tok) in enumerate(drafts)))


def score(
    text: str | None = None,
    ranges: list[tuple[int, int]] | None = None,
    *,
    model: str | None = None,
    domain: str = "text",
    result: InfillResult | None = None,
    sampler: str | None = None,
    **kwargs,
) -> float:
    """Log-probability of a completed infill: either `result` (exact token ids), or a completed
    `text` with the character `ranges` that were filled (re-tokenized, under the law infill samples:
    a range at the start of the text, or of a line in prose, that begins with a space is read as a
    typed " [MASK]" there, owning that space, so a run's own fill scores its run's log-probability).
    With sampler="self-spec" it is the self-speculative sampler's own
    likelihood of producing it."""
    check_types(text=text, model=model, domain=domain)
    if result is not None and not isinstance(result, InfillResult):
        raise BadParameterError(f"result must be an InfillResult, got {type(result).__name__}.")
    if sampler not in (None, "self-spec") and not isinstance(sampler, str):
        raise BadParameterError(f"sampler must be a sampler name (a string), got {type(sampler).__name__}.")
    if ranges is not None and not (isinstance(ranges, (list, tuple)) and all(
            isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
            for r in ranges)):
        raise BadParameterError("ranges must be a list of (start, end) character offsets, whole numbers.")
    if sampler == "self-spec":
        from .samplers.selfspec_likelihood import score_self_spec

        return score_self_spec(text, ranges, model=model, domain=domain, result=result, **kwargs)
    if result is not None:
        lm = load(model or result.model_path or result.model)
        return joint_log_prob(lm, result.input_for(lm), result.tokens)
    if text is None or not ranges:
        raise BadParameterError("score needs a completed text and the character ranges that were filled.")
    lm = load(model or default_model(domain, "asarm"))
    mi, tokens = completed_from_ranges(text, ranges, lm.codec, max_tokens=lm.max_tokens,
                                       after_newline=unindented(lm.domain))
    return joint_log_prob(lm, mi, tokens)
