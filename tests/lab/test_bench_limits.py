"""`bench assd`'s cost-model column and k sweep: the run's own calls priced by size (the median wall ms
of every call of that many rows, pooled over samplers and inputs), a call priced from that curve
(linear between sizes), each sampler's `limit` (the baseline's calls over its calls, both priced by
the curve) and the best k of a sweep. Pure functions over made-up numbers, so each rule is checked
exactly; one real run checks that every AS-ARM call gets its own seconds."""

from __future__ import annotations

import pytest

from lab.bench import add_limits, best_k, call_cost, observed_costs, round_shares

CURVE = {2: 5.0, 4: 6.0, 8: 10.0}


def test_call_cost_reads_the_grid_and_interpolates_between_points():
    assert call_cost(CURVE, 2) == 5.0 and call_cost(CURVE, 8) == 10.0
    assert call_cost(CURVE, 3) == pytest.approx(5.5)
    assert call_cost(CURVE, 6) == pytest.approx(8.0)
    assert call_cost(CURVE, 10) == pytest.approx(12.0), "beyond the grid: the last slope carries on"
    assert call_cost(CURVE, 1) == 5.0, "below the grid: the smallest call"


def test_limit_is_the_baseline_calls_over_the_sampler_calls_priced_by_the_curve():
    measured = [
        {"sequential-cache": {"rows": [2, 2, 2, 2]}, "assd-cache": {"rows": [4, 8]}},
        {"sequential-cache": {"rows": [2, 2]}, "assd-cache": {"rows": [3]}},
    ]
    rows = [{"sampler": "sequential-cache"}, {"sampler": "assd-cache"}]
    add_limits(rows, measured, CURVE)
    assert rows[0]["limit_vs_sequential_cache"] == pytest.approx(1.0)
    assert rows[1]["limit_vs_sequential_cache"] == pytest.approx(30.0 / (6.0 + 10.0 + 5.5))


def test_no_limit_without_the_baseline_or_without_calls():
    rows = [{"sampler": "assd"}, {"sampler": "mdm"}]
    add_limits(rows, [{"assd": {"rows": [4]}, "mdm": {"rows": []}}], CURVE)
    assert "limit_vs_sequential_cache" not in rows[0]
    rows = [{"sampler": "sequential-cache"}, {"sampler": "mdm"}]
    add_limits(rows, [{"sequential-cache": {"rows": [2]}, "mdm": {"rows": []}}], CURVE)
    assert "limit_vs_sequential_cache" not in rows[1], "a sampler with no AS-ARM call has no limit"


def test_best_k_takes_the_highest_ratio_per_sampler_and_skips_the_baseline():
    sweep = [
        {"k": 3, "rows": [{"sampler": "sequential-cache", "wall_ratio_vs_sequential_cache": 1.0},
                          {"sampler": "assd-cache", "wall_ratio_vs_sequential_cache": 0.9},
                          {"sampler": "assd-ptp", "wall_ratio_vs_sequential_cache": 1.3}]},
        {"k": 5, "rows": [{"sampler": "sequential-cache", "wall_ratio_vs_sequential_cache": 1.0},
                          {"sampler": "assd-cache", "wall_ratio_vs_sequential_cache": 1.1},
                          {"sampler": "assd-ptp", "wall_ratio_vs_sequential_cache": 1.2}]},
    ]
    assert best_k(sweep) == {"assd-cache": (5, 1.1), "assd-ptp": (3, 1.3)}


def test_best_k_keeps_the_smaller_k_on_a_tie():
    sweep = [{"k": k, "rows": [{"sampler": "assd", "wall_ratio_vs_sequential_cache": 1.0}]} for k in (3, 5)]
    assert best_k(sweep) == {"assd": (3, 1.0)}


def test_round_shares_split_the_wall_time_per_round_and_the_host_takes_the_rest():
    got = round_shares(seconds=2.0, asarm=1.2, drafter=0.3, rounds=100)
    assert got == pytest.approx({"asarm_ms_per_round": 12.0, "drafter_ms_per_round": 3.0, "host_ms_per_round": 5.0})
    old = round_shares(seconds=2.0, asarm=0.0, drafter=0.0, rounds=100)  # a partial file from before the timers
    assert old["host_ms_per_round"] == pytest.approx(20.0)


def test_measured_over_limit_is_the_wall_ratio_over_the_limit():
    measured = [{"sequential-cache": {"rows": [2, 2, 2, 2]}, "assd-cache": {"rows": [4, 8]}}]
    rows = [{"sampler": "sequential-cache", "wall_ratio_vs_sequential_cache": 1.0},
            {"sampler": "assd-cache", "wall_ratio_vs_sequential_cache": 0.6}]
    add_limits(rows, measured, CURVE)
    assert rows[1]["measured_over_limit"] == pytest.approx(0.6 / (20.0 / 16.0))


def test_observed_costs_are_the_median_ms_of_the_runs_calls_of_each_size_over_every_sampler():
    measured = [
        {"sequential-cache": {"rows": [2, 2, 9], "call_seconds": [0.004, 0.006, 0.030]},
         "assd-cache": {"rows": [4, 2], "call_seconds": [0.010, 0.100]}},
        {"sequential-cache": {"rows": [2], "call_seconds": [0.005]},
         "assd-cache": {"rows": [4, 4], "call_seconds": [0.020, 0.012]}},
    ]
    got = observed_costs(measured)
    assert list(got) == [2, 4, 9]  # sizes in order: call_cost interpolates between them
    assert got[2] == pytest.approx(5.5), "median of 4, 6, 100 (another sampler's call) and 5 ms"
    assert got[4] == pytest.approx(12.0) and got[9] == pytest.approx(30.0)
    assert observed_costs([{"assd": {"rows": [3]}}]) == {}, "no seconds recorded: no curve, no limit"


def test_every_asarm_call_of_a_run_gets_its_own_seconds_and_they_add_up(tiny_asarm):
    """The oracle books each call's wall seconds (a late output head's to the call it reads) beside
    its shape, so bench assd can price every call; their sum is the run's AS-ARM seconds."""
    from engine.api import InfillRun
    from tests.support.tiny import masked_input

    mi = masked_input(tiny_asarm.codec, {1: "b"}, 6)
    for sampler in ("sequential", "assd-pipelined", "assd-ngram"):
        r = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler=sampler, seed=0, k=3, cache=True)
        list(r.stream())
        res = r.result(with_log_prob=False)
        assert len(r.call_seconds) == len(r.call_shapes) == res.calls > 0, sampler
        assert all(s > 0 for s in r.call_seconds)
        assert sum(r.call_seconds) == pytest.approx(r.asarm_seconds), sampler


def test_the_call_clock_books_a_late_head_to_the_latest_call():
    """CallClock: each call gets its own seconds; later work on a call (an output head run after it)
    is added to the latest call; a late head before any call starts an entry of its own."""
    import time

    from engine.samplers.oracle import CallClock

    c = CallClock()
    now = time.perf_counter()
    c.spent(now - 4.0, call=False)  # nothing called yet: its own entry
    c.spent(now - 1.0, call=True)
    c.spent(now - 2.0, call=True)
    c.spent(now - 3.0, call=True)
    c.spent(now - 5.0, call=False)  # the third call's late head
    assert c.call_seconds == pytest.approx([4.0, 1.0, 2.0, 8.0], abs=0.2)
    assert c.seconds == pytest.approx(15.0, abs=0.5)


def test_every_xlnet_call_gets_its_own_seconds():
    """XLNetOracle books its calls on the same clock: one entry per call, summing to its seconds."""
    from engine.samplers.oracle import XLNetOracle
    from tests.engine.models.test_xlnet_reference import random_xlnet
    from tests.support.tiny import masked_input, tiny_codec

    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=2)
    mi = masked_input(codec, {0: "a"}, 6)
    a, b = codec.encode("ab")
    for cached in (False, True):
        o = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=cached)
        o.call([(1, a), (2, b)], [(1, 0), (2, 1)])
        o.commit(1, a)
        o.call([], [(2, 0)])
        o.call([], [(3, 0)])
        assert len(o.call_seconds) == o.calls == 3 and all(s > 0 for s in o.call_seconds)
        assert sum(o.call_seconds) == pytest.approx(o.seconds)
