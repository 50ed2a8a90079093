"""The page's one unit for speed: a speed ratio said as "1.30x faster" or "1.30x slower" (never a
time ratio), with its interval turned round with it. The player's line, Compare's verdict, the
sampler help and Statistics all say speed with it, so a reader never converts between two."""

from __future__ import annotations


def speed_words(ratio: float, lo: float | None = None, hi: float | None = None) -> str:
    """A speed ratio (above 1: faster) in the page's one unit: "1.30x faster (1.10-1.50)" or
    "1.30x slower (1.10-1.50)", the interval turned round with it; an interval that holds both
    says so in words, "1.10x faster (from 1.32x slower to 1.28x faster)", where "(0.76-1.28)" under
    "faster" would read as faster throughout."""
    if lo is not None and hi is not None and lo < 1 < hi:
        return f"{speed_words(ratio)} (from {1 / lo:.2f}x slower to {hi:.2f}x faster)"
    if ratio >= 1:
        words, r, a, b = "faster", ratio, lo, hi
    else:
        words, r = "slower", 1 / ratio
        a, b = (None if hi is None else 1 / hi), (None if lo is None else 1 / lo)
    span = f" ({a:.2f}-{b:.2f})" if a is not None and b is not None else ""
    return f"{r:.2f}x {words}{span}"
