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
    monkeypatch.setenv("INFILL_LIMIT_RUN", "0,0")  # the crowd meets admission, not the call limits
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
    assert set(data) == {"runs_refused_by_address", "runs_in_progress_by_address", "sessions_by_address",
                         "calls_refused_by_address"}
    assert get("127.0.0.2")[0] == 404  # a visitor's address is not the operator's


def test_a_stop_flood_from_one_address_is_refused_and_others_stop_at_once(server, caplog):
    """40 Stops at once from 127.0.0.2 (issue 48: each used to hold a server thread for 10 s): all but
    the address's bound are refused 429 with one sentence and one log line; 127.0.0.3's Stop is
    answered at once."""
    import http.client
    import json
    import logging
    import time
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlsplit

    from app.serving import call_limits

    url, _ = server
    u = urlsplit(url)

    def stop(source: str):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60, source_address=(source, 0))
        t0 = time.perf_counter()
        try:
            c.request("POST", "/gradio_api/run/stop", json.dumps({"data": [""], "session_hash": "flood"}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read().decode(), time.perf_counter() - t0
        finally:
            c.close()

    with caplog.at_level(logging.INFO, logger="app.limits"), ThreadPoolExecutor(40) as pool:
        flood = list(pool.map(stop, ["127.0.0.2"] * 40))
        other = stop("127.0.0.3")
    codes = [s for s, _, _ in flood]
    in_flight, per_minute = call_limits.bounds("stop")
    assert codes.count(200) <= per_minute and codes.count(429) >= 40 - per_minute
    assert "Too many Stop requests from your address" in next(b for s, b, _ in flood if s == 429)
    assert other[0] == 200 and "Nothing is running" in other[1] and other[2] < 1.0
    assert len([r for r in caplog.records if r.name == "app.limits" and "127.0.0.2" in r.getMessage()]) == 1
