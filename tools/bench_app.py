"""`python -m tools.bench_app [--repeats N] [--sampler S] [--no-http] [--client]`: the same run (input,
model, sampler, seed) timed side by side, interleaved, after one warm-up each:

- cli:     engine.api.infill(...), what `python -m engine infill` runs;
- handler: the app's Run handler (app.tabs.player.run_infill) to its last update, with the store and
           the HTML of every streamed frame;
- http:    the same handler through `python -m app` in its own process, driven as a browser drives
           it: POST queue/join, then the server-sent events until `process_completed`;
- client:  (with --client) the same over gradio_client, whose reader polls its message queue every
           50 ms, so it adds up to that much of its own to every run.

Each repetition runs every way once, back to back, so the ratio of a way to the CLI in the same
repetition is taken under the same load; the ratio reported is the median of those paired ratios
(the machine is shared: medians, never a single run). A benchmark, not a test. The page's
"vs cached sequential" line comes from a separate event chained after Run (a second, unstored run,
for samplers other than cached sequential); it is not part of the run's path and is switched off
here (INFILL_SPEEDUP=0)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

TEXT = (
    "The harbour was quiet when the fishing boats came back in the evening. The old man tied his boat "
    "to the post, lifted the basket of fish onto the stones and sat down to rest. [MASK:48] When he "
    "reached his door the stars were out, and the smell of bread and smoke filled the cold air."
)


class SseClient:
    """Gradio's queue protocol as the page's JavaScript speaks it (join, then read the event stream),
    so the HTTP timing holds the server and the transport and nothing of a client library's own."""

    def __init__(self, url: str):
        import httpx

        self.url, self.http = url, httpx.Client(timeout=300)
        deps = self.http.get(url + "config").json()["dependencies"]
        self.fn = {d.get("api_name"): d["id"] for d in deps}

    def run(self, api_name: str, data: list) -> list:
        """Run one event to its end; returns its last output (raises on a failed event)."""
        session = uuid.uuid4().hex[:12]
        body = {"data": data, "fn_index": self.fn[api_name], "session_hash": session,
                "event_data": None, "trigger_id": None}
        self.http.post(self.url + "gradio_api/queue/join", json=body).raise_for_status()
        with self.http.stream("GET", self.url + "gradio_api/queue/data", params={"session_hash": session}) as s:
            for line in s.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    if not msg.get("success"):
                        raise RuntimeError(f"{api_name} failed: {msg.get('output')}")
                    return msg["output"]["data"]
        raise RuntimeError(f"{api_name}: the event stream ended without a result")

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.http.close()


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def local_ways(sampler: str, model: str) -> dict[str, Callable[[], None]]:
    """The in-process ways: the engine call the CLI makes, and the app's Run handler."""
    from app.tabs.player import run_infill
    from engine.api import infill

    form = ("text", model, TEXT, sampler, 5, 1.0, 0, 32, 0.05, "cosine", 1)

    def cli() -> None:
        infill(TEXT, model=model, sampler=sampler, domain="text", k=5, temperature=1.0, seed=0)

    def handler() -> None:
        frames = list(run_infill(*form))
        assert frames and "Done" in frames[-1]["status"], frames[-1]["status"] if frames else "no update"

    return {"cli": cli, "handler": handler}


def remote_ways(url: str, sampler: str, model: str, with_client: bool) -> dict[str, Callable[[], None]]:
    """The ways that go through a launched server at `url`."""
    form = ["text", model, TEXT, sampler, 5, 1.0, 0, 32, 0.05, "cosine", 1]
    sse = SseClient(url)

    def http() -> None:
        out = sse.run("infill", form)
        assert "Done" in out[0], out[0]

    ways = {"http": http}
    if with_client:
        from gradio_client import Client

        client = Client(url, verbose=False)

        def gradio_client() -> None:
            out = client.predict(*form, api_name="/infill")
            assert "Done" in out[0], out[0]

        ways["client"] = gradio_client
    return ways


def measure(ways: dict[str, Callable[[], None]], repeats: int) -> dict[str, list[float]]:
    """One warm-up of each way, then `repeats` rounds of every way back to back."""
    for k, fn in ways.items():  # model load, first-call allocations
        print(f"warm-up {k}: {timed(fn):.2f} s", flush=True)
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(repeats):
        for k, fn in ways.items():
            times[k].append(timed(fn))
    return times


def report(times: dict[str, list[float]]) -> None:
    """Medians, spreads and the median of the paired ratios to the CLI."""
    cli = times["cli"]
    for k, v in times.items():
        line = f"{k:8s} median {statistics.median(v):.3f} s  (min {min(v):.3f}, max {max(v):.3f})"
        if k != "cli":
            paired = [a / c for a, c in zip(v, cli)]
            line += (f"   app/cli {statistics.median(paired):.2f}x (median of {len(paired)} paired ratios; "
                     f"range {min(paired):.2f}-{max(paired):.2f})")
        print(line)


def main(argv: list[str] | None = None) -> int:
    """Time the ways side by side and print the app/CLI ratios."""
    ap = argparse.ArgumentParser(prog="python -m tools.bench_app", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--sampler", default=None, help="default: the app's default sampler")
    ap.add_argument("--model", default="text-asarm")
    ap.add_argument("--no-http", action="store_true", help="skip the launched-app measurements")
    ap.add_argument("--client", action="store_true", help="also time gradio_client (adds its 50 ms polling)")
    a = ap.parse_args(argv)
    # one torch thread in every process (this one and the server), so the ways compete for nothing
    # but the machine and a server idling between runs spins no OpenMP workers
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["INFILL_SPEEDUP"] = "0"  # the page's speed-up line is a separate, chained run
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    tmp = tempfile.mkdtemp(prefix="app-bench-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/bench.db")
    from app.examples import DEFAULT_SAMPLER
    from tools.loadtest import start_server, stop_server

    sampler = a.sampler or DEFAULT_SAMPLER
    ways = local_ways(sampler, a.model)
    server = None
    try:
        if not a.no_http:  # the server in its own process, as a browser would meet it
            server, url = start_server({"DATABASE_URL": f"sqlite:///{tmp}/server.db"}, wait=180)
            ways.update(remote_ways(url, sampler, a.model, a.client))
        times = measure(ways, a.repeats)
    finally:
        if server is not None:
            stop_server(server)
    print(f"same run: {sampler} on {a.model}, 48 masked tokens, seed 0; {a.repeats} repetitions, "
          f"interleaved; torch threads {torch.get_num_threads()}")
    report(times)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
