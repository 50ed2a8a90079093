"""`python -m tools.loadtest [--clients N] [--heavy H] [--baseline] [--loop S] [--url URL ...]`: N visitors
at once, each running one small infill through the queue with gradio_client, optionally while H
worst-case runs (the costliest settings the server accepts) compete with them; prints per-request
latency (median, p90, p99, max) and how the worst-case runs ended. With `--loop S` the N visitors
loop small runs for S seconds instead while one long run ([MASK:120]) is sent a few seconds in,
and its latency is printed (the starvation scenario of issue 28).

- A visitor's latency runs from opening its connection (gradio_client fetches the page config)
  to its run's last update, so connect time is included.
- A run counts as served only when it ends with the "Done" status and a completed text; a run
  that ended with a message (no mask, unknown sampler, ...) or raised is an error.
- Every wait is bounded (`--timeout` seconds per visitor; threads are joined against a deadline).
- `--baseline` first runs the same N visitors without the heavy runs and prints the ratio of the
  two medians, measured side by side in one invocation (after an unmeasured warm-up of 2 runs).
- Without `--url` it launches the app in this process on a temporary database with the bundled
  models; with one or more `--url` it drives running servers (visitor i uses url i mod count,
  e.g. two replicas on one PostgreSQL).

Timings are measured, never asserted. Exit status 1 when a small run failed."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field

SMALL_TEXT = "The old man walked to the [MASK:24] and looked at the sea."
HEAVY_TEXT = "It was the best of times, it was the worst of times, [MASK:240]"
#: the starvation scenario's long run (issue 28: a 0.8 s run took 41 s among 20 looping visitors)
LONG_TEXT = "It was the best of times, it was the worst of times, [MASK:120]"
#: the costliest settings the server accepts for HEAVY_TEXT (engine.budget.Budget.check_params:
#: steps <= 4 x masked, steps x inner <= 16 x masked); the budget stops the run.
HEAVY = {"sampler": "assd-diffusion", "k": 64, "steps": 512, "inner": 7}
#: the limits per visitor key on the address (app.serving.visitors), and every simulated visitor of
#: these tools connects from this machine's loopback: a server they start lifts those limits (one
#: that --url names must be started with them for the figures to mean many visitors); a session
#: counts as in use for 1 s only, so that visitors minting a session per run (the soak) take the
#: places of idle ones instead of being refused
ONE_ADDRESS_MANY_VISITORS = {"INFILL_RUNS_PER_VISITOR": "100000", "INFILL_SESSIONS_PER_ADDRESS": "100000",
                             "INFILL_CALL_LIMITS": "0", "INFILL_SESSION_ACTIVE_SECONDS": "1",
                             "INFILL_STORE_MB_PER_HOUR": "0"}


@dataclass
class Outcome:
    """What the visitors of one phase saw: latencies, connect times, errors and budget stops."""

    latencies: list[float] = field(default_factory=list)
    connects: list[float] = field(default_factory=list)  # of the served runs: seconds to connect
    errors: list[str] = field(default_factory=list)
    stopped: int = 0  # runs the server stopped by their budget (expected for heavy runs)
    ended: list[float] = field(default_factory=list)  # latency of every run that got an answer (stopped included)
    refused: int = 0  # runs refused at admission (app.serving.admission.Busy: a full long-run table)
    lock: threading.Lock = field(default_factory=threading.Lock)


def form(text: str, sampler: str, seed: int, k: int = 5, steps: int = 32, inner: int = 1,
         model: str = "text-asarm") -> tuple:
    """The /infill endpoint's inputs for one visitor's run."""
    return ("text", model, text, sampler, k, 1.0, seed, steps, 0.05, "cosine", inner)


def classify(result) -> tuple[str, str]:
    """('ok' | 'stopped' | 'error', message) from the /infill endpoint's final output."""
    if not isinstance(result, (list, tuple)) or len(result) < 5:
        return "error", f"unexpected output {str(result)[:120]!r}"
    status, completed = str(result[0] or ""), str(result[4] or "")
    if "Done:" in status and completed:
        return "ok", ""
    if "budget" in status:
        return "stopped", status
    if "long runs" in status or "runs in progress" in status:
        return "refused", status
    return "error", status[:200] or "ended without a completed text"


def visit(url: str, args: tuple, out: Outcome, timeout: float) -> None:
    """One visitor: connect, run once, and record what happened in `out` (bounded by `timeout`)."""
    from gradio_client import Client

    t0 = time.perf_counter()
    t_conn = 0.0
    try:
        c = Client(url, verbose=False, httpx_kwargs={"timeout": timeout})
        t_conn = time.perf_counter() - t0
        job = c.submit(*args, api_name="/infill")
        result = job.result(timeout=timeout)
        kind, msg = classify(result)
    except Exception as e:  # noqa: BLE001 - every failure is an error of this visitor
        kind, msg = "error", f"{type(e).__name__}: {e}"[:300]
    dt = time.perf_counter() - t0
    with out.lock:
        if kind != "error":
            out.ended.append(dt)
        if kind == "ok":
            out.latencies.append(dt)
            out.connects.append(t_conn)
        elif kind == "stopped":
            out.stopped += 1
        elif kind == "refused":
            out.refused += 1
        else:
            out.errors.append(msg)


def wave(urls: list[str], small: list[tuple], heavy: list[tuple], timeout: float,
         head_start: float = 1.0) -> tuple[Outcome, Outcome, float]:
    """Heavy visitors first (they take the slots), then the small ones; every join is bounded."""
    s_out, h_out = Outcome(), Outcome()
    threads = [threading.Thread(target=visit, args=(urls[i % len(urls)], a, h_out, timeout), daemon=True)
               for i, a in enumerate(heavy)]
    for t in threads:
        t.start()
    if heavy:
        time.sleep(head_start)
    t0 = time.perf_counter()
    small_threads = [threading.Thread(target=visit, args=(urls[i % len(urls)], a, s_out, timeout), daemon=True)
                     for i, a in enumerate(small)]
    for t in small_threads:
        t.start()
    deadline = time.monotonic() + timeout + 30
    for t in small_threads:
        t.join(max(0.0, deadline - time.monotonic()))
    wall = time.perf_counter() - t0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    lost = sum(t.is_alive() for t in small_threads)
    if lost:
        s_out.errors.append(f"{lost} visitors still waiting at the deadline")
    return s_out, h_out, wall


def pct(sorted_values: list[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank below)."""
    return sorted_values[int(q * (len(sorted_values) - 1))]


def loop(url: str, clients: int, seconds: float, long_args: tuple | None, long_after: float,
         timeout: float) -> tuple[Outcome, Outcome]:
    """`clients` visitors each looping small runs for `seconds`; `long_after` seconds in, one long
    run (`long_args`) from its own visitor. Returns (small runs, the long run)."""
    small, long_out = Outcome(), Outcome()
    stop = time.monotonic() + seconds

    def looper(i: int) -> None:
        seed = 0
        while time.monotonic() < stop:
            visit(url, form(SMALL_TEXT, "assd-cache", 10_000 * i + seed), small, timeout)
            seed += 1

    threads = [threading.Thread(target=looper, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    if long_args is not None:
        time.sleep(long_after)
        visit(url, long_args, long_out, timeout)
    for t in threads:
        t.join(seconds + timeout + 30)
    return small, long_out


def summary(label: str, out: Outcome, n: int, wall: float) -> str:
    """One line per phase: served runs, errors, wall time and latency percentiles."""
    lat = sorted(out.latencies)
    if not lat:
        return f"{label}: no run served; errors: {out.errors[:3]}"
    return (f"{label}: {len(lat)}/{n} served, {len(out.errors)} errors, wall {wall:.1f} s, "
            f"latency median {statistics.median(lat):.2f} s, p90 {pct(lat, 0.9):.2f} s, p99 {pct(lat, 0.99):.2f} s, "
            f"max {lat[-1]:.2f} s (of which connecting: median {statistics.median(out.connects):.2f} s)"
            + (f"; first errors: {out.errors[:2]}" if out.errors else ""))


def start_server(env: dict[str, str], port: int | None = None, wait: float = 120.0):
    """`python -m app` in a child process (its own interpreter: the visitors' client threads do
    not share its GIL); returns (process, url) once it answers, bounded by `wait` seconds."""
    import subprocess
    import sys
    import urllib.request

    from tools.tiny_models import free_port

    port = port or free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port)], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "config", timeout=5):
                return proc, url
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"the app did not answer on {url} within {wait:.0f} s")


def stop_server(proc) -> None:
    """End a server started by start_server (terminate, then kill if it does not exit)."""
    proc.terminate()
    try:
        proc.wait(20)
    except Exception:  # noqa: BLE001
        proc.kill()
        proc.wait(20)


def main(argv: list[str] | None = None) -> int:
    """Run the phases the flags ask for and print their summaries (exit 1 when a small run failed)."""
    ap = argparse.ArgumentParser(prog="python -m tools.loadtest")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--heavy", type=int, default=0, help="worst-case runs started 1 s before the visitors")
    ap.add_argument("--baseline", action="store_true", help="first the same visitors without heavy runs")
    ap.add_argument("--text", default=SMALL_TEXT)
    ap.add_argument("--sampler", default="assd-cache")
    ap.add_argument("--url", action="append", default=[], help="drive running servers (repeatable)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a visitor waits at most")
    ap.add_argument("--loop", type=float, default=0.0,
                    help="seconds the visitors loop small runs (instead of one run each) while one long run "
                         "(--long-text) is sent --long-after seconds in: the starvation scenario")
    ap.add_argument("--long-text", default=LONG_TEXT)
    ap.add_argument("--long-after", type=float, default=5.0)
    a = ap.parse_args(argv)
    server = None
    urls = a.url
    if not urls:
        server, url = start_server({"DATABASE_URL": f"sqlite:///{tempfile.mkdtemp()}/load.db",
                                    **ONE_ADDRESS_MANY_VISITORS})
        urls = [url]
    try:
        small = [form(a.text, a.sampler, i) for i in range(a.clients)]
        heavy = [form(HEAVY_TEXT, HEAVY["sampler"], 1000 + i, k=HEAVY["k"], steps=HEAVY["steps"],
                      inner=HEAVY["inner"]) for i in range(a.heavy)]
        conc = os.environ.get("INFILL_CONCURRENCY", "2")
        print(f"servers {urls}; concurrency {conc} (local setting); {a.clients} visitors, "
              f"{a.heavy} worst-case runs ({HEAVY} on {HEAVY_TEXT!r})", flush=True)
        # warm-up (models loaded, caches filled): not measured; first one small run of the
        # worst-case sampler alone, so its models load before the measured wave, not raced by it
        if a.heavy:
            wave(urls, [form(a.text, HEAVY["sampler"], 1, k=4, steps=32)], [], a.timeout)
        wave(urls, small[:2], [], a.timeout)
        if a.loop:
            s, lg = loop(urls[0], a.clients, a.loop, form(a.long_text, "assd-cache", 7), a.long_after, a.timeout)
            print(summary(f"{a.clients} visitors looping small runs for {a.loop:g} s", s, len(s.latencies)
                          + len(s.errors), a.loop), flush=True)
            print(f"long run ({a.long_text[:40]!r}..., sent {a.long_after:g} s in): "
                  + (f"latency {lg.ended[0]:.2f} s" if lg.ended else f"no answer {lg.errors[:1]}"), flush=True)
            return 1 if s.errors or not lg.latencies else 0
        failed = False
        base_med = None
        if a.baseline and a.heavy:
            s, _, wall = wave(urls, small, [], a.timeout)
            print(summary("without worst-case runs", s, a.clients, wall), flush=True)
            failed |= bool(s.errors)
            base_med = statistics.median(s.latencies) if s.latencies else None
        s, h, wall = wave(urls, small, heavy, a.timeout)
        label = f"with {a.heavy} worst-case runs" if a.heavy else "visitors"
        print(summary(label, s, a.clients, wall), flush=True)
        if a.heavy:
            worst = f", worst latency {max(h.ended):.2f} s" if h.ended else ""
            print(f"worst-case runs: {len(h.latencies)} completed, {h.stopped} stopped by the budget, "
                  f"{h.refused} refused at admission, {len(h.errors)} errors {h.errors[:2]}{worst}", flush=True)
        failed |= bool(s.errors)
        if base_med and s.latencies:
            print(f"median latency ratio (with / without worst-case runs): {statistics.median(s.latencies) / base_med:.2f}")
        return 1 if failed else 0
    finally:
        if server is not None:
            stop_server(server)


if __name__ == "__main__":
    raise SystemExit(main())
