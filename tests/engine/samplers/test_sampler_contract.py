"""The contract every sampler of the catalogue (engine.samplers.SAMPLERS) keeps, checked on tiny models.

Parametrised over the whole catalogue, so a new sampler is held to it without a line here: it runs on
its model kind (and its drafting model, SamplerSpec.second), keeps calls <= masked tokens when its entry
promises so (calls_bounded), records a well-formed trace (`trace_problems` below: every masked
position decided exactly once, positions inside the mask, verdicts only on drafted tokens, in draft
order, a rejection followed by its resample, calls moving only at network passes), and is refused
before it runs, with the engine's IncompatibleModelsError, on a model of the wrong kind.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from engine.api import InfillRun
from engine.errors import IncompatibleModelsError
from engine.exactness.wrong_samplers import WRONG_SAMPLERS
from engine.inputs.masking import MaskedInput
from engine.loading import registry
from engine.params import settle
from engine.samplers import SAMPLERS
from engine.samplers.context import RunContext
from engine.samplers.drafter_contract import Drafter
from engine.samplers.drafters import DRAFTERS, build_drafter
from engine.samplers.spec import SamplerSpec, knob_names, knob_problems
from engine.trace import DECIDING_KINDS, PASS_KINDS, Step, StepKind
from tests.engine.samplers.test_hybrid import save_tiny_hybrid
from tests.engine.samplers.test_ptp import save_tiny_ptp
from tests.support.tiny import masked_input

#: visible characters of the length-6 inputs: one, none, both ends, a gap in the middle
VISIBLE = [{1: "c"}, {}, {0: "a", 5: "b"}, {2: "b", 3: "a"}]
SEEDS = range(3)
KS = (1, 2, 4)
VERDICTS = (StepKind.ACCEPT, StepKind.REJECT)


@pytest.fixture(scope="module")
def models(tiny_asarm, tmp_path_factory):
    """The tiny model of every kind a sampler drives or drafts with (all on the 'abc' tokenizer)."""
    root = tmp_path_factory.mktemp("contract")
    hybrid = registry.load(str(save_tiny_hybrid(root / "tiny-hybrid", seed=3)))
    return {"asarm": tiny_asarm, "hybrid": hybrid, "ptp": save_tiny_ptp(root / "tiny-ptp", tiny_asarm)}


def _run(models, name: str, mi: MaskedInput, seed: int, k: int, model=None, draft=None) -> InfillRun:
    spec = SAMPLERS[name]
    assert spec.kind in models, f"no tiny {spec.kind} model for {name}: add one to the fixture"
    if draft is None and spec.second is not None:
        draft = models[spec.second.kind]
    return InfillRun(masked_input=mi, model=model or models[spec.kind], sampler=name, seed=seed, k=k,
                     draft_model=draft, steps=2 if spec.second is not None else None)


def trace_problems(trace: list[Step], mi: MaskedInput, special: set[int]) -> list[str]:
    """Every way `trace` breaks the trace grammar (empty: well formed)."""
    bad: list[str] = []
    masked = set(mi.masked)
    decided: dict[int, int] = {}
    draft: dict[int, int] = {}  # position -> token of the round's latest DRAFT step
    draft_order: list[int] = []
    judged = 0  # verdicts given on the latest DRAFT so far (they walk it left to right)
    stopped = False  # a rejection ended the verification of the latest DRAFT
    prev: Step | None = None
    for i, s in enumerate(trace):
        where = f"step {i} ({s.kind.value}, round {s.round})"
        if prev is not None and not (prev.round <= s.round <= prev.round + 1):
            bad.append(f"{where}: round jumps from {prev.round}")
        if s.kind in PASS_KINDS:
            if s.positions or s.tokens:
                bad.append(f"{where}: a network pass carries tokens")
            if s.calls <= (prev.calls if prev else 0.0):
                bad.append(f"{where}: a network pass that costs no call ({s.calls})")
        else:
            if prev is not None and s.calls != prev.calls:
                bad.append(f"{where}: calls moved without a network pass ({prev.calls} -> {s.calls})")
            if not s.positions or len(s.positions) != len(s.tokens):
                bad.append(f"{where}: positions and tokens do not pair up")
        if not set(s.positions) <= masked:
            bad.append(f"{where}: positions {sorted(set(s.positions) - masked)} are outside the mask")
        if any(v is not None and not 0.0 <= v <= 1.0 + 1e-9 for v in s.p + s.q):
            bad.append(f"{where}: a probability outside [0, 1]")
        if s.kind == StepKind.DRAFT:
            draft, draft_order, judged, stopped = dict(zip(s.positions, s.tokens)), list(s.positions), 0, False
            if set(s.positions) & set(decided):
                bad.append(f"{where}: drafts an already decided position")
        if s.kind in VERDICTS:
            pos, tok = s.positions[0], s.tokens[0]
            if len(s.positions) != 1 or draft.get(pos) != tok:
                bad.append(f"{where}: a verdict on ({pos}, {tok}), which the round did not draft")
            elif stopped or draft_order.index(pos) != judged:
                bad.append(f"{where}: verdicts do not walk the drafts left to right, stopping at a rejection")
            judged += 1
            if s.tested and (s.p[0] is None or s.q[0] is None or not s.p[0] > 0):
                bad.append(f"{where}: a tested verdict without its p > 0 and q")
        if s.kind == StepKind.REJECT:
            stopped = True
            nxt = trace[i + 1] if i + 1 < len(trace) else None
            if nxt is None or nxt.kind != StepKind.RESAMPLE or nxt.positions != s.positions or nxt.tokens == s.tokens:
                bad.append(f"{where}: a rejection not followed by a resample of that position with another token")
        if s.kind == StepKind.RESAMPLE and (prev is None or prev.kind != StepKind.REJECT):
            bad.append(f"{where}: a resample without a rejection just before it")
        if s.kind in DECIDING_KINDS:
            for pos, tok in zip(s.positions, s.tokens):
                if pos in decided:
                    bad.append(f"{where}: position {pos} decided a second time")
                if tok in special:
                    bad.append(f"{where}: special token {tok} written at {pos}")
                decided[pos] = tok
        prev = s
    if set(decided) != masked:
        bad.append(f"masked positions never decided: {sorted(masked - set(decided))}")
    return bad


def _check_run(run: InfillRun, mi: MaskedInput) -> None:
    steps = list(run.stream())
    res = run.result(with_log_prob=False)
    problems = trace_problems(steps, mi, set(run.lm.codec.special_ids))
    assert not problems, f"{run.spec.name}: " + "; ".join(problems[:5])
    assert steps == res.trace and res.calls == steps[-1].calls
    decided = {p: t for s in steps if s.kind in DECIDING_KINDS for p, t in zip(s.positions, s.tokens)}
    assert res.tokens == [decided.get(i, t) for i, t in enumerate(mi.tokens)]
    if run.spec.calls_bounded:  # the promise of its catalogue entry
        assert res.calls <= len(mi.masked), (run.spec.name, res.calls, len(mi.masked))


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_sampler_keeps_the_contract_on_its_model_kind(models, name):
    codec = models["asarm"].codec
    for visible in VISIBLE:
        mi = masked_input(codec, visible, 6)
        for seed in SEEDS:
            for k in KS if "k" in SAMPLERS[name].reads else KS[:1]:
                _check_run(_run(models, name, mi, seed, k), mi)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_sampler_refuses_a_model_of_the_wrong_kind_before_it_runs(models, name):
    spec = SAMPLERS[name]
    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    for kind, lm in models.items():
        if kind == spec.kind:
            continue
        with pytest.raises(IncompatibleModelsError, match=f"{lm.name} is a {lm.kind} model; {name} needs"):
            _run(models, name, mi, 0, 2, model=lm)
    if spec.second is not None:  # its drafting model too: every other kind is refused, naming the one it takes
        for kind, lm in models.items():
            if kind != spec.second.kind:
                with pytest.raises(IncompatibleModelsError, match=f"{lm.name} is a {lm.kind} model"):
                    _run(models, name, mi, 0, 2, draft=lm)


@pytest.mark.parametrize("name", list(DRAFTERS))
def test_every_drafter_keeps_the_drafter_contract(models, name):
    """Built from a run in DRAFTERS, a Drafter (the protocol) proposing one probability row per
    position, whose draft it is, and counting its calls."""
    spec = next(s for s in SAMPLERS.values() if getattr(s.run, "__name__", "") == f"assd_{name}")
    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    ctx = RunContext(lm=models["asarm"], mi=mi, spec=spec, knobs=settle({"temperature": 1.0, "k": 3, "steps": 2}), seed=0,
                     draft_lm=models[spec.second.kind] if spec.second else None, cache=True)
    drafter = build_drafter(name, ctx, ctx.knobs)
    assert isinstance(drafter, Drafter)
    known = [None if i in mi.masked else t for i, t in enumerate(mi.tokens)]
    before = drafter.passes
    drafts, rows, spent = drafter.propose(known, mi.masked[:3], torch.Generator().manual_seed(0))
    assert len(drafts) == len(rows) == 3 and spent >= 0 and drafter.passes >= before
    assert (spent > 0) == (drafter.passes > before)
    for d, row in zip(drafts, rows):
        assert abs(float(row.sum()) - 1) < 1e-9 and float(row[d]) > 0
        assert all(float(row[t]) == 0 for t in models["asarm"].codec.special_ids)


# ---------------------------------------------------------------- the checker itself catches broken traces
def _good(models):
    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    run = _run(models, "assd", mi, 1, 3)
    return list(run.stream()), mi, set(run.lm.codec.special_ids)


def _broken(trace, edit):
    trace = [Step(**{**s.__dict__, "positions": list(s.positions), "tokens": list(s.tokens)}) for s in trace]
    edit(trace)
    return trace


def _first(trace, kind):
    return next(i for i, s in enumerate(trace) if s.kind == kind)


@pytest.mark.parametrize("what,edit", [
    ("never decided", lambda t: t.pop(max(i for i, s in enumerate(t) if s.kind in DECIDING_KINDS))),
    ("second time", lambda t: t.append(t[max(i for i, s in enumerate(t) if s.kind in DECIDING_KINDS)])),
    ("outside the mask", lambda t: t[_first(t, StepKind.DRAFT)].positions.__setitem__(0, 1)),
    ("did not draft", lambda t: t[_first(t, StepKind.ACCEPT)].tokens.__setitem__(0, 3)),
    ("costs no call", lambda t: setattr(t[_first(t, StepKind.DENSITY_PASS)], "calls", 1.0)),
    ("without a network pass", lambda t: setattr(t[-1], "calls", t[-1].calls + 1)),
])
def test_the_trace_checker_catches_a_broken_trace(models, what, edit):
    trace, mi, special = _good(models)
    assert not trace_problems(trace, mi, special)
    assert any(what in p for p in trace_problems(_broken(trace, edit), mi, special))


def test_the_page_warns_of_extra_calls_exactly_where_the_catalogue_makes_no_promise():
    """A catalogue entry either promises calls <= masked tokens (the run test above holds it) or says
    why not in its calls_note, and the page's help line says exactly that note, for exactly those."""
    from app.choices import sampler_help

    unbounded = {n for n, s in SAMPLERS.items() if not s.calls_bounded}
    assert unbounded == {"mdm", "self-spec", "assd-diffusion"}
    for name, spec in SAMPLERS.items():
        said = sampler_help(name)
        if name in unbounded:
            assert spec.calls_note.startswith("Its calls can exceed the tokens it fills") and spec.calls_note in said
        else:
            assert "exceed" not in said, name


@pytest.mark.parametrize("name", [n for n, s in SAMPLERS.items() if s.second is not None])
def test_a_missing_drafter_is_refused_naming_its_kind_and_how_to_make_one(models, name, monkeypatch):
    import engine.run_setup as run_setup
    from engine.errors import ModelNotFoundError

    def none_bundled(domain, kind):
        raise ModelNotFoundError(f"no {domain}-{kind}")

    monkeypatch.setattr(run_setup, "default_model", none_bundled)
    spec = SAMPLERS[name]
    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    with pytest.raises(ModelNotFoundError, match=f"{name} drafts with a {spec.second.kind} model") as e:
        InfillRun(masked_input=mi, model=models["asarm"], sampler=name)
    assert spec.second.how.format(model=models["asarm"].name) in str(e.value)


def _ctx(models, name: str, mi: MaskedInput, temperature: float, k: int, seed: int = 4):
    spec = next(s for s in SAMPLERS.values() if getattr(s.run, "__name__", "") == f"assd_{name}")
    return RunContext(lm=models["asarm"], mi=mi, spec=spec, knobs=settle({"temperature": temperature, "k": k, "steps": 2}),
                      seed=seed, draft_lm=models[spec.second.kind] if spec.second else None, cache=True)


@pytest.mark.parametrize("name", list(DRAFTERS))
def test_drafted_is_assd_with_the_named_drafter_and_the_runs_knobs(models, name):
    """The catalogue's run function `drafted(name)` (built at import) is plain ASSD fed by
    build_drafter(name), with the run's generator, temperature, k and counters: the same steps, the
    same drafter passes, as calling assd_drafted by hand. T = 0.7 and k = 2, so a dropped knob shows."""
    from engine.samplers.assd import assd_drafted

    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    got_ctx, want_ctx = _ctx(models, name, mi, 0.7, 2), _ctx(models, name, mi, 0.7, 2)
    got = list(got_ctx.steps())
    w = want_ctx
    want = list(assd_drafted(w.oracle, w.mi, w.rec, w.gen, 0.7, 2, build_drafter(name, w, w.knobs), w.extra_calls,
                             w.drafter_passes))
    assert [(s.kind, s.positions, s.tokens, s.p, s.q) for s in got] == \
           [(s.kind, s.positions, s.tokens, s.p, s.q) for s in want]
    assert (got_ctx.drafter_passes, got_ctx.extra_calls) == (w.drafter_passes, w.extra_calls)
    assert max(len(s.positions) for s in got if s.kind == StepKind.DRAFT) == 2, "k = 2 drafts a round"


def test_the_diffusion_drafter_says_what_it_needs(models):
    from engine.samplers.drafters import build_drafter as build

    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    ctx = _ctx(models, "diffusion", mi, 1.0, 2)
    ctx.draft_lm = None
    with pytest.raises(IncompatibleModelsError, match=r"assd-diffusion needs a hybrid draft model \(--draft-model\)"):
        build("diffusion", ctx, ctx.knobs)
    long = masked_input(models["asarm"].codec, {1: "c"}, models["hybrid"].max_tokens + 1)
    ctx = _ctx(models, "diffusion", long, 1.0, 2)
    with pytest.raises(IncompatibleModelsError, match=rf"The input is {len(long.tokens)} tokens; the draft model "
                                                      rf"{models['hybrid'].name} takes at most {models['hybrid'].max_tokens}\."):
        build("diffusion", ctx, ctx.knobs)


# ------------------------------------------------------------ an entry's knobs are its run function's arguments
@pytest.mark.parametrize("name", [*SAMPLERS, *WRONG_SAMPLERS])
def test_an_entrys_knobs_are_its_samplers_typed_keyword_arguments(name):
    """Each entry names its knobs once, as its run function's keyword-only arguments, each a row of
    engine.params.KNOBS annotated with the row's type and without a default of its own; `params`
    (what the page shows, the CLI lists, the run records) is read from that signature."""
    spec = {**SAMPLERS, **WRONG_SAMPLERS}[name]
    assert knob_problems(spec.run) == [], name
    sig = inspect.signature(spec.run).parameters
    assert spec.reads == tuple(n for n, p in sig.items() if p.kind is p.KEYWORD_ONLY) and spec.reads
    assert "temperature" in spec.reads


@pytest.mark.parametrize("name", list(DRAFTERS))
def test_a_drafter_builders_knobs_keep_the_same_rule_and_reach_its_entry(name):
    build = DRAFTERS[name]
    assert knob_problems(build) == [], name
    entry = next(s for s in SAMPLERS.values() if getattr(s.run, "__name__", "") == f"assd_{name}")
    assert set(knob_names(build)) <= set(entry.reads)


def test_the_signature_check_refuses_what_breaks_the_rule():
    """knob_problems is not vacuous: an unknown knob, a wrong type, a default of its own, a knob
    hidden in **kwargs, a second positional argument are each named."""
    def unknown(ctx, *, k: int, beta: float): ...
    def wrong_type(ctx, *, k: float, temperature: float): ...
    def own_default(ctx, *, k: int = 3, temperature: float): ...
    def hidden(ctx, **knobs): ...
    def positional(ctx, k, *, temperature: float): ...
    def untyped(ctx, *, k, temperature: float): ...

    assert knob_problems(unknown) == ["beta is not a knob of engine.params.KNOBS"]
    assert knob_problems(wrong_type) == ["k is annotated 'float'; its table type is int"]
    assert knob_problems(own_default) == ["k has a default of its own (3); the table's is the default"]
    assert knob_problems(hidden) == ["*knobs: every knob is named in the signature"]
    assert knob_problems(positional) == ["takes 2 positional parameters; a run function takes the context only"]
    assert knob_problems(untyped) and "annotated" in knob_problems(untyped)[0]
    entry = SamplerSpec(name="x", kind="asarm", cache=False, help="help", run=wrong_type)
    assert entry.reads == ("k", "temperature")


def test_a_run_passes_each_knob_by_name_and_only_those_its_entry_reads(models):
    """RunContext.steps() calls the entry's run function with exactly its knobs, by name, from the
    run's values (a sampler reading k gets the run's k, not the table's default)."""
    seen = {}

    def spy(ctx, *, k: int, temperature: float):
        seen.update(k=k, temperature=temperature)
        return iter(())

    spec = SamplerSpec(name="spy", kind="asarm", cache=False, help="help", run=spy)
    mi = masked_input(models["asarm"].codec, {1: "c"}, 6)
    ctx = RunContext(lm=models["asarm"], mi=mi, spec=spec, knobs=settle({"k": 7, "temperature": 0.3, "dtau": 0.5}), seed=0,
                     cache=False)
    assert list(ctx.steps()) == [] and seen == {"k": 7, "temperature": 0.3}
    ctx = RunContext(
        lm=models["asarm"], mi=mi, spec=spec, knobs=settle({}), seed=0, cache=False
    )  # not given: the table's default
    list(ctx.steps())
    assert seen == {"k": 5, "temperature": 1.0}
    with pytest.raises(TypeError, match="settled"):  # a dict would skip the one place defaults are filled
        RunContext(lm=models["asarm"], mi=mi, spec=spec, knobs={"k": 7}, seed=0, cache=False)


@pytest.fixture(scope="module")
def tiny_xlnet(tmp_path_factory):
    """A tiny random Hugging Face XLNet on the same 'abc' tokenizer (the adapter, cached and uncached)."""
    from tests.engine.models.test_xlnet_adapter import save_tiny_xlnet

    return registry.load(str(save_tiny_xlnet(tmp_path_factory.mktemp("contract-xl") / "tiny-xlnet")))


@pytest.mark.parametrize("name", [n for n, s in SAMPLERS.items() if s.kind == "asarm"])
def test_every_asarm_sampler_keeps_the_contract_on_an_xlnet(models, tiny_xlnet, name):
    """The XLNet path (the ASSD paper's model family) is held to the same contract, every AS-ARM
    sampler of the catalogue, the cached ones through the cached XLNet forward. The one refusal: a
    PTP head is trained on a native AS-ARM's states, so assd-ptp says so before it runs."""
    codec = tiny_xlnet.codec
    if name == "assd-ptp":
        with pytest.raises(IncompatibleModelsError, match="needs a native AS-ARM"):
            _run({**models, "asarm": tiny_xlnet}, name, masked_input(codec, {1: "c"}, 6), 0, 2)
        return
    for visible in VISIBLE:
        mi = masked_input(codec, visible, 6)
        for seed in SEEDS[:2]:
            for k in KS if "k" in SAMPLERS[name].reads else KS[:1]:
                _check_run(_run({**models, "asarm": tiny_xlnet}, name, mi, seed, k), mi)
