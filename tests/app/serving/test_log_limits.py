"""The log under abuse: one line per refused request and no traceback for an input error
(app.ui.StudioBlocks, app.serving.limits.refused_request), and a rate limit on repeated lines
(app.serving.log_limits)."""

from __future__ import annotations

import logging

import pytest

from app.serving.log_limits import RepeatLimit
from tests.support.studio import launched_studio


def _record(msg: str, *args) -> logging.LogRecord:
    return logging.LogRecord("engine.loading.registry", logging.WARNING, __file__, 1, msg, args, None)


def test_repeated_lines_are_limited_and_the_count_left_out_is_said():
    now = [0.0]
    lim = RepeatLimit(burst=5, window=60, clock=lambda: now[0])
    passed = [lim.filter(_record("folder %s unreadable", i)) for i in range(100)]
    assert sum(passed) == 5
    assert lim.filter(_record("another template")) is True  # other lines are not held back
    now[0] = 61.0
    r = _record("folder %s unreadable", 7)
    assert lim.filter(r) is True and "95 more like this" in r.getMessage()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with launched_studio(tmp_path_factory.mktemp("logs")) as (_, url, _store):
        yield url


def test_bad_requests_log_one_line_each_and_no_traceback(server, capfd, caplog):
    from tools.probe_bad_requests import _post, _raw
    from tools.visitor_http import call

    sent = 0
    with caplog.at_level(logging.INFO, logger="app.requests"):
        for api, values in (("infill", []), ("stats", ["\x00", None, []]), ("nope", [1]), ("scrub", ["\x00", None])):
            try:
                call(server, api, values, timeout=60)
            except RuntimeError as e:  # refused at the door: an unknown endpoint
                assert "404" in str(e) and api == "nope"
            sent += 1
        for body in (b'{"data": [], "fn_index": 999, "session_hash": "x"}', b'{"data": [1], "fn_index": -1}'):
            _raw(server, _post("/gradio_api/queue/join", body))
            sent += 1
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-2000:]
    lines = [r for r in caplog.records if r.name == "app.requests"]
    assert 1 <= len(lines) <= sent and all(r.exc_info is None for r in lines)
