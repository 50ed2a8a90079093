"""A visitor of the studio from a chosen source address, over plain HTTP (Gradio's REST "call"
API): tests and probes bind the client socket to 127.0.0.2, 127.0.0.3, ... so that each stands
for a different visitor (the limits key on the peer address: app.serving.visitors). gradio_client
cannot bind its sockets, hence this small client."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit


def _conn(url: str, source: str | None, timeout: float) -> http.client.HTTPConnection:
    u = urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout,
                                      source_address=(source, 0) if source else None)


def submit(url: str, api: str, data: list, source: str | None = None, session_hash: str | None = None,
           timeout: float = 60.0) -> str:
    """Queue one call of /`api` with `data` from `source`; its event id."""
    c = _conn(url, source, timeout)
    try:
        body = json.dumps({"data": data, "session_hash": session_hash or uuid.uuid4().hex[:11]})
        c.request("POST", f"/gradio_api/call/{api}", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        if r.status != 200:
            raise RuntimeError(f"/call/{api} answered {r.status}: {text[:200]}")
        return json.loads(text)["event_id"]
    finally:
        c.close()


def events(url: str, api: str, event_id: str, source: str | None = None, timeout: float = 300.0,
           on_event: Callable[[str, object], None] | None = None) -> tuple[str, object]:
    """Follow an event's stream to its end: ('complete' | 'error', its last data). `on_event` sees
    every (event, data) as it arrives (a test waits for a state, e.g. the first round)."""
    c = _conn(url, source, timeout)
    deadline = time.monotonic() + timeout
    try:
        c.request("GET", f"/gradio_api/call/{api}/{event_id}")
        r = c.getresponse()
        kind, last = "", None
        while time.monotonic() < deadline:
            line = r.readline()
            if not line:
                return "error", "the stream ended without a result"
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                last = json.loads(line[6:])
                if on_event is not None:
                    on_event(kind, last)
                if kind in ("complete", "error"):
                    return kind, last
        return "error", "timed out"
    finally:
        c.close()


def call(url: str, api: str, data: list, source: str | None = None, session_hash: str | None = None,
         timeout: float = 300.0, on_event: Callable[[str, object], None] | None = None) -> tuple[str, object]:
    """submit() then events(): one visitor's whole call."""
    eid = submit(url, api, data, source, session_hash, timeout=min(timeout, 60.0))
    return events(url, api, eid, source, timeout, on_event)
