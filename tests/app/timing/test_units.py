"""The page's one unit for speed: a ratio in words, its interval turned round with it, and an
interval that holds both directions said as such."""

from __future__ import annotations

from app.timing.units import speed_words


def test_a_speed_ratio_reads_faster_or_slower_with_its_interval_turned_round():
    assert speed_words(1.3, 1.1, 1.5) == "1.30x faster (1.10-1.50)"
    assert speed_words(0.8, 0.5, 0.9) == "1.25x slower (1.11-2.00)"
    assert speed_words(1.3) == "1.30x faster"


def test_an_interval_across_one_says_it_holds_slower_and_faster():
    said = speed_words(1.10, 0.76, 1.28)
    assert said == "1.10x faster (from 1.32x slower to 1.28x faster)", said
    assert speed_words(0.9, 0.8, 1.2) == "1.11x slower (from 1.25x slower to 1.20x faster)"
