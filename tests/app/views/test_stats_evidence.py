"""The statistics charts show counts and intervals, and no acceptance point from too few tested
drafts (one run's 0.17 -> 1 -> 0 was charted as a trend)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.views import plots
from storage.records import RankRate


def _group(ranks):
    return SimpleNamespace(sampler="assd", model="m", params={}, acceptance_by_rank=ranks,
                           tokens_per_call=[1.5, 2.0], calls_vs_masked=[(10, 6)])


def test_wilson_interval():
    lo, hi = plots.wilson(8, 10)
    assert lo == pytest.approx(0.490, abs=1e-3) and hi == pytest.approx(0.943, abs=1e-3)
    assert plots.wilson(0, 0) == (0.0, 1.0)


def test_only_positions_with_enough_tested_drafts_are_charted_with_intervals_and_counts():
    ranks = [RankRate(0, 30, 10), RankRate(1, 1, 0), RankRate(2, 12, 8)]  # position 1: one tested draft
    f1, f2, _ = plots.stats_figures([_group(ranks)])
    (tr,) = f1.data
    assert list(tr.x) == [0, 2] and tr.error_y.array is not None
    assert list(tr.text) == ["30 of 40 tested drafts accepted", "12 of 20 tested drafts accepted"]
    assert "(2 runs)" in f2.data[0].name


def test_no_chart_from_too_few():
    f1, _, _ = plots.stats_figures([_group([RankRate(0, 1, 0), RankRate(1, 0, 1)])])
    assert not f1.data and "too few tested drafts" in f1.layout.annotations[0].text
