"""kill -9 under Compare load leaves no half comparison (storage.recorder.RunGroup): the server is
killed while visitors loop Compare, then the store is searched for comparison sessions with a
missing side. Slow: it starts the app several times with the bundled models."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_kill_9_under_compare_load_leaves_no_half_comparison(tmp_path, capsys):
    from tools import probe_compare_kill

    db = tmp_path / "kill.db"
    assert probe_compare_kill.main(["--kills", "3", "--clients", "6", "--per-kill", "6", "--db", str(db)]) == 0
    total, half = probe_compare_kill.half_written(db)
    assert total > 0, "no comparison was stored: the load never ran"
    assert half == 0
