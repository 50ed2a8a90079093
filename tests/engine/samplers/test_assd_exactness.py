"""Every AS-ARM sampler must be distributed exactly as sequential decoding (enumerated on a tiny
random model), and a deliberately wrong acceptance rule must fail the same test."""

from __future__ import annotations

import collections
import importlib

import pytest
import torch

from engine.api import InfillRun
from engine.samplers.acceptance import Verdict, sample_categorical
from tests.support.tiny import exact_distribution, g_test, masked_input

N_SAMPLES = 1200
ALPHA = 1e-3  # p-value threshold: fixed seeds make the test deterministic


def histogram(lm, mi, sampler: str, n: int, **kw) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for seed in range(n):
        run = InfillRun(masked_input=mi, model=str(lm.path), sampler=sampler, seed=seed, **kw)
        for _ in run.stream():
            pass
        res = run.result(with_log_prob=False)
        counts[tuple(res.tokens[i] for i in mi.masked)] += 1
    return counts


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny AS-ARM with strong dependence (test_mutations.py's: seed 56, weights N(0, 0.8)) on 'xbxx':
    3 masked positions, 27 outcomes; every conditional moves by TV >= 0.1 with the token before it,
    so a wrong row between rounds shows."""
    from engine.loading import registry
    from tests.support.tiny import asarm_dependence, save_tiny_asarm

    lm = registry.load(str(save_tiny_asarm(tmp_path_factory.mktemp("strong") / "asarm", seed=56, length=4, scale=0.8)))
    mi = masked_input(lm.codec, {1: "b"}, 4)
    assert asarm_dependence(lm, mi)["prev_tv"] >= 0.1
    return lm, mi


# k below the 3 masked positions: a second round always follows the first
@pytest.mark.parametrize(
    "sampler,kw",
    [
        ("sequential", {}),
        ("sequential-cache", {}),
        ("assd", {"k": 2}),
        ("assd-bonus", {"k": 2}),
        ("assd-cache", {"k": 2}),
        ("assd-pipelined", {"k": 2}),
        ("assd-reuse", {"k": 2}),
        ("assd-ngram", {"k": 2}),
        ("assd", {"k": 2, "temperature": 0.7}),
        ("assd-pipelined", {"k": 2, "temperature": 1.5}),
        ("assd-reuse", {"k": 2, "temperature": 1.5}),
    ],
)
def test_sampler_matches_exact_distribution(setup, sampler, kw):
    lm, mi = setup
    exact = exact_distribution(lm, mi, kw.get("temperature", 1.0))
    assert abs(sum(exact.values()) - 1) < 1e-9
    counts = histogram(lm, mi, sampler, N_SAMPLES, **kw)
    pval = g_test(counts, exact, N_SAMPLES)
    assert pval > ALPHA, f"{sampler} {kw}: G-test p = {pval:.2e}"


def test_wrong_acceptance_rule_is_caught(setup, monkeypatch):
    """Resampling from the target instead of the residual max(q - p, 0) biases the output."""
    lm, mi = setup

    def broken(draft, p, q, gen):
        from engine.samplers.acceptance import uniform

        a = min(1.0, float(q[draft]) / float(p[draft]))
        if uniform(gen) < a:
            return Verdict(accepted=True, token=draft, accept_prob=a, p_draft=float(p[draft]), q_draft=float(q[draft]),
                           q_token=float(q[draft]))
        tok = sample_categorical(q, gen)  # wrong: should be the residual
        return Verdict(accepted=False, token=tok, accept_prob=a, p_draft=float(p[draft]), q_draft=float(q[draft]),
                       q_token=float(q[tok]))

    monkeypatch.setattr(importlib.import_module("engine.samplers.assd"), "speculative_accept", broken)
    exact = exact_distribution(lm, mi)
    counts = histogram(lm, mi, "assd-ngram", N_SAMPLES, k=2)
    assert g_test(counts, exact, N_SAMPLES) < ALPHA


def test_calls_never_exceed_masked_tokens(tiny_asarm):
    """Theorem 1 for every variant, over a seeded sweep of inputs, k and temperatures."""
    codec = tiny_asarm.codec
    rng = torch.Generator().manual_seed(0)
    for trial in range(40):
        length = 6
        vis = torch.rand(length, generator=rng) < 0.3
        visible = {i: "abc"[int(torch.randint(3, (1,), generator=rng))] for i in range(length) if vis[i]}
        if len(visible) == length:
            continue
        mi = masked_input(codec, visible, length)
        k = int(torch.randint(1, 6, (1,), generator=rng))
        for sampler in ("assd", "assd-bonus", "assd-cache", "assd-pipelined", "assd-ngram"):
            run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=sampler, k=k, seed=trial,
                            temperature=2.0)
            steps = list(run.stream())
            res = run.result(with_log_prob=False)
            assert res.calls <= len(mi.masked), (sampler, k, res.calls, len(mi.masked))
            assert sorted(steps_decided(steps)) == mi.masked, "each masked position decided exactly once"


def steps_decided(steps):
    from engine.trace import DECIDING_KINDS

    return [p for s in steps if s.kind in DECIDING_KINDS for p in s.positions]


def test_same_seed_same_trace_and_cache_is_invisible(tiny_asarm):
    codec = tiny_asarm.codec
    mi = masked_input(codec, {0: "c"}, 6)
    for seed in range(10):
        traces = {}
        for name, cache in (("plain", False), ("again", False), ("cached", True)):
            run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler="assd", k=3, seed=seed, cache=cache)
            traces[name] = [(s.kind, s.positions, s.tokens, s.calls) for s in run.stream()]
        assert traces["plain"] == traces["again"]
        assert traces["plain"] == traces["cached"]


def test_sequential_cache_replays_sequential(tiny_asarm):
    """The cache changes no number the sampler sees: same seed, same trace, with and without it."""
    mi = masked_input(tiny_asarm.codec, {0: "c", 3: "a"}, 7)
    for seed in range(6):
        traces = []
        for sampler in ("sequential", "sequential-cache"):
            run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=sampler, seed=seed)
            traces.append([(s.kind, s.positions, s.tokens, s.calls) for s in run.stream()])
            assert run.params["cache"] is (sampler == "sequential-cache")
        assert traces[0] == traces[1]


def test_cache_logits_equal_recomputation(tiny_asarm):
    """The cached oracle returns the same numbers as full recomputation after commits and rollbacks."""
    from engine.samplers.oracle import AsArmOracle

    mi = masked_input(tiny_asarm.codec, {2: "a"}, 6)
    a, b = AsArmOracle(tiny_asarm.model, mi, True), AsArmOracle(tiny_asarm.model, mi, False)
    script = [([(0, 5), (1, 6)], [(0, 0), (1, 1), (3, 2)], [(0, 5)]),  # keep 1 draft, roll back 1
              ([(1, 4), (3, 6)], [(1, 0), (3, 1)], [(1, 4), (3, 6)]),  # keep both
              ([], [(4, 0), (5, 0)], [(4, 5)])]
    for drafts, queries, commits in script:
        la, lb = a.call(drafts, queries), b.call(drafts, queries)
        assert torch.allclose(la, lb, atol=1e-10), (la - lb).abs().max()
        for pos, tok in commits:
            a.commit(pos, tok)
            b.commit(pos, tok)


@pytest.mark.parametrize("sampler,kw", [("assd-pipelined", {"k": 2}), ("assd-bonus", {"k": 2})])
def test_four_masked_positions_with_leftover_proposals(tiny_asarm, sampler, kw):
    """4 masked positions with k = 2: proposals made before a rejection serve several later ranks."""
    mi = masked_input(tiny_asarm.codec, {2: "b"}, 5)  # 81 outcomes
    exact = exact_distribution(tiny_asarm, mi)
    counts = histogram(tiny_asarm, mi, sampler, 2000, **kw)
    pval = g_test(counts, exact, 2000)
    assert pval > ALPHA, f"{sampler} {kw}: G-test p = {pval:.2e}"


@pytest.mark.parametrize("sampler", ["sequential", "sequential-cache", "assd-bonus", "assd-pipelined", "assd-ngram"])
def test_same_seed_same_trace_every_sampler(tiny_asarm, sampler):
    mi = masked_input(tiny_asarm.codec, {0: "c"}, 6)
    seen = set()
    for seed in range(4):
        traces = []
        for _ in range(2):
            run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=sampler, k=3, seed=seed)
            traces.append([(s.kind, s.positions, s.tokens, s.p, s.q, s.calls) for s in run.stream()])
        assert traces[0] == traces[1]
        seen.add(tuple(t for s in traces[0] for t in s[2]))
    assert len(seen) > 1, "different seeds should give different samples"


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["assd", "assd-cache", "assd-bonus", "assd-pipelined", "assd-ngram"])
def test_deep_speculation_matches_exact_distribution(tiny_asarm, sampler):
    """k = 5 over 5 masked positions (243 outcomes, 6,000 samples): every stopping point of a round,
    every leftover proposal of the pipelined sampler and the bonus row get exercised."""
    mi = masked_input(tiny_asarm.codec, {0: "a"}, 6)
    exact = exact_distribution(tiny_asarm, mi)
    counts = histogram(tiny_asarm, mi, sampler, 6000, k=5)
    pval = g_test(counts, exact, 6000)
    assert pval > ALPHA, f"{sampler}: G-test p = {pval:.2e}"


@pytest.mark.parametrize("where,ban", [("word_starts", "not_word_start"), ("line_starts", "space_led")])
@pytest.mark.parametrize("sampler,kw", [("assd-pipelined", {"k": 2}), ("assd-ngram", {"k": 2})])
def test_a_position_constraint_stays_exact(setup, sampler, kw, where, ban):
    """A span that owns the space before it bans tokens that do not start a word at its first
    position (word_starts); its mirror, a span at the start of the text (or of a line in prose), bans
    space-led ones (line_starts). Draft and target read the same constrained model, so the samplers
    still sample the constrained law exactly."""
    import dataclasses

    lm, mi = setup
    banned = torch.zeros(lm.codec.vocab_size, dtype=torch.bool)
    a = lm.codec.encode("a")[0]
    banned[a] = True
    cmi = dataclasses.replace(mi, **{where: [mi.masked[0]], ban: banned})
    exact = exact_distribution(lm, cmi)
    assert sum(p for k, p in exact.items() if k[0] == a) == 0 and abs(sum(exact.values()) - 1) < 1e-9
    counts = histogram(lm, cmi, sampler, N_SAMPLES // 2, **kw)
    assert not any(k[0] == a for k in counts)
    assert g_test(counts, exact, N_SAMPLES // 2) > ALPHA


def test_reference_joint_is_independent_and_agrees(tiny_asarm):
    """tests/tiny.exact_distribution (brute force through the original forward) agrees with the
    oracle's density mode, and is a distribution; an oracle that ignored a draft would not agree."""
    from tests.support.tiny import exact_distribution_via_oracle

    mi = masked_input(tiny_asarm.codec, {1: "b"}, 4)
    ref, via = exact_distribution(tiny_asarm, mi, 0.7), exact_distribution_via_oracle(tiny_asarm, mi, 0.7)
    assert abs(sum(ref.values()) - 1) < 1e-12
    assert max(abs(ref[k] - via[k]) for k in ref) < 1e-12
