"""`python -m tools.probe_flood [--stops 40 200] [--runs 8] [--strangers 200] [--pause 10] [--url URL]`:
the two floods of issue 48, over the loopback only, every wait bounded.

1. **Stop flood.** An attacker (127.0.0.10, then .11, ...) starts a long run and at once keeps N `/run/stop` requests in flight
   on its session (N threads of a separate process, each sending its next Stop `--gap` seconds
   after the last answer, for the whole phase),
   while 127.0.0.3 runs `--runs` small runs one after another; the small runs' latency is printed
   for no flood (the baseline, measured first) and for each N, with the Stops' answers (by HTTP
   status) and their latency. Target: the small runs' median under 1 s at N = 40 and 200, and a
   Stop before the first round answered in under 0.5 s (the first Stop's latency is printed).
2. **Many-address eviction.** 127.0.0.3 runs once, then `--strangers` strangers, each from its own
   address (127.0.1.1, 127.0.1.2, ...), send one call each, 20 at a time; the visitor pauses
   `--pause` seconds from its run, then steps forward in its trace: it must still have it (the
   player does not say "Run something ... first"). Prints the strangers' answers by kind.

3. **Store growth** (`--store-seconds S`, issue 48 asks for 300): 127.0.0.20 runs small runs as
   fast as the server lets it for S seconds; the store's growth (read from its SQLite file) must
   stay within the address's hourly budget (`--store-mb-per-hour`, set on the started server,
   default 2 so that S = 300 meets it) plus 1 MB, and another address's run must still be stored.

Without `--url` it starts `python -m app` in a child process on a temporary database with the
bundled models and the server's default limits (the point is to test them). Timings are
measured, never asserted; exit status 1 when a target is missed."""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from tools.loadtest import form, start_server, stop_server
from tools.visitor_http import call

VISITOR = "127.0.0.3"
ATTACKERS = "127.0.0.{}"  # phase i's attacker is 127.0.0.(10 + i): each phase starts with a fresh minute
SMALL = "The old man walked to the [MASK:8] and looked at the sea."
LONG = "It was the best of times, it was the worst of times, [MASK:200]"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def post(url: str, path: str, body: dict, source: str, timeout: float = 30.0) -> tuple[int, str, float]:
    """One POST from `source`: (status, body, seconds); status 0 when the connection failed."""
    u = urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout, source_address=(source, 0))
    t0 = time.perf_counter()
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace"), time.perf_counter() - t0
    except OSError as e:
        return 0, str(e), time.perf_counter() - t0
    finally:
        c.close()


def small_runs(url: str, n: int, timeout: float) -> list[float]:
    """The visitor's `n` small runs one after another: each one's seconds (inf when it failed)."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        try:
            kind, data = call(url, "infill", list(form(SMALL, "assd-cache", 100 + i)), source=VISITOR, timeout=timeout)
            ok = kind == "complete" and "Done" in str(data[0])
        except RuntimeError:
            ok = False
        out.append(time.perf_counter() - t0 if ok else float("inf"))
    return out


def _attack(url: str, attacker: str, session: str, n: int, gap: float, seconds: float, out) -> None:
    """The attacker, in its own process (its threads must not starve the measuring visitor of this
    process's GIL): n threads, each sending its next Stop `gap` s after the last answer, for
    `seconds`; puts [(status, seconds), ...] on `out`."""
    done = threading.Event()
    answers: list[tuple[int, float]] = []
    lock = threading.Lock()

    def one() -> None:
        while not done.is_set():
            status, _, took = post(url, "/gradio_api/run/stop", {"data": [""], "session_hash": session}, attacker)
            with lock:
                answers.append((status, took))
            done.wait(gap)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    done.wait(seconds)
    done.set()
    for t in threads:
        t.join(30)
    with lock:
        out.put(answers)


def stop_flood(url: str, attacker: str, n: int, runs: int, gap: float, timeout: float) -> dict:
    """Phase 1 for N Stops in flight: the visitor's small runs' seconds, the Stops by status."""
    import multiprocessing as mp

    session = uuid.uuid4().hex[:11]
    # the attacker's run: one whose first round is long (assd, k = 64, 200 masked), and its first
    # Stop as soon as the page would have the run's id (its first update), timed here
    announced = threading.Event()
    threading.Thread(target=lambda: _quiet(call, url, "infill", list(form(LONG, "assd", 1, k=64)), source=attacker,
                                           session_hash=session, timeout=timeout,
                                           on_event=lambda kind, data: announced.set()), daemon=True).start()
    announced.wait(timeout)
    status, body, first = post(url, "/gradio_api/run/stop", {"data": [""], "session_hash": session}, attacker)
    said = json.loads(body)["data"][0] if status == 200 else body
    out = mp.get_context("spawn").Queue()
    flood_seconds = 3.0 + 2.0 * runs  # the flood outlasts the small runs (each well under 2 s unless held)
    proc = mp.get_context("spawn").Process(target=_attack, args=(url, attacker, session, n, gap, flood_seconds, out),
                                           daemon=True)
    proc.start()
    time.sleep(3.0)  # the flood is under way (the process has started its threads)
    lat = small_runs(url, runs, timeout)
    answers = out.get(timeout=flood_seconds + timeout)
    proc.join(30)
    by_status: dict[int, int] = {}
    for s, _ in answers:
        by_status[s] = by_status.get(s, 0) + 1
    return {"latency": lat, "stops": by_status, "stop_rate": len(answers) / flood_seconds,
            "stop_median": statistics.median(t for _, t in answers) if answers else None,
            "first_stop": first, "first_said": str(said)[:80]}


def _quiet(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception:  # noqa: BLE001 - the attacker's own run may be refused or stopped: not measured
        return None


def eviction(url: str, strangers: int, pause: float, timeout: float) -> dict:
    """Phase 2: does the visitor keep its trace through `strangers` one-shot strangers?"""
    visitor = uuid.uuid4().hex[:11]
    kind, _ = call(url, "infill", list(form(SMALL, "assd-cache", 7)), source=VISITOR, session_hash=visitor,
                   timeout=timeout)
    t0 = time.monotonic()
    kinds: dict[str, int] = {}

    def stranger(i: int) -> str:
        source = f"127.0.{1 + i // 250}.{1 + i % 250}"
        try:
            call(url, "infill", list(form("no mask here", "assd", i)), source=source, timeout=timeout)
            return "answered"
        except RuntimeError as e:
            return "refused 429" if "429" in str(e) else "failed"

    with ThreadPoolExecutor(20) as pool:
        for k in pool.map(stranger, range(strangers)):
            kinds[k] = kinds.get(k, 0) + 1
    took = time.monotonic() - t0
    time.sleep(max(0.0, pause - took))
    ev, data = call(url, "step_forward", [0], source=VISITOR, session_hash=visitor, timeout=timeout)
    kept = ev == "complete" and "Run something" not in str(data)
    return {"visitor_run": kind, "strangers": kinds, "strangers_seconds": took, "kept_trace": kept}


def db_bytes(path: str) -> int:
    """The SQLite store's bytes in use (the measure retention and the store's budget read)."""
    import sqlite3

    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        page, count, free = (c.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count",
                                                                               "freelist_count"))
        return page * (count - free)
    finally:
        c.close()


def store_growth(url: str, db: str, seconds: float, timeout: float) -> dict:
    """Phase 3: one address (127.0.0.20) runs small runs as fast as the server lets it for
    `seconds`; the store's growth, how its runs ended, and whether another address's run is stored."""
    writer, kinds, i = "127.0.0.20", {}, 0
    before, t_end = db_bytes(db), time.monotonic() + seconds
    while time.monotonic() < t_end:
        i += 1
        try:
            _, data = call(url, "infill", list(form(SMALL, "assd-cache", 1000 + i)), source=writer, timeout=timeout)
            said = str(data[0]) if isinstance(data, list) and data else str(data)
            k = "stored" if "Done" in said else ("over its hourly budget" if "last hour" in said else
                                                 ("store full" if "store is full" in said else "other"))
        except RuntimeError as e:
            k = "refused 429 (calls a minute)" if "429" in str(e) else "failed"
        kinds[k] = kinds.get(k, 0) + 1
    grew = db_bytes(db) - before
    kind, data = call(url, "infill", list(form(SMALL, "assd-cache", 5)), source=VISITOR, timeout=timeout)
    other = kind == "complete" and "Done" in str(data[0])
    return {"runs": kinds, "grew": grew, "other_stored": other}


def _fmt(lat: list[float]) -> str:
    ok = [x for x in lat if x != float("inf")]
    if not ok:
        return f"0/{len(lat)} served"
    return (f"{len(ok)}/{len(lat)} served, median {statistics.median(ok):.2f} s, max {max(ok):.2f} s")


def main(argv: list[str] | None = None) -> int:
    """Run both phases and print them (exit 1 when a target is missed)."""
    ap = argparse.ArgumentParser(prog="python -m tools.probe_flood")
    ap.add_argument("--stops", type=int, nargs="*", default=[40, 200], help="Stops in flight, one phase each")
    ap.add_argument("--runs", type=int, default=8, help="the other visitor's small runs per phase")
    ap.add_argument("--gap", type=float, default=0.05, help="seconds an attacker thread waits between Stops")
    ap.add_argument("--strangers", type=int, default=200)
    ap.add_argument("--pause", type=float, default=10.0, help="the visitor's pause before it steps forward")
    ap.add_argument("--store-seconds", type=float, default=0.0,
                    help="phase 3: one address writing as fast as it can for this long (issue 48: 300)")
    ap.add_argument("--store-mb-per-hour", type=float, default=2.0,
                    help="the started server's INFILL_STORE_MB_PER_HOUR, so that phase 3 meets it")
    ap.add_argument("--url", help="a running studio on this machine (started with the default limits)")
    ap.add_argument("--timeout", type=float, default=120.0, help="bound on every single wait")
    a = ap.parse_args(argv)
    if a.url and urlsplit(a.url).hostname not in LOOPBACK:
        ap.error("the probe drives a studio on this machine's loopback only")
    server, url, db = None, a.url, f"{tempfile.mkdtemp()}/flood.db"
    if not url:
        server, url = start_server({"DATABASE_URL": f"sqlite:///{db}", "INFILL_SPEEDUP": "0", "INFILL_WATCH": "0",
                                    "INFILL_STORE_MB_PER_HOUR": str(a.store_mb_per_hour)})
    missed = False
    try:
        small_runs(url, 2, a.timeout)  # warm-up: the model is loaded, not measured
        base = small_runs(url, a.runs, a.timeout)
        print(f"no flood: the other address's small runs {_fmt(base)}", flush=True)
        for i, n in enumerate(a.stops):
            attacker = ATTACKERS.format(10 + i)
            r = stop_flood(url, attacker, n, a.runs, a.gap, a.timeout)
            ok = [x for x in r["latency"] if x != float("inf")]
            missed |= not ok or statistics.median(ok) >= 1.0 or (r["first_stop"] or 0) >= 0.5
            print(f"{n} Stops in flight from {attacker}: its first Stop answered in {r['first_stop']:.3f} s "
                  f"({r['first_said']!r}); then {r['stop_rate']:.0f} Stops a second, answers by status {r['stops']}, "
                  f"median {r['stop_median']:.3f} s; the other address's small runs {_fmt(r['latency'])}", flush=True)
        e = eviction(url, a.strangers, a.pause, a.timeout)
        missed |= not e["kept_trace"]
        print(f"{a.strangers} strangers from {a.strangers} addresses in {e['strangers_seconds']:.1f} s "
              f"({e['strangers']}); the visitor paused {a.pause:g} s: "
              f"{'kept its trace' if e['kept_trace'] else 'LOST its trace'}", flush=True)
        if a.store_seconds > 0 and server is not None:
            g = store_growth(url, db, a.store_seconds, a.timeout)
            missed |= not g["other_stored"] or g["grew"] > a.store_mb_per_hour * 2**20 + (1 << 20)
            print(f"one address writing for {a.store_seconds:g} s (budget {a.store_mb_per_hour:g} MB an hour): "
                  f"{g['runs']}; the store grew {g['grew'] / 2**20:.2f} MB; another address's run "
                  f"{'was stored' if g['other_stored'] else 'was NOT stored'}", flush=True)
    finally:
        if server is not None:
            stop_server(server)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
