"""`python -m tools.probe_half_open [--connections 40] [--url URL]`: open unfinished requests (a silent
connection, headers never finished, a body shorter than its Content-Length) and time how long the
server holds each before it closes it (app.serving.timeouts: headers within INFILL_HEADER_TIMEOUT,
default 10 s; the body within INFILL_BODY_TIMEOUT, default 30 s, after them). Without --url it
starts `python -m app` in a child process."""

from __future__ import annotations

import argparse
import selectors
import socket
import tempfile
import time
from urllib.parse import urlsplit

from tools.loadtest import start_server, stop_server

KINDS = {
    "silent": b"",
    "half-headers": b"GET /config HTTP/1.1\r\nHost: x\r\n",
    "short-body": b"POST /gradio_api/queue/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"data\":",
}


def hold(url: str, n: int, bound: float = 120.0) -> dict[str, list[float | None]]:
    """Open n unfinished requests (the kinds in turn); seconds until the server closed each (None:
    still open after `bound`)."""
    u = urlsplit(url)
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    names = list(KINDS)
    out: dict[str, list[float | None]] = {k: [] for k in names}
    for i in range(n):
        kind = names[i % len(names)]
        s = socket.create_connection((u.hostname, u.port), timeout=10)
        s.sendall(KINDS[kind])
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, (kind, len(out[kind])))
        out[kind].append(None)
    left = n
    while left and time.monotonic() - t0 < bound:
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                kind, j = key.data
                out[kind][j] = time.monotonic() - t0
                sel.unregister(s)
                s.close()
                left -= 1
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Hold the connections and print, per kind, how many the server closed and the latest close."""
    ap = argparse.ArgumentParser(prog="python -m tools.probe_half_open")
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--url")
    ap.add_argument("--bound", type=float, default=120.0)
    a = ap.parse_args(argv)
    server = None
    url = a.url
    if not url:
        server, url = start_server({"DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/half.db"})
    try:
        out = hold(url, a.connections, a.bound)
    finally:
        if server is not None:
            stop_server(server)
    held = 0
    for kind, times in out.items():
        closed = [t for t in times if t is not None]
        held += len(times) - len(closed)
        print(f"{kind}: {len(closed)}/{len(times)} closed by the server"
              + (f", the last after {max(closed):.1f} s" if closed else ""), flush=True)
    return 1 if held else 0


if __name__ == "__main__":
    raise SystemExit(main())
