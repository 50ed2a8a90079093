"""`python -m tools.probe_compare_kill [--kills 5] [--clients 8]`: kill -9 the studio while visitors loop
Compare, then count comparison sessions that hold fewer than two runs (the answer must be 0: a
comparison is stored whole, storage.recorder.RunGroup).

Each round starts `python -m app` on one SQLite file, lets `--clients` visitors loop Compare
("A [MASK:3] b.", assd-cache against sequential) until `--per-kill` comparisons have come back since
the start (state, not a timer: the machine may be loaded), sends SIGKILL, and starts the next
round on the same file. Prints how many comparisons the clients saw finish and the count of
half-written ones; exit status 1 when there is one."""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from tools.loadtest import ONE_ADDRESS_MANY_VISITORS, form, start_server

TEXT = "A [MASK:3] b."


def _loop(url: str, stop: threading.Event, done: list[int], lock: threading.Lock, timeout: float) -> None:
    """One visitor looping Compare until `stop` (or its server dies)."""
    from gradio_client import Client

    try:
        c = Client(url, verbose=False, httpx_kwargs={"timeout": timeout})
    except Exception:  # noqa: BLE001 - the server was killed before this visitor connected
        return
    i = 0
    while not stop.is_set():
        i += 1
        try:
            out = c.submit(*form(TEXT, "assd-cache", i), "sequential", "text-asarm", api_name="/compare").result(timeout)
        except Exception:  # noqa: BLE001 - the kill breaks the stream
            if stop.is_set():
                return
            time.sleep(0.2)
            continue
        if "Done:" in str(out[0]):
            with lock:
                done[0] += 1


def half_written(db: Path) -> tuple[int, int]:
    """(comparison sessions, those holding fewer than two runs) in the SQLite store `db`."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT s.id, COUNT(r.id) FROM sessions s LEFT JOIN runs r ON r.session_id = s.id "
                           "WHERE s.spans LIKE '%\"kind\": \"compare\"%' GROUP BY s.id").fetchall()
    finally:
        con.close()
    return len(rows), sum(1 for _, n in rows if n < 2)


def main(argv: list[str] | None = None) -> int:
    """Run the kill rounds and print the count of half-written comparisons (exit 1 when any)."""
    ap = argparse.ArgumentParser(prog="python -m tools.probe_compare_kill")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-kill", type=int, default=12, help="comparisons back before each kill")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds a round may take at most")
    ap.add_argument("--db", help="the SQLite file (default: a new temporary one)")
    a = ap.parse_args(argv)
    db = Path(a.db) if a.db else Path(tempfile.mkdtemp()) / "kill.db"
    env = {"DATABASE_URL": f"sqlite:///{db}", "INFILL_SPEEDUP": "0", "INFILL_WATCH": "0", **ONE_ADDRESS_MANY_VISITORS}
    seen = 0
    for k in range(a.kills):
        proc, url = start_server(env)
        stop, done, lock = threading.Event(), [0], threading.Lock()
        threads = [threading.Thread(target=_loop, args=(url, stop, done, lock, a.timeout), daemon=True)
                   for _ in range(a.clients)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + a.timeout
        while done[0] < a.per_kill and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stop.set()
        for t in threads:
            t.join(30)
        seen += done[0]
        print(f"kill {k + 1}: {done[0]} comparisons came back before it", flush=True)
    total, half = half_written(db)
    print(f"{a.kills} kills under Compare load ({a.clients} visitors): {seen} comparisons seen done, "
          f"{total} comparison sessions stored, {half} with a missing side", flush=True)
    return 1 if half else 0


if __name__ == "__main__":
    raise SystemExit(main())
