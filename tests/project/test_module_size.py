"""No runtime module over MAX_LINES lines (issue 23): a long module holds several concerns, and a
reader has to learn them all to change one. Runtime: app/, storage/ and engine/ (lab/ is tooling).

KNOWN_LONG lists the modules that were longer when this test was written, with their length
then: they may not grow, and the helper who splits one removes it here (the test fails when a
listed module fits, so the list cannot go stale)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
#: to be emptied (engine/ runtime, 2026-11-25)
KNOWN_LONG: dict[str, int] = {}  # emptied: engine/loading/registry.py and engine/exactness/check.py were split (issue 23)


def lengths() -> dict[str, int]:
    files = [p for d in ("app", "engine", "storage") for p in (ROOT / d).rglob("*.py")]
    return {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in files}


def test_no_runtime_module_is_too_long():
    n = lengths()
    long = {f: k for f, k in n.items() if k > MAX_LINES and f not in KNOWN_LONG}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"
    grown = {f: (n[f], k) for f, k in KNOWN_LONG.items() if f in n and n[f] > k}
    assert not grown, f"known long modules grew (now, then): {grown}"


def test_known_long_modules_are_still_long():
    n = lengths()
    fits = [f for f in KNOWN_LONG if n.get(f, 0) <= MAX_LINES]
    assert not fits, f"now within {MAX_LINES} lines (or gone), remove from KNOWN_LONG: {fits}"
