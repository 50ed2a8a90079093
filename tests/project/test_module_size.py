"""No runtime module over MAX_LINES lines: a long module holds several concerns, and a reader has
to learn them all to change one. Runtime: app/, storage/ and engine/ (lab/ is tooling)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
RUNTIME = ("app", "engine", "storage")


def lengths() -> dict[str, int]:
    files = [p for d in RUNTIME for p in (ROOT / d).rglob("*.py")]
    return {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in files}


def test_no_runtime_module_is_too_long():
    n = lengths()
    long = {f: k for f, k in n.items() if k > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_the_count_reads_every_runtime_tree():
    """The rule above holds only if it reads the modules: each runtime package's entry module is
    counted, with its real length, and the longest module is near the bound, not at zero."""
    n = lengths()
    for f in ("engine/api.py", "app/ui.py", "storage/repository.py"):
        assert n.get(f, 0) > 20, f"{f} not counted: {sorted(n)[:5]}..."
    assert max(n.values()) > MAX_LINES // 2
