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

from engine.inputs.domains import default_span, line_masks
from engine.inputs.masking import MaskedInput, Span, completed_from_ranges, parse_masked_text
from engine.loading.loaded_model import LoadedModel
from engine.loading.registry import default_model, load
from engine.samplers.oracle import AsArmOracle

from .budget import Budget, Meter, install
from .errors import BadParameterError, IncompatibleModelsError, ModelNotFoundError
from .params import KNOBS, LIMITS, read_knobs, recorded, seed_number, whole_number, with_knobs  # noqa: F401 (LIMITS: re-exported)
from .samplers import DOMAIN_DEFAULT, SAMPLERS, SamplerSpec, default_sampler
from .samplers.base import Recorder
from .seeding import generator_for
from .trace import Step, decided_tokens, trace_counts

# LIMITS (imported above, re-exported): the knobs' accepted ranges, engine.params.KNOBS


def parse_for(text: str, lm: LoadedModel) -> MaskedInput:
    """Text with [MASK] / [MASK:n] sentinels as this model takes it (its tokenizer, its length, its
    domain's default span)."""
    return parse_masked_text(text, lm.codec, max_tokens=lm.max_tokens, default_span=default_span(lm.domain),
                             line_masks=line_masks(lm.domain))


@dataclass
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
        }
        if with_steps:
            d["steps"] = [s.to_dict() for s in self.trace]
        return d


#: InfillRun's arguments that are not numbers: what each must be (None always allowed except where noted)
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "text": ((str,), "a string"),
    "model": ((str, LoadedModel), "a model name, folder or Hub id (a string), "
              "or a loaded model (engine.loading.loaded_model.LoadedModel)"),
    "sampler": ((str,), "a sampler name (a string)"),
    "domain": ((str,), "a domain name (a string)"),
    "draft_model": ((str, LoadedModel), "a model name, folder or Hub id (a string), or a loaded model"),
    "cache": ((bool,), "True or False"),
    "masked_input": ((MaskedInput,), "an engine.inputs.masking.MaskedInput"),
    "allow_paths": ((bool,), "True or False"),
    "budget": ((Budget,), "an engine.budget.Budget"),
    "device": ((str, torch.device), "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device"),
}
_REQUIRED = {"sampler", "allow_paths"}


def _check_types(**values) -> None:
    """BadParameterError (the engine's error, not a TypeError mid-run) for an argument of the wrong type."""
    for name, v in values.items():
        types, what = _TYPES[name]
        if v is None and name not in _REQUIRED:
            continue
        if not isinstance(v, types):
            raise BadParameterError(f"{name} must be {what}, got {type(v).__name__}.")


class RunContext:
    """Everything one sampler run reads; samplers take what they need from it."""

    def __init__(self, lm: LoadedModel, mi: MaskedInput, spec: SamplerSpec, params: dict, seed: int,
                 draft_lm: LoadedModel | None = None):
        self.lm, self.mi, self.spec, self.draft_lm = lm, mi, spec, draft_lm
        self.gen = generator_for(seed)
        # every knob of engine.params.KNOBS as an attribute (ctx.k, ctx.dtau ...): the run's value, else
        # the table's default (steps: the sampler's own)
        for name, knob in KNOBS.items():
            setattr(self, name, params.get(name, spec.default_steps if name == "steps" else knob.default))
        self.temperature = params["temperature"]
        self.extra_calls = [0.0]  # calls of a second network (drafters), fractional allowed
        self.drafter_passes = [0]  # forward passes of a drafting network (PTP head, diffusion drafter)
        self.oracle = make_oracle(lm, mi, params["cache"]) if spec.kind == "asarm" else None
        self.counter = None  # hybrid samplers install their own call counter
        self.rec = Recorder(lm.codec.token_text, self.calls)

    def calls(self) -> float:
        """Network calls so far, in the run's units: the oracle's or the hybrid's counter plus a
        drafter's own calls."""
        base = self.oracle.calls if self.oracle is not None else (self.counter() if self.counter else 0.0)
        return base + self.extra_calls[0]


def _default_drafter(lm: LoadedModel, spec: SamplerSpec) -> str:
    """The bundled drafter of the model's domain (the catalogue's SecondModel kind), or a message saying
    what is missing."""
    kind, sampler = spec.second.kind, spec.name
    try:
        return default_model(lm.domain, kind)
    except ModelNotFoundError:
        how = f" ({spec.second.how.format(model=lm.name)})" if spec.second.how else ""
        raise ModelNotFoundError(
            f"{sampler} drafts with a {kind} model and none is available for the {lm.domain!r} domain "
            f"(expected {lm.domain}-{kind}); pass draft_model=... or train one{how}.") from None


#: what each model kind is, in the words of a refusal
_KIND_WORDS = {"asarm": "an AS-ARM", "hybrid": "a hybrid (self-speculative masked diffusion) model"}


def _require_kind(lm: LoadedModel, spec: SamplerSpec) -> None:
    """IncompatibleModelsError, before anything runs, for a model of another kind than the sampler drives."""
    if lm.kind != spec.kind:
        raise IncompatibleModelsError(
            f"{lm.name} is a {lm.kind} model; {spec.name} needs {_KIND_WORDS.get(spec.kind, 'a ' + spec.kind)}.")


def _loaded(model: str | LoadedModel, allow_paths: bool, device) -> LoadedModel:
    """A model as the run takes it: one the caller already holds is used as it is (no second trip
    through the registry), a name, folder or Hub id is loaded."""
    return model if isinstance(model, LoadedModel) else load(model, allow_paths, device)


def make_oracle(lm: LoadedModel, mi: MaskedInput, use_cache: bool):
    """The density oracle an AS-ARM sampler drives: our AS-ARM (cached or not) or an XLNet adapter;
    refuses a model that is not an AS-ARM."""
    if lm.kind != "asarm":
        raise IncompatibleModelsError(f"{lm.name} is a {lm.kind} model; this sampler needs an AS-ARM.")
    if lm.model_type == "xlnet":
        from .models.xlnet_adapter import XLNetOracle

        return XLNetOracle(lm.model, mi, lm.codec)
    return AsArmOracle(lm.model, mi, use_cache=use_cache)


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
        name; the signature lists them (engine.params.with_knobs)."""
        unknown = sorted(set(knobs) - set(KNOBS))
        if unknown:
            raise BadParameterError(f"InfillRun got unknown argument(s) {', '.join(unknown)}; its sampler knobs "
                                    f"are {', '.join(KNOBS)}.")
        _check_types(text=text, model=model, sampler=sampler, domain=domain, draft_model=draft_model,
                     cache=cache, masked_input=masked_input, allow_paths=allow_paths,
                     budget=budget, device=device)
        if sampler == DOMAIN_DEFAULT:  # the domain's default (engine.samplers.DEFAULT_SAMPLERS)
            sampler = default_sampler(domain or (_loaded(model, allow_paths, device).domain if model else "text"))
        if sampler not in SAMPLERS:
            raise BadParameterError(f"Unknown sampler {sampler[:40]!r}. Choose one of: {', '.join(SAMPLERS)}.")
        self.spec = spec = SAMPLERS[sampler]
        seed = seed_number(seed)
        values = read_knobs(knobs)  # each knob read by the table's type and range, or its default
        if values["steps"] is None:
            values["steps"] = spec.default_steps
        # model: a LoadedModel is used as it is; a name is loaded on `device`: "auto" | "cpu" | "cuda[:N]" |
        # a torch.device; None reads INFILL_DEVICE (engine/loading/device.py)
        self.lm = _loaded(model or default_model(domain or "text", spec.kind), allow_paths, device)
        _require_kind(self.lm, spec)
        self.draft_lm = None
        if spec.second is not None:  # the drafting network (engine.samplers.drafting.SecondModel) and its fit
            self.draft_lm = _loaded(draft_model or _default_drafter(self.lm, spec), allow_paths, device)
            spec.second.check(self.lm, self.draft_lm)
        if masked_input is None:
            if text is None:
                raise BadParameterError("Give the text to fill (with [MASK] or [MASK:n]).")
            masked_input = parse_for(text, self.lm)
        elif masked_input.mask_id != self.lm.codec.mask_id:  # prepared for another tokenizer
            raise BadParameterError(
                f"masked_input was prepared with mask id {masked_input.mask_id}; {self.lm.name}'s is "
                f"{self.lm.codec.mask_id}: prepare it with this model's tokenizer (engine.api.parse_for).")
        self.mi = masked_input
        self.seed = seed
        # what the run records: k and temperature always (the sessions list shows them), the cache, and
        # every knob its sampler reads (with the rest of that knob's group: engine.params.recorded)
        self.params = {n: values[n] for n in recorded({"k", "temperature", *spec.params})}
        self.params["cache"] = spec.cache if cache is None else cache
        self.budget = budget
        if budget is not None:
            budget.check_params(len(self.mi.masked), self.params)
        self.pause = None  # optional callable run between network passes (its time is not counted)
        self.trace: list[Step] = []
        self.drafter_passes = [0]  # forward passes of the drafting network (bench assd: one-pass drafting shows)
        self.call_shapes: list[tuple[int, int]] = []
        self.seconds = 0.0
        self.compute_seconds = 0.0  # time spent inside the sampler (what the budget counts)

    def stream(self) -> Iterator[Step]:
        """The run's steps as they happen. With a budget, the run raises BudgetExceededError (an
        InfillError) at the first network pass or step past it; the trace keeps every step so far."""
        ctx = RunContext(self.lm, self.mi, self.spec, self.params, self.seed, self.draft_lm)
        self.drafter_passes = ctx.drafter_passes
        self.call_shapes = getattr(ctx.oracle, "shapes", [])  # (content, query) rows per AS-ARM call
        for lm in (self.lm, self.draft_lm):
            if lm is not None and (self.budget is not None or self.pause is not None):
                install(lm.model)
        meter = Meter(self.budget, ctx.calls, self.pause)
        t0 = time.perf_counter()
        steps = self.spec.run(ctx)
        while True:
            try:
                with meter:
                    step = next(steps, None)
            finally:
                self.compute_seconds = meter.seconds
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
    `text` with the character `ranges` that were filled (re-tokenized). With sampler="self-spec"
    it is the self-speculative sampler's own likelihood of producing it."""
    _check_types(text=text, model=model, domain=domain)
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
    mi, tokens = completed_from_ranges(text, ranges, lm.codec, max_tokens=lm.max_tokens)
    return joint_log_prob(lm, mi, tokens)
