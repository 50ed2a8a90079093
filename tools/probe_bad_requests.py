"""`python -m tools.probe_bad_requests [--url URL --log FILE]`: send the studio a batch of bad requests
(malformed bodies, wrong values for every API endpoint, broken HTTP) and count what its log got:
lines, tracebacks, lines per bad request (the target: at most one line each, no traceback for an
input error). Without --url it starts `python -m app` in a child process and reads its stderr."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from tools.loadtest import ONE_ADDRESS_MANY_VISITORS, form
from tools.tiny_models import free_port
from tools.visitor_http import call

TEXT = "The cat sat on the [MASK:4] mat."


def _raw(url: str, payload: bytes, read: bool = True) -> bytes:
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=15) as s:
        s.sendall(payload)
        if not read:
            return b""
        chunks = []
        deadline = time.monotonic() + 15  # an event stream never ends by itself (heartbeats)
        try:
            while time.monotonic() < deadline:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except OSError:
            pass
        return b"".join(chunks)


def _post(path: str, body: bytes, ctype: str = "application/json", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n{extra}\r\n").encode() + body


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


def bad_requests() -> list[tuple[str, object]]:
    """(name, what to send): a raw HTTP payload (bytes), or (api, values) for the REST call API."""
    good = list(form(TEXT, "assd", 3, k=4))
    cases: list[tuple[str, object]] = []
    for v in [None, "x", [1], {"a": 1}, 1e309, -1, 2**70, "\ud800"]:
        for j in (1, 2, 3, 4, 6, 7, 10):
            vals = list(good)
            vals[j] = v
            cases.append((f"infill value {j}={v!r:.20}", ("infill", vals)))
    for api in ("infill", "compare", "stop", "scrub", "play", "check", "stats", "open_session", "export", "nope"):
        cases.append((f"{api} no values", (api, [])))
        cases.append((f"{api} junk values", (api, ["\x00", None, [], {}, 1e308])))
    for path in ("/gradio_api/queue/join", "/gradio_api/call/infill", "/gradio_api/cancel", "/gradio_api/run/predict"):
        for body in (b"", b"{", b"[]", b"null", b'{"data": "x"}', b'{"data": [], "fn_index": 999}',
                     b'{"data": [1], "fn_index": -1, "session_hash": 5}', b"\xff\xfe"):
            cases.append((f"POST {path} {body[:12]!r}", _post(path, body)))
    for path in ("/gradio_api/call/infill/nope", "/gradio_api/queue/data?session_hash=", "/gradio_api/file=../../etc/passwd",
                 "/gradio_api/file=/etc/passwd", "/gradio_api/heartbeat/%00", "/gradio_api/info?x=%ff", "/%2e%2e/",
                 "/gradio_api/stream/x/y/z/playlist.m3u8", "/config?" + "a=1&" * 2000, "/gradio_api/upload"):
        cases.append((f"GET {path[:40]}", _get(path)))
    cases += [
        ("bad Content-Length", b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
        ("negative Content-Length", b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
        ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"),
        ("HTTP/0.9", b"GET /\r\n\r\n"), ("huge header", b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70000 + b"\r\n\r\n"),
        ("bad chunked", b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
    ]
    return cases


def send_all(url: str, cases: list[tuple[str, object]]) -> int:
    """Send every case (answers are not judged here: the log is); how many were sent."""
    for _name, what in cases:
        try:
            if isinstance(what, bytes):
                _raw(url, what)
            else:
                api, values = what
                call(url, api, values, timeout=10)
        except Exception:  # noqa: BLE001 - a refused request may well break the connection
            pass
    return len(cases)


def count_log(text: str) -> tuple[int, int]:
    """(lines, tracebacks) in a log."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return len(lines), sum("Traceback (most recent call last)" in ln for ln in lines)


def main(argv: list[str] | None = None) -> int:
    """Send the batch and print the log's count (exit 1 past one line per request or on a traceback)."""
    ap = argparse.ArgumentParser(prog="python -m tools.probe_bad_requests")
    ap.add_argument("--url")
    ap.add_argument("--log", help="the running server's log file (with --url)")
    ap.add_argument("--show", action="store_true", help="print the log lines")
    a = ap.parse_args(argv)
    proc = None
    if a.url:
        url, log_path = a.url, Path(a.log)
    else:
        tmp = Path(tempfile.mkdtemp())
        log_path, port = tmp / "app.log", free_port()
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/bad.db", "INFILL_SPEEDUP": "0",
               **ONE_ADDRESS_MANY_VISITORS}
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if b"200 OK" in _raw(url, _get("/config"))[:20]:
                    break
            except OSError:
                time.sleep(0.5)
    try:
        before = log_path.read_text(errors="replace")
        cases = bad_requests()
        n = send_all(url, cases)
        time.sleep(2)  # the last lines reach the file
        after = log_path.read_text(errors="replace")[len(before):]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    lines, tracebacks = count_log(after)
    if a.show:
        print(after)
    print(json.dumps({"bad_requests": n, "log_lines": lines, "tracebacks": tracebacks,
                      "lines_per_request": round(lines / n, 3)}), flush=True)
    return 0 if tracebacks == 0 and lines <= n else 1


if __name__ == "__main__":
    raise SystemExit(main())
