"""`python -m tools.probe_fairness [--sessions 20] [--url URL]`: one address cycles long runs from many
sessions while a second address asks for one long run; prints when the second one's run started.

The crowding visitor connects from 127.0.0.2 and keeps `--sessions` long runs in flight, each from
a new Gradio session hash (the hostile script of issue 36 held every long-run seat that way); the
other visitor connects from 127.0.0.3 once the crowd is running and sends one long run. The limits
key on the peer address (app.serving.visitors), so the crowd gets its fair share of seats and the
second visitor's run starts. Without `--url` the app is started in a child process with the
bundled models (`python -m app`)."""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from collections import Counter

from tools.loadtest import form, start_server, stop_server
from tools.visitor_http import call

LONG = "It was the best of times, it was the worst of times, [MASK:{n}]"


def _kind(result: tuple[str, object]) -> str:
    event, data = result
    status = str(data[0]) if event == "complete" and isinstance(data, list) and data else str(data)
    if "Done:" in status:
        return "done"
    if "budget" in status:
        return "stopped"
    if "long runs" in status or "runs in progress" in status:
        return "refused"
    return "error"


def contest(url: str, sessions: int = 20, masked: int = 120, crowd: str = "127.0.0.2", visitor: str = "127.0.0.3",
            timeout: float = 300.0, sampler: str = "sequential") -> dict:
    """Run the scenario; returns the crowd's outcomes, the visitor's outcome and when its run started
    (seconds after it was sent; None if it never did)."""
    stop, lock, crowd_counts, in_flight = threading.Event(), threading.Lock(), Counter(), [0]
    text = LONG.format(n=masked)

    def crowd_loop(i: int) -> None:
        while not stop.is_set():
            with lock:
                in_flight[0] += 1
            try:
                k = _kind(call(url, "infill", list(form(text, sampler, i)), source=crowd,
                               session_hash=uuid.uuid4().hex[:11], timeout=timeout))
            except Exception as e:  # noqa: BLE001
                k = f"error:{type(e).__name__}"
            with lock:
                crowd_counts[k] += 1
                in_flight[0] -= 1

    threads = [threading.Thread(target=crowd_loop, args=(i,), daemon=True) for i in range(sessions)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    while sum(crowd_counts.values()) < sessions and time.monotonic() < deadline:  # the crowd is cycling
        time.sleep(0.05)
    started: list[float] = []
    t0 = time.monotonic()

    def seen(event: str, data: object) -> None:
        if not started and isinstance(data, list) and data and "Running" in str(data[0]):
            started.append(time.monotonic() - t0)

    result = call(url, "infill", list(form(text, sampler, 7)), source=visitor, timeout=timeout, on_event=seen)
    kind = _kind(result)
    if not started and kind in ("done", "stopped"):
        started.append(time.monotonic() - t0)
    stop.set()
    for t in threads:
        t.join(timeout)
    return {"crowd": dict(crowd_counts), "visitor": kind, "started_after": started[0] if started else None,
            "ended_after": time.monotonic() - t0}


def main(argv: list[str] | None = None) -> int:
    """Run the contest and print it (exit 1 when the second visitor's run did not start)."""
    ap = argparse.ArgumentParser(prog="python -m tools.probe_fairness")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--masked", type=int, default=120)
    ap.add_argument("--url")
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args(argv)
    server = None
    url = a.url
    if not url:
        server, url = start_server({"DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/fair.db", "INFILL_SPEEDUP": "0"})
    try:
        r = contest(url, a.sessions, a.masked, timeout=a.timeout)
    finally:
        if server is not None:
            stop_server(server)
    print(f"crowd (127.0.0.2, {a.sessions} sessions): {r['crowd']}; second visitor (127.0.0.3): {r['visitor']}, "
          f"its long run started after {r['started_after']} s, ended after {r['ended_after']:.1f} s", flush=True)
    return 0 if r["started_after"] is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
