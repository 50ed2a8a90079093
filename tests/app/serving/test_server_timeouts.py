"""The server's own timeouts (app.serving.timeouts): a connection that never finishes its headers,
a body shorter than its Content-Length and an idle keep-alive connection are all closed."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from tests.support.studio import tiny_studio


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tools.tiny_models import launch_for_tests

    mp = pytest.MonkeyPatch()
    for k in ("INFILL_HEADER_TIMEOUT", "INFILL_BODY_TIMEOUT", "INFILL_KEEPALIVE_TIMEOUT"):
        mp.setenv(k, "1")
    with tiny_studio(tmp_path_factory.mktemp("timeouts")):
        demo, url = launch_for_tests()
        try:
            u = urlsplit(url)
            yield u.hostname, u.port
        finally:
            demo.close()
            mp.undo()


def _closed_by_server(s: socket.socket, bound: float = 60.0) -> bytes:
    """Read until the server closes the connection (bounded: a hang fails, never waits forever)."""
    s.settimeout(bound)
    data = b""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    raise AssertionError("the server kept the connection open")


@pytest.mark.parametrize("sent", [
    b"",  # connected, nothing sent
    b"GET /config HTTP/1.1\r\nHost: x\r\n",  # headers never finished
    b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"data\":",  # a body shorter than its Content-Length
], ids=["silent", "half-headers", "short-body"])
def test_half_open_requests_are_answered_408_and_closed(server, sent):
    with socket.create_connection(server) as s:
        s.sendall(sent)
        reply = _closed_by_server(s)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:80]


def test_an_idle_keepalive_connection_is_closed_and_a_normal_request_is_not_cut(server):
    with socket.create_connection(server) as s:
        s.sendall(b"GET /config HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(60)
        head = s.recv(65536)
        assert head.startswith(b"HTTP/1.1 200"), head[:80]
        _closed_by_server(s)  # the rest of the answer, then keep-alive's close
