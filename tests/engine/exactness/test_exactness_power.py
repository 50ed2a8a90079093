"""The chain test of the exactness check (engine/exactness/pit.py, contrast.py, power.py) on the
hand-built table model (tests/support/rounds_model.py), where draws cost no network: exact samplers
are flagged no more often than the level says, the deliberately wrong rules are flagged at the
power the check states, and that stated power matches the rate over independent simulated checks."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from engine.exactness import contrast
from engine.exactness.contrast import (
    CONTRASTS,
    contrast_rows,
    record_from_oracle,
    round_starts,
    window,
    wrong_predictive,
)
from engine.exactness.pit import rank_intervals
from engine.exactness.power import Records, chain_fit, n_for_power, position_p, power
from engine.exactness.wrong_samplers import accept_every_draft, residual_from_q
from engine.samplers.assd import assd
from engine.samplers.sequential import sequential
from engine.trace import DECIDING_KINDS
from tests.support.rounds_model import SYMBOLS, TableOracle, make_input, recorder

SCALE, SALT, K = 2.5, 7, 3
MI = make_input(6, {1: "b", 4: "a"})  # 4 masked positions (0, 2, 3, 5) over 3 symbols
SYMS = tuple(SYMBOLS)
RULES = {"wrong-assd-residual-from-q": residual_from_q, "wrong-assd-accept-all": accept_every_draft}


def draw(name: str, seed: int) -> tuple[int, ...]:
    """One fill from a sampler on the table model."""
    oracle = TableOracle(MI, SYMS, SCALE, SALT)
    gen = torch.Generator().manual_seed(seed)
    if name == "sequential":
        steps = sequential(oracle, MI, recorder(oracle), gen, 1.0)
    else:
        steps = assd(oracle, MI, recorder(oracle), gen, 1.0, K, accept=RULES.get(name))
    decided = {p: t for s in steps if s.kind in DECIDING_KINDS for p, t in zip(s.positions, s.tokens)}
    return tuple(decided[p] for p in MI.masked)


_RECORDS: dict = {}


def records(fills: list[tuple[int, ...]]) -> Records:
    """The fills' transform intervals and contrast terms, one table-oracle call per distinct fill."""
    out = []
    for f in fills:
        if f not in _RECORDS:
            _RECORDS[f] = record_from_oracle(TableOracle(MI, SYMS, SCALE, SALT), MI, f, 1.0, K)
        out.append(_RECORDS[f])
    return Records.of(out, len(MI.masked))


def pool(name: str, size: int, offset: int = 0) -> list[tuple[int, ...]]:
    """`size` independent draws of a sampler (seeds disjoint between samplers and offsets)."""
    base = 1_000_000 * (["sequential", "assd", *CONTRASTS].index(name) + 1) + offset
    return [draw(name, base + s) for s in range(size)]


@pytest.fixture(scope="module")
def pools() -> dict[str, list[tuple[int, ...]]]:
    """Draws of each sampler: 6000 of the exact ones (300 checks of 20), 2500 of accept-all, 20000 of
    the residual rule (its law's test; 200 checks of 50)."""
    sizes = {"sequential": 6000, "assd": 6000, "wrong-assd-residual-from-q": 20000, "wrong-assd-accept-all": 2500}
    return {name: pool(name, size) for name, size in sizes.items()}


def test_rank_intervals_order_by_probability_ties_by_id():
    rows = torch.tensor([[0.1, 0.6, 0.3], [0.25, 0.25, 0.5]], dtype=torch.float64)
    lo, hi = rank_intervals(rows, [2, 1])
    assert lo.tolist() == pytest.approx([0.6, 0.75]) and hi.tolist() == pytest.approx([0.9, 1.0])
    lo, hi = rank_intervals(rows, [1, 0])
    assert lo.tolist() == pytest.approx([0.0, 0.5]) and hi.tolist() == pytest.approx([0.6, 0.75])


def test_contrast_laws_are_the_wrong_rules():
    """residual-from-q: min(p, q) + (1 - sum min(p, q)) q; accept-all: the draft row itself."""
    p = torch.tensor([[0.7, 0.2, 0.1]], dtype=torch.float64)
    q = torch.tensor([[0.2, 0.5, 0.3]], dtype=torch.float64)
    r = contrast_rows("wrong-assd-residual-from-q", p, q)
    assert r[0].tolist() == pytest.approx([0.2 + 0.5 * 0.2, 0.2 + 0.5 * 0.5, 0.1 + 0.5 * 0.3])
    assert contrast_rows("wrong-assd-accept-all", p, q) is p
    assert round_starts(7, 3) == [0, 0, 0, 3, 3, 3, 6]
    assert list(window(0, 3)) == [] and list(window(4, 3)) == [2, 3] and list(window(4, 1)) == []


def test_forward_pass_by_hand():
    """Three positions, k = 2: at position 1 the round started at 0 for sure, so the predictive is the
    residual rule's row given that start; at position 2 a kept token has filled the round (k = 2) and
    a rejection ended it, so every path restarts at 2 and the row is q. With k = 3 a kept token at 1
    leaves the start at 0 and a rejection moves it to 2, in proportion to their masses."""
    q = torch.tensor([[0.5, 0.5], [0.2, 0.8], [0.3, 0.7]], dtype=torch.float64)
    p1 = torch.tensor([0.6, 0.4], dtype=torch.float64)
    w, alphas = wrong_predictive(q, {(1, 0): p1, (2, 1): q[2]}, (0, 1, 0), 2)
    assert w[1].tolist() == pytest.approx(contrast_rows("wrong-assd-residual-from-q", p1, q[1]).tolist())
    assert alphas[2] == {2: 1.0} and w[2].tolist() == pytest.approx(q[2].tolist())
    # k = 3: after a kept token at 1 the round goes on (start 0); after a rejection it restarts at 2
    p2 = torch.tensor([0.9, 0.1], dtype=torch.float64)
    w, alphas = wrong_predictive(q, {(1, 0): p1, (2, 0): p2, (2, 1): q[2]}, (0, 1, 0), 3)
    kept, rej = 0.4, (1 - 0.6) * 0.8  # y1 = 1: min(p1, q1)[1] = 0.4; rejection mass 1 - 0.6, q1[1] = 0.8
    assert alphas[2][0] == pytest.approx(kept / (kept + rej)) and alphas[2][2] == pytest.approx(rej / (kept + rej))
    assert w[2].tolist() == pytest.approx((alphas[2][0] * contrast_rows("wrong-assd-residual-from-q", p2, q[2])
                                           + alphas[2][2] * q[2]).tolist())


def test_draft_rows_in_parts_give_the_same_record(monkeypatch):
    """A long span at a large k asks its draft rows in parts (at most MAX_ROWS held at once): the
    record is the one a single call gives, over more calls of the same fill."""
    mi = make_input(9, {4: "a"})  # 8 masked positions
    fill = tuple(SYMS[(3 * i) % 3 - 1] for i in range(8))
    one = TableOracle(mi, SYMS, SCALE, SALT)
    whole = record_from_oracle(one, mi, fill, 1.0, 4)
    monkeypatch.setattr(contrast, "MAX_ROWS", 4)
    split = TableOracle(mi, SYMS, SCALE, SALT)
    parts = record_from_oracle(split, mi, fill, 1.0, 4)
    assert one.calls == 1 and split.calls > 2 and max(len(q) for q in split.queries[1:]) <= 4 + 3
    for c in CONTRASTS:
        for key in ("ell", "mu", "var", "drift", "cov"):
            assert np.allclose(getattr(parts, key)[c], getattr(whole, key)[c]), (c, key)
    assert parts.log_prob_w == pytest.approx(whole.log_prob_w)


def pooled_chi2(counts: collections.Counter, law: dict, n: int) -> float:
    """Pearson's chi-square p-value of the counts against a law over fills, fills with fewer than 5
    expected draws pooled into one cell."""
    big = [f for f, v in law.items() if n * v >= 5]
    rest_e = n * (1 - sum(law[f] for f in big))
    rest_o = n - sum(counts[f] for f in big)
    stat = sum((counts[f] - n * law[f]) ** 2 / (n * law[f]) for f in big) + (rest_o - rest_e) ** 2 / rest_e
    return float(chi2.sf(stat, len(big)))


def block_law(fill: tuple[int, ...]) -> float:
    """The old approximation of the residual rule's law: rounds taken as blocks of k (no rejection)."""
    drafts = list(zip(MI.masked, fill))
    starts = round_starts(len(fill), K)
    m = len(fill)
    rows = torch.softmax(TableOracle(MI, SYMS, SCALE, SALT).call(
        drafts, [(pos, i) for i, (pos, _) in enumerate(drafts)] + [(pos, starts[i]) for i, (pos, _) in enumerate(drafts)]), -1)
    r = contrast_rows("wrong-assd-residual-from-q", rows[m:], rows[:m])
    return float(np.prod([float(r[i, t]) for i, t in enumerate(fill)]))


def test_residual_rule_frequencies_match_its_forward_law(pools):
    """The residual rule's law of a fill (the forward pass over round starts, from one density call per
    fill) is a law (sums to 1 over the 81 fills) and is the law the wrong sampler draws from: 20,000
    draws fit it (chi-square, fills with 5+ expected draws, p > 0.001), while the same draws reject
    the blocks-of-k approximation the statistic used before and the chain's exact law (p < 1e-6):
    the test can tell laws this close apart."""
    name = "wrong-assd-residual-from-q"
    fills = pools[name]
    counts, n = collections.Counter(fills), len(fills)
    law, chain = {}, {}
    for f in itertools.product(SYMS, repeat=len(MI.masked)):
        r = record_from_oracle(TableOracle(MI, SYMS, SCALE, SALT), MI, f, 1.0, K)
        law[f], chain[f] = float(np.exp(r.log_prob_w[name])), float(np.exp(r.log_prob))
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-9)
    assert pooled_chi2(counts, law, n) > 1e-3
    assert pooled_chi2(counts, {f: block_law(f) for f in law}, n) < 1e-6
    assert pooled_chi2(counts, chain, n) < 1e-6


def test_accept_all_frequencies_match_its_contrast_law(pools):
    """The accept-all rule never rejects, so its rounds are the blocks of k the contrast assumes:
    the product of its contrast rows over a fill is the rule's own law (frequency within noise)."""
    fills = pools["wrong-assd-accept-all"]
    counts = collections.Counter(fills)
    n = len(fills)
    for fill, c in counts.most_common(5):
        oracle = TableOracle(MI, SYMS, SCALE, SALT)
        drafts = list(zip(MI.masked, fill))
        starts = round_starts(len(fill), K)
        rows = torch.softmax(oracle.call(drafts, [(pos, starts[i]) for i, (pos, _) in enumerate(drafts)]), -1)
        law = float(np.prod([float(rows[i, t]) for i, t in enumerate(fill)]))
        assert abs(c / n - law) < 4 * np.sqrt(law * (1 - law) / n) + 1e-3, (fill, c / n, law)


def test_each_part_of_the_test_is_calibrated(pools):
    """Under an exact sampler each part's p-value is uniform: over 300 checks of N = 20 (sequential)
    the share below 0.05 is within 3 standard deviations of 0.05 (0.012 to 0.088), for the KS test
    and for each wrong rule's likelihood ratio (whose mean and variance come from the target rows)."""
    fills = pools["sequential"]
    fits = [chain_fit(records(fills[i * 20:(i + 1) * 20]), seed=i) for i in range(300)]
    band = 3 * np.sqrt(0.05 * 0.95 / 300)
    parts = {"ks": [f.ks_p for f in fits], **{c: [f.lr_p[c] for f in fits] for c in CONTRASTS}}
    for name, ps in parts.items():
        rate = float(np.mean(np.array(ps) < 0.05))
        assert abs(rate - 0.05) <= band, (name, rate)


@pytest.mark.parametrize("name", ["sequential", "assd"])
def test_exact_samplers_false_alarm_rate_at_level_005(pools, name):
    """300 independent checks of N = 20 draws (80 transforms each): the share with p < 0.05 is
    within sampling noise of 0.05 or below (3 standard deviations: 0.088)."""
    fills = pools[name]
    checks = [fills[i * 20:(i + 1) * 20] for i in range(300)]
    rate = np.mean([chain_fit(records(c), seed=i).p_value < 0.05 for i, c in enumerate(checks)])
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300), rate
    assert rate > 0.0  # a test that never fires under the null is not calibrated either


def flag_rate(fills: list[tuple[int, ...]], n: int, reps: int) -> float:
    """The share of `reps` independent checks of n draws (disjoint slices of `fills`) with p < 0.01."""
    assert len(fills) >= reps * n
    return float(np.mean([chain_fit(records(fills[i * n:(i + 1) * n]), seed=i).p_value < 0.01 for i in range(reps)]))


@pytest.mark.parametrize("name, n, tol", [("wrong-assd-residual-from-q", 50, 0.09), ("wrong-assd-accept-all", 3, 0.1)])
def test_stated_power_matches_simulated_checks(pools, name, n, tol):
    """The power a pilot of 1000 draws states for N (resampled checks, the likelihood ratios simulated
    from their drifts and covariances under the rule) is within `tol` of the share of independent
    checks of N fresh draws that flag the rule (N chosen where the power is in between; tol about
    2.5 standard deviations of the simulated share: 200 checks for the residual rule, 500 for
    accept-all)."""
    fills = pools[name]
    stated = power(records(fills[:1000]), n, 0.01, own=name)
    reps = min(500, (len(fills) - 1000) // n, 200)
    sim = flag_rate(fills[1000:], n, reps)
    assert 0.1 < sim < 0.95 and abs(stated - sim) <= tol, (stated, sim)


def test_small_pilots_state_the_residual_power_steadily(pools):
    """Five disjoint pilots of 200 draws (the check's own N) state the power at N = 50 within 0.1 of
    the share of 200 independent checks, every one of them: the drifts, not the drawn terms, carry
    the power, so one pilot's luck does not (resampling the drawn terms instead, the same five pilots
    stated 0.27 to 0.40 where the checks flagged 0.385; 10 pilots spread with a standard deviation
    of 0.13)."""
    name = "wrong-assd-residual-from-q"
    fills = pools[name]
    sim = flag_rate(fills[10_000:], 50, 200)
    stated = [power(records(fills[i * 200:(i + 1) * 200]), 50, 0.01, own=name) for i in range(5)]
    assert all(abs(s - sim) <= 0.1 for s in stated), (stated, sim)


def test_accept_all_flagged_at_the_stated_power(pools):
    """The N a pilot says reaches power 0.9 flags the rule in at least 0.8 of independent checks
    (accept-all here; the residual rule needs N of about 150 on this table: the slow test below)."""
    fills = pools["wrong-assd-accept-all"]
    n = n_for_power(records(fills[:200]), 0.9, 0.01, 2, 2000, own="wrong-assd-accept-all")
    assert n is not None and n * 100 <= len(fills) - 200
    assert flag_rate(fills[200:], n, 100) >= 0.8


def test_chosen_n_holds_its_power_beyond_the_bisections_few_checks(pools):
    """`--samples auto`'s N: its power, simulated with five times the bisection's checks, reaches the
    target (the bisection alone, 60 checks a point, can settle just below it: 0.87 for 0.9 was seen)."""
    name = "wrong-assd-residual-from-q"
    for lo, target in ((0, 0.9), (200, 0.9), (400, 0.8)):
        rec = records(pools[name][lo:lo + 200])
        n = n_for_power(rec, target, 0.01, 5, 2000, own=name)
        assert n is not None and power(rec, n, 0.01, reps=300, own=name) >= target, (lo, n)


@pytest.mark.slow
def test_residual_flagged_at_the_stated_power():
    name = "wrong-assd-residual-from-q"
    pilot = pool(name, 200, offset=500_000)
    n = n_for_power(records(pilot), 0.9, 0.01, 5, 2000, own=name)
    assert n is not None and n <= 400
    assert flag_rate(pool(name, 40 * n, offset=600_000), n, 40) >= 0.8


def test_departing_position_is_a_drafted_one(pools):
    """accept-all's first token of a round is exact (its draft saw every decided token): the position
    that departs most is a later one of the round."""
    per = position_p(records(pools["wrong-assd-accept-all"][:300]))
    assert int(np.argmin(per)) in (1, 2) and per[0] > 1e-3, per


def test_power_below_the_target_never_reads_as_the_target():
    from engine.exactness.judgement import Judgement, power_text

    assert power_text(0.795) == "0.795" and power_text(0.8) == "0.80" and power_text(0.91) == "0.91"
    j = Judgement(p_value=0.5, statistic="x", verdict="cannot tell at this N", power={"wrong-a": 0.795, "wrong-b": 1.0})
    assert j.power_words() == "power 0.795 against wrong-a, 1.00 against wrong-b"
