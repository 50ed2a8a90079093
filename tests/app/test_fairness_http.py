"""Visitors from different loopback addresses (127.0.0.2, 127.0.0.3) against a running studio: one
address cycling 20 sessions cannot keep another's long run from starting (app.serving.visitors,
app.serving.admission)."""

from __future__ import annotations

import pytest

from app.serving import admission as adm_mod
from tests.support.studio import launched_studio


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with launched_studio(tmp_path_factory.mktemp("fair")) as (_, url, st):
        yield url, st


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


def test_the_operator_reads_refusals_by_address_and_visitors_cannot(server):
    import http.client
    import json
    from urllib.parse import urlsplit

    url, _ = server
    u = urlsplit(url)

    def get(source: str):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60, source_address=(source, 0))
        try:
            c.request("GET", "/operator/stats")
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    status, body = get("127.0.0.1")
    assert status == 200
    data = json.loads(body)
    assert set(data) == {"runs_refused_by_address", "runs_in_progress_by_address", "sessions_by_address"}
    assert get("127.0.0.2")[0] == 404  # a visitor's address is not the operator's
