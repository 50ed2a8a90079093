"""Small wording rules shared by everything that writes counts for a person: the CLI's summary line,
the protein normaliser's note and the page's status (app.tabs.common re-exports `plural`). A leaf
module: it imports nothing, so the input readers may use it."""

from __future__ import annotations


def plural(n: float, word: str) -> str:
    """`n word` with the plural agreeing ("1 token", "2 tokens", "1.5 calls"; whole floats as whole)."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {word}" + ("" if shown == "1" else "s")
