"""Mutation tests: every known-wrong sampling rule must fail the goodness-of-fit test that the real
sampler passes.

Each mutant is applied from outside (monkeypatch of the real module, or a subclass/wrapper of the
real class), never by editing source. The fixtures are chosen so that a wrong rule is far off:
every conditional depends on its predecessor by TV >= 0.1, drafts differ from targets by TV >= 0.1
(so rejections are common) and no outcome dominates; the fixtures assert this themselves. Seeds are
fixed, so every p-value below is a deterministic number, far from its threshold on both sides.
"""

from __future__ import annotations

import importlib
import itertools
from collections import Counter

import pytest
import torch

from engine.loading import registry
from engine.models.asarm import KVCache
from engine.samplers.acceptance import Verdict, sample_categorical, tempered_probs, uniform
from engine.samplers.oracle import AsArmOracle
from tests.engine.samplers.test_assd_exactness import histogram
from tests.engine.samplers.test_hybrid import tiny_hybrid
from tests.support.tiny import (
    ALPHABET,
    asarm_dependence,
    exact_distribution,
    g_test,
    masked_input,
    residual_from_q,
    save_tiny_asarm,
    tv,
)

N = 2000  # samples per histogram
PASS = 1e-3  # the real sampler: G-test p-value above this
FAIL = 1e-6  # a mutant: p-value below this

assd_mod = importlib.import_module("engine.samplers.assd")
selfspec_mod = importlib.import_module("engine.samplers.selfspec")
context_mod = importlib.import_module("engine.samplers.context")  # where a run makes its oracle


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def asarm(tmp_path_factory):
    """Tiny AS-ARM (seed 56, weights N(0, 0.8)) on 'xbxx': 3 masked positions, 27 outcomes."""
    folder = save_tiny_asarm(tmp_path_factory.mktemp("mut") / "asarm", seed=56, length=4, scale=0.8)
    lm = registry.load(str(folder))
    mi = masked_input(lm.codec, {1: "b"}, 4)
    for temperature in (1.0, 0.5):
        dep = asarm_dependence(lm, mi, temperature)
        assert dep["prev_tv"] >= 0.1, dep  # every factor depends on the token before it
        assert dep["draft_tv"] >= 0.1, dep  # parallel drafts are far from the targets: rejections
        assert dep["max_joint"] <= 0.4 and dep["max_first"] <= 0.8, dep  # no dominant outcome
    return lm, mi


ORDER = [3, 0, 2]  # decode order of the self-speculative runs (sigma)
SELF_SPEC = dict(dtau=1.0, window="linear", inner=2)  # one window of 3, two verify loops


@pytest.fixture(scope="module")
def hybrid():
    """Tiny hybrid (seed 11, weights N(0, 1)) on 'xbxx' with the decode order 3, 0, 2; its causal
    block's token embedding and output projection are scaled by 6, so the causal targets depend
    strongly on the chain (what M6 gets wrong)."""
    from engine.samplers.hybrid_passes import causal_pass, model_ids, nc_pass
    from tests.engine.samplers.test_selfspec import _exact

    model = tiny_hybrid(seed=11, length=4, scale=1.0)
    with torch.no_grad():
        model.tok_embed.weight.mul_(6.0)
        model.out_proj.weight.mul_(6.0)
    codec = importlib.import_module("tests.support.tiny").tiny_codec()
    mi = masked_input(codec, {1: "b"}, 4)
    sym = [codec.encode(ch)[0] for ch in ALPHABET]
    h, logits = nc_pass(model, model_ids(model, mi.tokens))
    p = tempered_probs(logits[[pos + 1 for pos in ORDER]], 1.0)
    rows = {c: tempered_probs(causal_pass(model, h, ORDER, [*c, sym[0]]), 1.0) for c in itertools.product(sym, repeat=2)}
    # the causal block's row for rank 2 depends on the rank-1 token, its row for rank 3 on the rank-2 token
    assert max(tv(rows[(a, sym[0])][0], rows[(b, sym[0])][0]) for a in sym for b in sym) >= 0.1
    assert min(max(tv(rows[(a, b)][1], rows[(a, c)][1]) for b in sym for c in sym) for a in sym) >= 0.1
    # non-causal drafts differ from the causal targets (rejections happen) and do not dominate
    assert min(max(tv(p[r + 1], rows[c][r]) for c in rows) for r in range(2)) >= 0.1
    assert float(p.max()) <= 0.8
    exact = _exact(model, mi, ORDER, **SELF_SPEC)
    assert max(exact.values()) <= 0.4
    return model, mi, exact


@pytest.fixture(scope="module")
def exact(asarm):
    lm, mi = asarm
    return {t: exact_distribution(lm, mi, t) for t in (1.0, 0.5)}


_REAL: dict = {}  # histograms of the unmutated samplers, shared by the tests of wrong likelihoods


def pvalue(asarm, exact, sampler: str, mutated: bool = True, **kw) -> float:
    lm, mi = asarm
    key = (sampler, tuple(sorted(kw.items())))
    if mutated or key not in _REAL:
        counts = histogram(lm, mi, sampler, N, **kw)
        if not mutated:
            _REAL[key] = counts
    counts = counts if mutated else _REAL[key]
    return g_test(counts, exact[kw.get("temperature", 1.0)], N)


def self_spec_counts(hybrid) -> Counter:
    from tests.engine.samplers.test_selfspec import _sample

    model, mi, _ = hybrid
    gen = torch.Generator().manual_seed(11)
    return Counter(_sample(model, mi, gen, order=ORDER, **SELF_SPEC)[1] for _ in range(N))


def self_spec_pvalue(hybrid, mutated: bool = True) -> float:
    if mutated or "self-spec" not in _REAL:
        counts = self_spec_counts(hybrid)
        if not mutated:
            _REAL["self-spec"] = counts
    counts = counts if mutated else _REAL["self-spec"]
    return g_test(counts, hybrid[2], N)


# ----------------------------------------------------------------------------- the mutants


def half_residual(draft, p, q, gen):
    """M2: half a residual: after a rejection, half the time the token comes from q instead of
    norm(max(q - p, 0))."""
    px, qx = float(p[draft]), float(q[draft])
    a = min(1.0, qx / px)
    if uniform(gen) < a:
        return Verdict(accepted=True, token=draft, accept_prob=a, p_draft=px, q_draft=qx, q_token=qx)
    residual = torch.clamp(q - p, min=0.0)
    tok = sample_categorical(q if uniform(gen) < 0.5 else residual, gen)
    return Verdict(accepted=False, token=tok, accept_prob=a, p_draft=px, q_draft=qx, q_token=float(q[tok]))


class UntemperedTarget:
    """M4: the density (verify) pass scored at temperature 1 while drafts use T: its logits are
    multiplied by T, which the sampler's division by T then cancels."""

    def __init__(self, inner, temperature: float):
        self.inner, self.t = inner, temperature

    @property
    def calls(self):
        return self.inner.calls

    def commit(self, pos, tok):
        self.inner.commit(pos, tok)

    def call(self, drafts, queries, states=False, logit_rows=None):
        if states:
            out, st = self.inner.call(drafts, queries, states=True, logit_rows=logit_rows)
            return (out * self.t if drafts else out), st
        out = self.inner.call(drafts, queries)
        return out * self.t if drafts else out

    def head_logits(self, states, positions):
        return self.inner.head_logits(states, positions)


def keep_rejected_draft(self, pos, tok):
    """M5: the cache matches a committed token to the tentative draft by position only, so a
    resampled token keeps the rejected draft's K/V."""
    self.committed.append((pos, tok))
    if self.cache is None:
        return
    if self.tentative and self.tentative[0][0] == pos and self.valid == len(self.committed) - 1:
        self.tentative.pop(0)
        self.valid += 1
    else:
        self.cache.truncate(len(self.prompt) + self.valid)
        self.tentative = []


def stale_chain(real):
    """M6: the self-speculative inner loop re-targets with the chain as first drafted (the rejected
    draft instead of its resampled token). The sampler passes the same `chain` list to every causal
    pass of one window and a new list for the next window, so the first copy per list is the stale
    chain."""
    first: dict[str, list[int]] = {}

    def causal_pass(model, h, positions, tokens, *rest):
        if first.get("list") is not tokens:  # a new window: remember its chain as drafted
            first["list"], first["drafted"] = tokens, list(tokens)
        return real(model, h, positions, first["drafted"], *rest)

    return causal_pass


MUTANTS = {
    "M1 residual sampled from q": ("assd", {"k": 3}, "accept", residual_from_q),
    "M1 residual sampled from q (ngram drafts)": ("assd-ngram", {"k": 3}, "accept", residual_from_q),
    "M2 half residual": ("assd-ngram", {"k": 3}, "accept", half_residual),
    "M3 pipelined next first row always exact": ("assd-pipelined", {"k": 2}, "first_exact", None),
    "M4 draft at T, target at 1": ("assd", {"k": 3, "temperature": 0.5}, "temperature", None),
    "M5 cache keeps a rejected draft": ("assd-cache", {"k": 3}, "keep_rejected", None),
    "M5 cache keeps a rejected draft (pipelined)": ("assd-pipelined", {"k": 3}, "keep_rejected", None),
    "M7 cache never rolled back after a resample": ("assd-cache", {"k": 3}, "no_rollback", None),
}


def apply(monkeypatch, how: str, fn) -> None:
    if how == "accept":
        monkeypatch.setattr(assd_mod, "speculative_accept", fn)
    elif how == "first_exact":
        monkeypatch.setattr(assd_mod, "next_first_is_exact", lambda stopped, drafted: True)
    elif how == "temperature":
        real = context_mod.make_oracle
        monkeypatch.setattr(context_mod, "make_oracle", lambda lm, mi, c: UntemperedTarget(real(lm, mi, c), 0.5))
    elif how == "keep_rejected":
        monkeypatch.setattr(AsArmOracle, "commit", keep_rejected_draft)
    elif how == "no_rollback":
        monkeypatch.setattr(KVCache, "truncate", lambda self, n: None)
    else:
        raise AssertionError(how)


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("sampler,kw", sorted({(s, tuple(kw.items())) for s, kw, _, _ in MUTANTS.values()}))
def test_real_sampler_passes(asarm, exact, sampler, kw):
    p = pvalue(asarm, exact, sampler, mutated=False, **dict(kw))
    print(f"\n{sampler} {dict(kw)}: p = {p:.2e}")
    assert p > PASS, f"{sampler} {dict(kw)}: G-test p = {p:.2e}"


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_fails(asarm, exact, monkeypatch, name):
    sampler, kw, how, fn = MUTANTS[name]
    apply(monkeypatch, how, fn)
    p = pvalue(asarm, exact, sampler, **kw)
    print(f"\n{name}: p = {p:.2e}")
    assert p < FAIL, f"{name} was not caught: G-test p = {p:.2e}"


def test_self_spec_passes(hybrid):
    p = self_spec_pvalue(hybrid, mutated=False)
    print(f"\nself-spec: p = {p:.2e}")
    assert p > PASS, f"self-spec: G-test p = {p:.2e}"


@pytest.mark.parametrize("mutant", ["M6 stale chain", "M1 residual sampled from q"])
def test_self_spec_mutant_fails(hybrid, monkeypatch, mutant):
    if mutant.startswith("M6"):
        monkeypatch.setattr(selfspec_mod, "causal_pass", stale_chain(selfspec_mod.causal_pass))
    else:
        monkeypatch.setattr(selfspec_mod, "speculative_accept", residual_from_q)
    p = self_spec_pvalue(hybrid)
    print(f"\n{mutant}: p = {p:.2e}")
    assert p < FAIL, f"{mutant} was not caught: G-test p = {p:.2e}"


# ----------------------------------------------------------------------------- wrong likelihoods
# The same G-test must also reject a wrong reference: the real samplers' histograms against a
# likelihood that forgets one of the run's settings.


def test_untempered_likelihood_is_rejected(asarm, exact):
    """L1: the sequential joint at T = 1 for a run at T = 0.5."""
    p = pvalue(asarm, {0.5: exact[1.0]}, "assd", mutated=False, k=3, temperature=0.5)
    print(f"\nL1 untempered likelihood: p = {p:.2e}")
    assert p < FAIL


def test_self_spec_likelihood_without_inner_loops_is_rejected(hybrid):
    """L2: Proposition 3.1 with one verify loop for a run with two (the re-targeting forgotten)."""
    from tests.engine.samplers.test_selfspec import _exact

    model, mi, exact = hybrid
    wrong = _exact(model, mi, ORDER, **{**SELF_SPEC, "inner": 1})
    assert max(tv_dict(wrong, exact), 0) >= 0.05  # the two likelihoods really differ
    self_spec_pvalue(hybrid, mutated=False)
    p = g_test(_REAL["self-spec"], wrong, N)
    print(f"\nL2 self-spec likelihood with inner = 1: p = {p:.2e}")
    assert p < FAIL


def tv_dict(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))
