"""The exactness check (engine/exactness/check.py, issue 26): on the tiny model an exact sampler is
"consistent", a deliberately wrong one is "not consistent"; the exact law is the enumerated one; the
p-value is the chi-square's; bad input gets a clear message; a stored check reads back whole."""

from __future__ import annotations

import json

import pytest
from scipy.stats import chisquare

from engine.cli import main as cli_main
from engine.errors import BadParameterError, IncompatibleModelsError, InfillError, NoMaskError
from engine.exactness.check import CheckBudget, ExactnessCheck, run_check
from engine.exactness.fit import CONSISTENT, MIN_EXPECTED, NOT_CONSISTENT, UNTESTABLE, goodness_of_fit, pooled_cells, verdict
from engine.exactness.law import asarm_cells, asarm_prob
from engine.exactness.result import from_json
from engine.exactness.wrong_samplers import WRONG_SAMPLERS
from engine.loading import registry
from engine.samplers import SAMPLERS
from tests.engine.samplers.test_hybrid import tiny_hybrid
from tests.support.tiny import exact_distribution, masked_input, save_tiny_asarm, tiny_codec

TEXT = "[MASK:1]b[MASK:2]"  # positions 0, 2 and 3 masked: 27 fills over the alphabet 'abc'
N = 300


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The mutation tests' tiny AS-ARM (seed 56, weights N(0, 0.8)) on 'xbxx' (tests/engine/samplers/test_mutations.py
    asserts its conditionals depend on each other by TV >= 0.1: parallel decoding is far from the chain)."""
    folder = save_tiny_asarm(tmp_path_factory.mktemp("exact") / "asarm", seed=56, length=4, scale=0.8)
    return folder, registry.load(str(folder))


@pytest.fixture(scope="module")
def check(tiny):
    folder, _ = tiny
    return run_check(TEXT, model=str(folder), samplers="assd-pipelined,wrong-assd-accept-all", samples=N, seed=0, k=3)


def test_exact_sampler_consistent_wrong_sampler_not(check):
    """The real sampler passes, the deliberately wrong one fails, each with its plain sentence."""
    exact, wrong = check.samplers
    assert exact.name == "assd-pipelined" and wrong.name == "wrong-assd-accept-all"
    assert exact.fit.p_value >= 0.01 and verdict(exact.fit) == CONSISTENT, exact.fit
    assert wrong.fit.p_value < 1e-6 and verdict(wrong.fit) == NOT_CONSISTENT, wrong.fit
    assert wrong.fit.tv > 2 * check.tv_noise > 0  # far beyond what sampling noise alone shows
    for rep in check.samplers:
        assert sum(rep.counts.values()) == N
        assert 1.0 <= rep.calls_per_sample <= 3.0  # three masked tokens: at most one call per token


def test_hybrid_law_passes_self_spec_and_fails_one_step_mdm(tmp_path):
    """For hybrid samplers the law is the self-speculative likelihood (Proposition 3.1): self-spec
    with 3-token windows and two verify loops is consistent with it; MDM in one step (every token
    from its own marginal) is not."""
    folder = tmp_path / "hybrid"
    tiny_hybrid(seed=11, length=4, scale=1.0).save_pretrained(folder)
    tiny_codec().hf.save_pretrained(folder)
    res = run_check(TEXT, model=str(folder), samplers="self-spec,mdm", samples=N, seed=0, steps=1,
                    dtau=1.0, window="linear", inner=2)
    spec, mdm = res.samplers
    assert res.kind == "hybrid" and "Proposition 3.1" in res.law
    assert spec.fit.p_value >= 0.01 and verdict(spec.fit) == CONSISTENT, spec.fit
    assert mdm.fit.p_value < 1e-4 and verdict(mdm.fit) == NOT_CONSISTENT, mdm.fit
    # the enumeration check states its power: the smallest shift it sees at power 0.8
    assert spec.verdict == CONSISTENT and "shift of" in spec.judgement.departure and "power 0.8" in spec.judgement.departure
    assert 0.99 <= sum(res.exact.values()) + res.other <= 1.0 + 1e-9


def test_exact_law_is_the_enumerated_chain(check, tiny):
    """The check's law is the AS-ARM's chain in lattice order, here enumerated independently, and
    every fill with an expected count >= 5 is listed."""
    _, lm = tiny
    truth = exact_distribution(lm, masked_input(lm.codec, {1: "b"}, 4))
    assert abs(sum(truth.values()) - 1) < 1e-9
    for fill, p in truth.items():
        if N * p >= MIN_EXPECTED:
            assert check.exact[fill] == pytest.approx(p, rel=1e-9, abs=1e-12)
    for fill, p in check.exact.items():
        assert p == pytest.approx(truth[fill], rel=1e-9, abs=1e-12)
    assert set(check.texts.values()) <= {f"{a} | {b}{c}" for a in "abc" for b in "abc" for c in "abc"}


def test_tempered_law_and_single_fills(tiny):
    """At temperature 0.5 the law is the chain of tempered conditionals; one fill's probability
    (drawn fills outside the cells) is the same chain in one density pass."""
    _, lm = tiny
    mi = masked_input(lm.codec, {1: "b"}, 4)
    truth = exact_distribution(lm, mi, 0.5)
    cells = asarm_cells(lm, mi, 0.02, 0.5)
    assert set(cells) == {f for f, p in truth.items() if p >= 0.02}
    for fill, p in cells.items():
        assert p == pytest.approx(truth[fill], rel=1e-9)
    for fill, p in list(truth.items())[:5]:
        assert asarm_prob(lm, mi, fill, 0.5) == pytest.approx(p, rel=1e-9)


def test_p_value_is_pearsons_chi_square_on_pooled_cells():
    """Against scipy's chisquare on the same cells, cells below 5 expected pooled into "other"."""
    exact = {(1,): 0.5, (2,): 0.3, (3,): 0.15, (4,): 0.04, (5,): 0.01}
    n = 100
    assert pooled_cells(exact, n) == [(1,), (2,), (3,)]  # (4,) and (5,) pooled: 5 expected together
    counts = {(1,): 40, (2,): 38, (3,): 12, (4,): 7, (5,): 3}
    fit = goodness_of_fit(counts, exact, n)
    ref = chisquare([40, 38, 12, 10], [50, 30, 15, 5])
    assert fit.dof == 3 and fit.cells == 4
    assert fit.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert fit.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert fit.tv == pytest.approx(0.5 * (0.10 + 0.08 + 0.03 + 0.05))
    # the same counts drawn from the law itself pass
    assert goodness_of_fit({(1,): 50, (2,): 30, (3,): 15, (4,): 4, (5,): 1}, exact, n).p_value == pytest.approx(1.0)


def test_other_too_small_joins_the_smallest_cells_and_impossible_fills_fail():
    exact = {(1,): 0.6, (2,): 0.37, (3,): 0.03}
    assert pooled_cells(exact, 100) == [(1,)]  # "other" (3 expected) takes (2,) too
    fit = goodness_of_fit({(1,): 60, (2,): 37, (9,): 3}, {**exact, (9,): 0.0}, 100)
    assert fit.p_value == 0.0 and fit.impossible == 3 and "probability 0" in fit.note
    assert verdict(fit) == NOT_CONSISTENT
    one = goodness_of_fit({(1,): 10}, {(1,): 1.0}, 10)
    assert verdict(one) == UNTESTABLE and "one fill" in one.note
    # a low temperature: one fill expects 97 draws, the rest 3 together. The advice is a larger N or a
    # higher temperature, never "no fill has 5 expected draws ... a lower temperature"
    cold = goodness_of_fit({(1,): 97, (2,): 3}, {(1,): 0.97, (2,): 0.02, (3,): 0.01}, 100)
    assert verdict(cold) == UNTESTABLE and "0.970" in cold.note and "N >= 167" in cold.note, cold.note
    assert "lower temperature" not in cold.note and "no fill has" not in cold.note
    spread = goodness_of_fit({(1,): 3, (2,): 7}, {(k,): 0.01 for k in range(100)}, 10)
    assert verdict(spread) == UNTESTABLE and "larger N" in spread.note  # never "consistent" with no test


def test_wrong_samplers_only_in_the_check():
    assert WRONG_SAMPLERS and all(n.startswith("wrong-") for n in WRONG_SAMPLERS)
    assert not set(WRONG_SAMPLERS) & set(SAMPLERS)


def test_stored_check_reads_back_whole(check):
    """What the store keeps (to_json) replays the same table without running anything."""
    d = json.loads(json.dumps(check.to_json()))
    assert set(d["samplers"]["assd-pipelined"]) >= {"counts", "tv_to_exact", "p_value", "calls_per_sample",
                                                    "seconds_per_sample"}
    assert d["exact"]["other"] == pytest.approx(check.other)
    back = from_json(d)
    assert back.exact == check.exact and back.texts == check.texts
    for a, b in zip(back.samplers, check.samplers):
        assert (a.name, a.counts, a.fit.p_value, a.fit.tv) == (b.name, b.counts, b.fit.p_value, b.fit.tv)
    assert back.to_json() == d


@pytest.mark.parametrize("text, kw, exc, words", [
    ("abcb", {}, NoMaskError, "nothing is masked"),
    (TEXT, {"samples": 0}, BadParameterError, "at least 1"),
    (TEXT, {"samples": 20_001}, BadParameterError, "over the limit of 20,000"),
    (TEXT, {"samplers": "assd,sequential", "samples": 300, "budget": CheckBudget(max_draws=500)}, BadParameterError,
     "N <= 250"),
    (TEXT, {"samplers": "self-spec"}, IncompatibleModelsError, "hybrid"),
    (TEXT, {"samplers": "assd,mdm"}, BadParameterError, "different models"),
    (TEXT, {"samplers": "assd-ptp"}, InfillError, "ptp"),
    (TEXT, {"samplers": "nope"}, BadParameterError, "Unknown sampler"),
    (TEXT, {"temperature": 0.0}, BadParameterError, "temperature = 0.0 is outside"),
    (TEXT, {"samples": 2.5}, BadParameterError, "N must be a whole number"),
])
def test_bad_input_gets_a_clear_message(tiny, text, kw, exc, words):
    folder, _ = tiny
    kw = {"samplers": "assd", "samples": 10, **kw}
    with pytest.raises(exc, match=None) as e:
        ExactnessCheck(text, model=str(folder), **kw)
    assert words.lower() in str(e.value).lower()


def test_cli_json_and_errors(tiny, capsys):
    folder, _ = tiny
    assert cli_main(["exactness", TEXT, "--samplers", "sequential,wrong-assd-accept-all", "--samples", "40",
                     "--model", str(folder), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["samplers"]) == {"sequential", "wrong-assd-accept-all"}
    assert sum(d["samplers"]["sequential"]["counts"].values()) == 40 and "other" in d["exact"]
    assert cli_main(["exactness", "abc", "--samplers", "assd", "--model", str(folder)]) == 2
    assert "error: Nothing is masked" in capsys.readouterr().err


def test_cli_inputs_file_runs_each_line_and_names_bad_ones(tiny, tmp_path, capsys):
    """`exactness --inputs`: each good line is checked with seed + line number; a bad line is named by
    its number on stderr and the others still run."""
    folder, _ = tiny
    f = tmp_path / "in.jsonl"
    f.write_text("\n".join([json.dumps({"text": TEXT}), "{not json", json.dumps({"text": "abc"}),
                            json.dumps({"text": "a[MASK:2]", "mask_rate": 0.5}), "", json.dumps({"text": TEXT})]))
    assert cli_main(["exactness", "--inputs", str(f), "--samplers", "sequential", "--samples", "20",
                     "--model", str(folder), "--json"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert [r["line"] for r in d["per_input"]] == [1, 6]
    assert [r["seed"] for r in d["per_input"]] == [1, 6]  # seed + line number: the two runs differ
    assert all(sum(r["samplers"]["sequential"]["counts"].values()) == 20 for r in d["per_input"])
    assert [s.split(": ")[0].rsplit(":", 1)[1] for s in d["skipped"]] == ["2", "3", "4"]
    assert "Nothing is masked" in d["skipped"][1] and "mask_rate" in d["skipped"][2]
    assert f"{f}:2: not JSON" in out.err
    assert cli_main(["exactness", "--samplers", "sequential", "--model", str(folder)]) == 2


def test_any_span_length_gets_a_verdict_with_power(tiny):
    """A span longer than the enumerated table (the whole of 'xxxx', 4 tokens) is checked by the chain
    test: p-value, power against each wrong rule, the departing position, and the JSON carries them."""
    folder, _ = tiny
    res = run_check("[MASK:4]", model=str(folder), samplers="sequential,wrong-assd-accept-all", samples=150,
                    seed=0, k=3)
    seq, wrong = res.samplers
    assert seq.fit is None and res.extra["enumerated"] is False  # no enumeration: the chain test only
    assert seq.p_value >= 0.01 and seq.verdict in (CONSISTENT, "cannot tell at this N"), seq.judgement
    assert wrong.p_value < 1e-3 and wrong.verdict == NOT_CONSISTENT, wrong.judgement
    assert set(seq.judgement.power) == set(WRONG_SAMPLERS) and seq.judgement.power["wrong-assd-accept-all"] >= 0.8
    assert wrong.judgement.worst_position in (1, 2)  # a round's first token is exact; 2nd/3rd drafted
    d = json.loads(json.dumps(res.to_json()))
    s = d["samplers"]["sequential"]
    assert {"p_value", "power", "statistic", "verdict"} <= set(s) and d["seconds"] > 0 and "statistic" in d
    assert from_json(d).samplers[1].judgement.sentence() == wrong.judgement.sentence()


def test_cannot_tell_says_its_power_and_what_would_help(tiny):
    """At N = 5 the power against the residual rule is low: an exact sampler's verdict is "cannot
    tell at this N", with the power and the N that would reach 0.8."""
    folder, _ = tiny
    res = run_check(TEXT, model=str(folder), samplers="sequential", samples=5, seed=0, k=3)
    j = res.samplers[0].judgement
    assert j.verdict == "cannot tell at this N" and j.power["wrong-assd-residual-from-q"] < 0.8, j
    assert "would reach power 0.8" in j.advice or "would not reach" in j.advice, j.advice
    assert "power" in j.sentence() and "wrong-assd-residual-from-q" in j.sentence()
    assert res.extra["pilot"]["wrong-assd-residual-from-q"] == 5  # pilot of min(N, 200) draws


def test_samples_auto_reaches_the_power_within_the_budget(tiny):
    """`samples="auto"`: N chosen from a pilot so the power reaches 0.9 against each wrong rule (or the
    budget's most), and the verdicts carry that power."""
    folder, _ = tiny
    chk = ExactnessCheck(TEXT, model=str(folder), samplers="assd-cache", samples="auto", seed=0, k=3,
                         budget=CheckBudget(max_draws=600, max_seconds=None))
    assert chk.auto and 100 <= chk.samples <= 600 and chk.chosen.startswith("auto: N = ")
    for _ in chk.stream():
        pass
    res = chk.result()
    assert sum(res.samplers[0].counts.values()) == chk.samples
    if "out of reach" not in chk.chosen:
        assert min(res.samplers[0].judgement.power.values()) >= 0.8, res.samplers[0].judgement.power


def test_cli_samples_takes_a_number_or_auto():
    import argparse

    from engine.cli import _samples_arg

    assert _samples_arg("auto") == "auto" and _samples_arg(" AUTO ") == "auto" and _samples_arg("300") == 300
    with pytest.raises(argparse.ArgumentTypeError):
        _samples_arg("lots")


def test_chi_square_smallest_shift_is_the_noncentral_power():
    """Two cells of 0.5 at N = 100, level 0.01: power 0.8 needs noncentrality 11.68 (1 degree of
    freedom), i.e. a shift of sqrt(11.68 / (100 * (2 + 2))) = 0.171 of probability between them."""
    from scipy.stats import chi2, ncx2

    from engine.exactness.power import chi2_min_shift

    d = chi2_min_shift([0.5, 0.5], 100, 0.01)
    lam = 100 * d * d * 4
    assert d == pytest.approx(0.1709, abs=2e-3)
    assert ncx2.sf(chi2.isf(0.01, 1), 1, lam) == pytest.approx(0.8, abs=1e-6)
    assert chi2_min_shift([1.0], 100, 0.01) is None
