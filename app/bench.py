"""`python -m app.bench [--repeats N] [--sampler S] [--no-http]`: the same run (input, model, sampler,
seed) timed three ways, side by side, alternating, after one warm-up each:

- cli:     engine.api.infill(...), what `python -m engine infill` runs;
- handler: the app's Run handler (app.ui.run_infill) to its last update, with the store and the
           HTML of every streamed frame;
- http:    the same handler through `python -m app` in its own process and gradio_client (queue,
           JSON, server-sent events), as a browser meets it.

Prints medians, the spread (min to max) and app/cli ratios by medians and by minima (the minimum is
the least disturbed by other people's load on a shared machine). A benchmark, not a test."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

TEXT = (
    "The harbour was quiet when the fishing boats came back in the evening. The old man tied his boat "
    "to the post, lifted the basket of fish onto the stones and sat down to rest. [MASK:48] When he "
    "reached his door the stars were out, and the smell of bread and smoke filled the cold air."
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sampler", default=None, help="default: the app's default sampler")
    ap.add_argument("--model", default="text-asarm")
    ap.add_argument("--no-http", action="store_true", help="skip the launched-app measurement")
    a = ap.parse_args(argv)

    # one torch thread in every process (this one and the server), so the ways compete for nothing
    # but the machine and a server idling between runs spins no OpenMP workers
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    tmp = tempfile.mkdtemp(prefix="app-bench-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/bench.db")
    from engine.api import infill

    from . import core, ui

    sampler = a.sampler or core.DEFAULT_SAMPLER
    form = ("text", a.model, TEXT, sampler, 5, 1.0, 0, 32, 0.05, "cosine", 1)

    def cli() -> float:
        t0 = time.perf_counter()
        infill(TEXT, model=a.model, sampler=sampler, domain="text", k=5, temperature=1.0, seed=0)
        return time.perf_counter() - t0

    def handler() -> float:
        t0 = time.perf_counter()
        frames = list(ui.run_infill(*form))
        last = frames[-1] if frames else None
        dt = time.perf_counter() - t0
        assert last is not None and "Done" in last[0], last[0] if last else "no update"
        return dt

    ways = {"cli": cli, "handler": handler}
    server = None
    if not a.no_http:  # the server in its own process, as a browser would meet it
        import subprocess
        import sys

        from gradio_client import Client

        from .testing import free_port

        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
        url = f"http://127.0.0.1:{port}/"
        client = None
        deadline = time.monotonic() + 180
        while client is None:
            try:
                client = Client(url, verbose=False)
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(1.0)

        def http() -> float:
            t0 = time.perf_counter()
            out = client.predict(*form, api_name="/infill")
            dt = time.perf_counter() - t0
            assert "Done" in out[0], out[0]
            return dt

        ways["http"] = http
    try:
        for k, fn in ways.items():  # warm-up: model load, first-call allocations
            print(f"warm-up {k}: {fn():.2f} s", flush=True)
        times: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(a.repeats):
            for k, fn in ways.items():
                times[k].append(fn())
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"same run: {sampler} on {a.model}, 48 masked tokens, seed 0; {a.repeats} repeats, alternating; "
          f"torch threads {torch.get_num_threads()}")
    for k, v in times.items():
        ratio = "" if k == "cli" else (f"   {med[k] / med['cli']:.2f}x cli by medians, "
                                       f"{min(v) / min(times['cli']):.2f}x by minima")
        print(f"{k:8s} median {med[k]:.3f} s  (min {min(v):.3f}, max {max(v):.3f}){ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
