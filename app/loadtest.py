"""`python -m app.loadtest [--clients N]`: N visitors at once, each running one infill through the
queue with gradio_client; prints per-request latency and throughput. Uses a temporary database and
the bundled models. Timings are measured, never asserted."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m app.loadtest")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--text", default="The old man walked to the [MASK:24] and looked at the sea.")
    ap.add_argument("--sampler", default="assd-cache")
    a = ap.parse_args(argv)
    os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/load.db"
    from gradio_client import Client

    from .testing import launch_for_tests

    demo, url = launch_for_tests()
    form = ("text", "text-asarm", a.text, a.sampler, 5, 1.0, 0, 32, 0.05, "cosine", 1)
    lat: list[float] = []
    errors: list[str] = []

    def visitor(i: int) -> None:
        try:
            c = Client(url, verbose=False)
            t0 = time.perf_counter()
            job = c.submit(*form[:6], i, *form[7:], api_name="/infill")
            list(job)
            lat.append(time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001
            errors.append(f"{type(e).__name__}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    demo.close()
    lat.sort()
    print(f"{a.clients} simultaneous visitors, concurrency limit {os.environ.get('INFILL_CONCURRENCY', '2')}: "
          f"{len(lat)} served, {len(errors)} errors, wall {wall:.1f} s, {len(lat) / wall:.2f} runs/s; latency "
          f"median {statistics.median(lat):.1f} s, max {lat[-1]:.1f} s" if lat else f"no run served: {errors[:3]}")
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
