"""`python -m tools.soak [--refused N] [--normal N] [--oversize N] [--workers W] [--settle S] [--url URL --pid PID]`:
what a server keeps in memory after many requests. It sends N refused runs (a 250,000-character
text: just inside the body limit, refused by the input check), N normal runs (a small infill),
each from a new visitor session as strangers arrive, and N oversize requests (1 MB bodies, the
issue's "refused 1 MB requests", answered 413 by app.serving.limits), and prints the server's resident memory
(RSS, from /proc) when warm, after each kind, and again `--settle` seconds later.

Why: a public demo runs for weeks; memory a request leaves behind adds up (issue 28: 300 refused
1 MB requests raised RSS from 704 to 1,052 MiB). The target is RSS back within 10% of its warm
level after 1,000 refused and 1,000 normal requests.

Without `--url` it starts `python -m app` on a temporary database (its own process, so the
client threads here do not touch its memory). RSS figures do not depend on the machine's load;
they are printed, never asserted."""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter

from tools.loadtest import ONE_ADDRESS_MANY_VISITORS, form, start_server, stop_server

SMALL = "The old man walked to the [MASK:6] and looked at the sea."
REFUSED_CHARS = 250_000  # inside the body limit (256 KiB), over inputs.MAX_INPUT_CHARS: refused with a message


def rss_mib(pid: int) -> float:
    """The resident memory of process `pid` in MiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _runs(url: str, args_for, n: int, workers: int, timeout: float) -> Counter:
    """Submit n runs to /infill from `workers` threads, each run from a new session; count outcomes."""
    from gradio_client import Client

    counts: Counter = Counter()
    lock = threading.Lock()
    todo = iter(range(n))

    def worker() -> None:
        c = Client(url, verbose=False, httpx_kwargs={"timeout": timeout})
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            c.session_hash = str(uuid.uuid4())  # a new visitor each time: per-session state counts
            try:
                out = c.submit(*args_for(i), api_name="/infill").result(timeout=timeout)
                kind = "done" if "Done:" in str(out[0]) else "message"
            except Exception as e:  # noqa: BLE001 - a refused run may come back as an error
                kind = "error:" + type(e).__name__
            with lock:
                counts[kind] += 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def _oversize(url: str, n: int, size: int = 1_000_000) -> Counter:
    """n POSTs of `size` bytes to the queue's join route (app.serving.limits answers 413 before reading)."""
    counts: Counter = Counter()
    body = json.dumps({"data": ["x" * size], "fn_index": 0, "session_hash": "soak"}).encode()
    for _ in range(n):
        req = urllib.request.Request(url + "gradio_api/queue/join", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                counts[r.status] += 1
        except urllib.error.HTTPError as e:
            counts[e.code] += 1
        except OSError as e:
            counts[type(e).__name__] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    """Warm the server up, send each kind of request, print RSS at each stage (never asserted)."""
    ap = argparse.ArgumentParser(prog="python -m tools.soak")
    ap.add_argument("--refused", type=int, default=1000, help="runs refused by the input check (1 MB text)")
    ap.add_argument("--normal", type=int, default=1000, help="small runs, each from a new session")
    ap.add_argument("--oversize", type=int, default=1000, help="1 MB bodies answered 413 by the body limit")
    ap.add_argument("--workers", type=int, default=4, help="client threads")
    ap.add_argument("--warmup", type=int, default=30, help="unmeasured runs before the warm level")
    ap.add_argument("--settle", type=float, default=60.0, help="seconds to wait before the last reading")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--url", help="drive a running server (then --pid names its process)")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started server (repeatable)")
    a = ap.parse_args(argv)
    server = None
    if a.url:
        if not a.pid:
            ap.error("--url needs --pid (the server's process, to read its memory)")
        url, pid = a.url.rstrip("/") + "/", a.pid
    else:
        env = {"DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/soak.db", "INFILL_SPEEDUP": "0",
               **ONE_ADDRESS_MANY_VISITORS}
        env.update(kv.split("=", 1) for kv in a.env)
        server, url = start_server(env)
        pid = server.pid
    try:
        small = lambda i: form(SMALL, "assd-cache", i)  # noqa: E731
        big = "x" * REFUSED_CHARS
        refused = lambda i: form(big, "assd-cache", i)  # noqa: E731
        _runs(url, small, a.warmup, a.workers, a.timeout)
        warm = rss_mib(pid)
        print(f"warm (after {a.warmup} runs): RSS {warm:.0f} MiB", flush=True)
        for label, n, go in (("refused 250 kB runs", a.refused, lambda n: _runs(url, refused, n, a.workers, a.timeout)),
                             ("normal runs", a.normal, lambda n: _runs(url, small, n, a.workers, a.timeout)),
                             ("oversize bodies", a.oversize, lambda n: _oversize(url, n))):
            if n <= 0:
                continue
            t0 = time.perf_counter()
            counts = go(n)
            now = rss_mib(pid)
            print(f"after {n} {label} ({dict(counts)}, {time.perf_counter() - t0:.0f} s): RSS {now:.0f} MiB "
                  f"({now - warm:+.0f} MiB, {100 * (now - warm) / warm:+.1f}% of warm)", flush=True)
        time.sleep(a.settle)
        end = rss_mib(pid)
        print(f"{a.settle:.0f} s later: RSS {end:.0f} MiB ({end - warm:+.0f} MiB, {100 * (end - warm) / warm:+.1f}% of "
              f"warm; target within 10%)", flush=True)
        return 0
    finally:
        if server is not None:
            stop_server(server)


if __name__ == "__main__":
    raise SystemExit(main())
