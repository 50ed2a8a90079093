"""Exactness of the self-speculative sampler against its Proposition 3.1 likelihood, and of the
diffusion-drafted ASSD against the AS-ARM's exact distribution (tiny models, enumerated)."""

from __future__ import annotations

import itertools
import math
import types
from collections import Counter

import pytest
import torch

import engine.samplers.selfspec as selfspec_mod
from engine.errors import IncompatibleModelsError
from engine.samplers.assd import assd_drafted
from engine.samplers.base import Recorder
from engine.samplers.diffusion_drafter import DiffusionDrafter, check_pair
from engine.samplers.hybrid_passes import CallCounter
from engine.samplers.oracle import AsArmOracle
from engine.samplers.selfspec import self_spec, window_size
from engine.samplers.selfspec_likelihood import log_prob_given_order, log_prob_marginal
from engine.trace import DECIDING_KINDS, StepKind
from tests.engine.samplers.test_hybrid import tiny_hybrid
from tests.support.tiny import ALPHABET, exact_distribution, g_test, masked_input, residual_from_q, save_tiny_asarm, tiny_codec


def _symbols(codec):
    return [codec.encode(ch)[0] for ch in ALPHABET]


def _sample(model, mi, gen, order=None, **kw):
    counter = CallCounter()
    rec = Recorder(lambda t: "", counter)
    trace = list(self_spec(model, mi, rec, gen, kw.get("temperature", 1.0), kw["dtau"], kw["window"], kw["inner"],
                           counter, order=order))
    dec = {}
    for s in trace:
        if s.kind in DECIDING_KINDS:
            dec.update(zip(s.positions, s.tokens))
    return trace, tuple(dec[p] for p in mi.masked), counter


def _exact(model, mi, order, **kw):
    codec = tiny_codec()
    out = {}
    for combo in itertools.product(_symbols(codec), repeat=len(mi.masked)):
        toks = list(mi.tokens)
        for p, t in zip(mi.masked, combo):
            toks[p] = t
        out[combo] = math.exp(log_prob_given_order(model, mi, toks, order, **kw))
    return out


SETTINGS = [
    dict(dtau=1.0, window="linear", inner=2, temperature=0.5),  # one window over everything, two loops
    dict(dtau=0.5, window="linear", inner=1, temperature=0.7),
    dict(dtau=0.6, window="cosine", inner=3),
]
ORDER = [3, 0, 2]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def setup():
    codec = tiny_codec()
    model = tiny_hybrid(seed=1, length=4)
    mi = masked_input(codec, {1: "b"}, 4)  # 3 masked positions: 27 outcomes
    return codec, model, mi


@pytest.mark.parametrize("kw", SETTINGS)
def test_likelihood_sums_to_one(setup, kw):
    _, model, mi = setup
    probs = _exact(model, mi, ORDER, **kw)
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-9)


def test_marginal_likelihood_sums_to_one():
    codec = tiny_codec()
    model = tiny_hybrid(seed=2, length=4)
    mi = masked_input(codec, {2: "a"}, 4)
    total = 0.0
    for combo in itertools.product(_symbols(codec), repeat=3):
        toks = list(mi.tokens)
        for p, t in zip(mi.masked, combo):
            toks[p] = t
        total += math.exp(log_prob_marginal(model, mi, toks, dtau=1.0, window="linear", inner=2))
    assert math.isclose(total, 1.0, abs_tol=1e-9)


N = 1500


@pytest.mark.parametrize("kw", SETTINGS[:1])
def test_self_spec_frequencies_match_likelihood(setup, kw):
    _, model, mi = setup
    order = ORDER
    probs = _exact(model, mi, order, **kw)
    gen = torch.Generator().manual_seed(11)
    counts = Counter(_sample(model, mi, gen, order=order, **kw)[1] for _ in range(N))
    assert g_test(counts, probs, N) > 1e-3


def test_wrong_resampling_rule_fails(setup, monkeypatch):
    _, model, mi = setup
    kw = SETTINGS[0]
    order = ORDER
    probs = _exact(model, mi, order, **kw)
    monkeypatch.setattr(selfspec_mod, "speculative_accept", residual_from_q)
    gen = torch.Generator().manual_seed(11)
    counts = Counter(_sample(model, mi, gen, order=order, **kw)[1] for _ in range(N))
    assert g_test(counts, probs, N) < 1e-4


def test_random_order_matches_marginal_likelihood_and_calls():
    codec = tiny_codec()
    model = tiny_hybrid(seed=3, length=4)
    mi = masked_input(codec, {0: "c"}, 4)  # 3 masked: 27 outcomes, 6 orders
    kw = dict(dtau=0.6, window="cosine", inner=3)  # several outer iterations
    probs = {}
    for combo in itertools.product(_symbols(codec), repeat=3):
        toks = list(mi.tokens)
        for p, t in zip(mi.masked, combo):
            toks[p] = t
        probs[combo] = math.exp(log_prob_marginal(model, mi, toks, **kw))
    gen = torch.Generator().manual_seed(5)
    counts, cfg = Counter(), model.config
    for _ in range(1200):
        trace, out, counter = _sample(model, mi, gen, **kw)
        counts[out] += 1
        n_nc = sum(s.kind == StepKind.NC_PASS for s in trace)
        n_c = sum(s.kind == StepKind.CAUSAL_PASS for s in trace)
        assert math.isclose(trace[-1].calls, n_nc * cfg.nc_share + n_c * cfg.causal_share)
        assert math.isclose(counter.calls, trace[-1].calls)
        assert n_c <= kw["inner"] * n_nc
    assert g_test(counts, probs, 1200) > 1e-3


def test_windows():
    assert window_size(0, 100, 0.05, "linear") == 5
    assert window_size(99, 100, 0.5, "linear") == 1
    ws = [window_size(i, 256, 0.05, "cosine") for i in range(0, 256, 32)]
    assert ws[0] == 1 and all(a <= b for a, b in zip(ws, ws[1:])) and ws[-1] > 5
    # the number of non-causal passes with the cosine window is about 1/dtau (+ the w = 1 start)
    i, passes = 0, 0
    while i < 256:
        i += window_size(i, 256, 0.05, "cosine")
        passes += 1
    assert 15 <= passes <= 60


# ---------------------------------------------------------------- diffusion-drafted ASSD
def test_diffusion_drafted_assd_is_exact(tmp_path):
    from engine.loading.registry import load

    codec = tiny_codec()
    lm = load(str(save_tiny_asarm(tmp_path / "asarm", seed=4, length=4)))
    hybrid = tiny_hybrid(seed=5, length=4)
    mi = masked_input(codec, {2: "a"}, 4)  # 3 masked: 27 outcomes
    probs = exact_distribution(lm, mi)
    drafter = DiffusionDrafter(hybrid, steps=2)
    gen = torch.Generator().manual_seed(9)
    counts, n = Counter(), 700
    for _ in range(n):
        oracle = AsArmOracle(lm.model, mi, use_cache=True)
        extra = [0.0]
        rec = Recorder(lambda t: "", lambda o=oracle, e=extra: o.calls + e[0])
        trace = list(assd_drafted(oracle, mi, rec, gen, 1.0, 2, drafter, extra))
        dec = {}
        for s in trace:
            if s.kind in DECIDING_KINDS:
                dec.update(zip(s.positions, s.tokens))
        counts[tuple(dec[p] for p in mi.masked)] += 1
        assert extra[0] > 0 and math.isclose(trace[-1].calls, oracle.calls + extra[0])
    assert g_test(counts, probs, n) > 1e-3


def test_diffusion_drafted_assd_counts_the_drafters_passes(tmp_path):
    """bench assd's drafter_passes (issue 24): one per non-causal pass of the drafting hybrid,
    whose calls (in hybrid units) are the passes times the non-causal share."""
    from engine.loading.registry import load

    codec = tiny_codec()
    lm = load(str(save_tiny_asarm(tmp_path / "asarm", seed=4, length=4)))
    hybrid = tiny_hybrid(seed=5, length=4)
    mi = masked_input(codec, {2: "a"}, 4)
    drafter = DiffusionDrafter(hybrid, steps=2)
    oracle = AsArmOracle(lm.model, mi, use_cache=True)
    extra, passes = [0.0], [0]
    rec = Recorder(lambda t: "", lambda: oracle.calls + extra[0])
    list(assd_drafted(oracle, mi, rec, torch.Generator().manual_seed(1), 1.0, 2, drafter, extra, passes))
    assert passes[0] > 0 and passes[0] == drafter.passes
    assert math.isclose(extra[0], passes[0] * hybrid.config.nc_share)


def test_diffusion_drafter_needs_the_same_tokenizer():
    from engine.inputs.tokenization import Codec, char_tokenizer

    a = types.SimpleNamespace(name="a", kind="asarm", codec=tiny_codec())
    h_ok = types.SimpleNamespace(name="h", kind="hybrid", codec=tiny_codec())
    h_bad = types.SimpleNamespace(name="h2", kind="hybrid", codec=Codec(char_tokenizer("abcd")))
    check_pair(a, h_ok)
    with pytest.raises(IncompatibleModelsError, match="same tokenizer"):
        check_pair(a, h_bad)
    with pytest.raises(IncompatibleModelsError, match="hybrid"):
        check_pair(a, a)


@pytest.mark.parametrize("inner", [1, 2])
def test_drafts_left_after_the_inner_loops_are_dropped(inner):
    """One window over 4 masked positions with too few inner loops to verify them all: the drafts
    left over are dropped and a new non-causal pass drafts them again. Frequencies still follow the
    Proposition 3.1 likelihood, which models that path."""
    codec = tiny_codec()
    model = tiny_hybrid(seed=3, length=5)  # a seed whose draft and target heads disagree often
    mi = masked_input(codec, {1: "b"}, 5)  # 4 masked positions: 81 outcomes
    kw = dict(dtau=1.0, window="linear", inner=inner, temperature=0.5)
    order = [4, 0, 3, 2]
    probs = _exact(model, mi, order, **kw)
    assert abs(sum(probs.values()) - 1) < 1e-9
    gen = torch.Generator().manual_seed(5)
    runs = [_sample(model, mi, gen, order=order, **kw) for _ in range(N)]
    dropped = sum(1 for trace, _, _ in runs if sum(s.kind == StepKind.NC_PASS for s in trace) > 1)
    assert dropped > N // 20, "the path under test must actually happen"
    assert g_test(Counter(t for _, t, _ in runs), probs, N) > 1e-3
