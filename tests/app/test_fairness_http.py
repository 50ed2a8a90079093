"""Visitors from different loopback addresses (127.0.0.2, 127.0.0.3) against a running studio: one
address cycling 20 sessions cannot keep another's long run from starting (app.serving.visitors,
app.serving.admission)."""

from __future__ import annotations

import pytest

from app.serving import admission as adm_mod
from tests.support.studio import tiny_studio


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tools.tiny_models import launch_for_tests

    with tiny_studio(tmp_path_factory.mktemp("fair")) as st:
        demo, url = launch_for_tests()
        try:
            yield url, st
        finally:
            demo.close()


def test_one_address_cycling_sessions_cannot_crowd_out_another(server, monkeypatch):
    from tools.probe_fairness import contest

    url, _ = server
    # few seats, so that 20 sessions of one visitor would hold them all if visitors were sessions
    monkeypatch.setattr(adm_mod, "_admission", adm_mod.Admission(seats=3, line=1, per_visitor=2))
    r = contest(url, sessions=20, masked=60, timeout=240)
    assert r["visitor"] in ("done", "stopped"), r
    assert r["started_after"] is not None
    assert r["crowd"].get("refused", 0) > 0  # the crowd was held to its share, not the other visitor
    assert adm_mod.admission().refusals().get("127.0.0.2", 0) == r["crowd"]["refused"]
    assert "127.0.0.3" not in adm_mod.admission().refusals()
