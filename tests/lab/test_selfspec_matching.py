"""The self-spec-against-MDM number of `bench self-spec`: calls at MDM's best quality, bootstrapped."""

from __future__ import annotations

from lab.bench_selfspec import _spelled, calls_to_reach, self_spec_at_mdm_best


def test_calls_to_reach_interpolates_and_says_when_it_is_a_bound():
    curve = [(10.0, 0.5), (20.0, 0.7), (40.0, 0.8)]
    assert calls_to_reach(curve, 0.6) == (15.0, "exact")
    assert calls_to_reach(curve, 0.4) == (10.0, "upper")
    assert calls_to_reach(curve, 0.9) == (40.0, "lower")
    assert calls_to_reach([(5.0, 2.0), (9.0, 1.0)], 1.5, lower_better=True) == (7.0, "exact")


def _row(sampler, calls, spelled):
    return {"sampler": sampler, "per_input": {"calls_best": calls, "spelled": spelled}}


def test_ratio_is_self_spec_calls_at_mdm_best_over_mdm_calls():
    n = 4
    rows = [_row("mdm", [8] * n, [(5, 10)] * n), _row("mdm", [64] * n, [(8, 10)] * n),
            _row("self-spec", [12] * n, [(6, 10)] * n), _row("self-spec", [24] * n, [(9, 10)] * n)]
    m = self_spec_at_mdm_best(rows, n, boot=50)
    assert m["mdm_best_quality"] == 0.8 and m["mdm_calls_at_best"] == 64
    assert abs(m["ratio"] - (12 + 12 * (0.8 - 0.6) / 0.3) / 64) < 1e-12  # 20 calls / 64
    assert m["how"] == "exact" and m["ratio_ci95"][0] <= m["ratio"] <= m["ratio_ci95"][1]


def test_character_level_spelling_skips_the_words_the_window_cuts():
    vocab = frozenset({"the", "cat", "sat"})
    assert _spelled("he cat sat xq", vocab, whole_window=True) == (2, 2)
    assert _spelled("he cat sat xq", vocab, whole_window=False) == (2, 4)


def test_a_resample_where_self_spec_never_reaches_mdm_leaves_the_interval_unbounded():
    n = 4
    rows = [_row("mdm", [8] * n, [(5, 10)] * n), _row("mdm", [64] * n, [(9, 10)] * n),
            _row("self-spec", [12] * n, [(6, 10)] * n), _row("self-spec", [24] * n, [(7, 10)] * n)]
    m = self_spec_at_mdm_best(rows, n, boot=20)
    assert m["how"] == "lower" and m["never_reached_share"] == 1.0
    assert m["ratio_ci95"][1] is None  # no finite upper end when self-spec never gets there
