"""Write-throughput benchmark: ``python -m tools.bench_store [--runs N] [--url URL]``.

Stores runs of 256 steps (an ASSD-shaped trace), first from one writer, then from 16 threads at
once, and prints runs stored per second and, for SQLite, the database size per stored run. Uses a
temporary SQLite file unless --url is given (a disposable database: its storage tables are reused
as they are).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

from engine.trace import Step, StepKind
from storage import Store, open_store

STEPS_PER_RUN = 256


def _bench_round(rng: random.Random, rnd: int, pos: int, calls: float, k: int) -> tuple[list[Step], int, float]:
    """One ASSD-shaped round at `pos`: its steps, the positions it decided and the calls after it."""
    drafted = list(range(pos, pos + k))
    toks = [rng.randrange(50_000) for _ in drafted]
    ps = [rng.random() for _ in drafted]
    calls += 1
    steps = [Step(kind=StepKind.DRAFT_PASS, round=rnd, calls=calls, elapsed=calls * 0.01),
             Step(kind=StepKind.DRAFT, round=rnd, positions=drafted, tokens=toks, texts=[f" w{t}" for t in toks], p=ps,
                  q=[None] * k, calls=calls, elapsed=calls * 0.01)]
    calls += 1
    steps.append(Step(kind=StepKind.DENSITY_PASS, round=rnd, calls=calls, elapsed=calls * 0.01))
    n_acc = rng.randint(1, k)
    for i in range(n_acc):
        steps.append(
            Step(
                kind=StepKind.ACCEPT,
                round=rnd,
                positions=[drafted[i]],
                tokens=[toks[i]],
                texts=[f" w{toks[i]}"],
                p=[ps[i]],
                q=[rng.random()],
                calls=calls,
                elapsed=calls * 0.01,
            )
        )
    if n_acc < k:
        at = drafted[n_acc]
        steps.append(
            Step(
                kind=StepKind.REJECT,
                round=rnd,
                positions=[at],
                tokens=[toks[n_acc]],
                texts=[" x"],
                p=[ps[n_acc]],
                q=[rng.random()],
                calls=calls,
                elapsed=calls * 0.01,
            )
        )
        steps.append(
            Step(
                kind=StepKind.RESAMPLE,
                round=rnd,
                positions=[at],
                tokens=[1],
                texts=[" y"],
                p=[None],
                q=[rng.random()],
                calls=calls,
                elapsed=calls * 0.01,
                note="residual",
            )
        )
        n_acc += 1
    return steps, n_acc, calls


def bench_trace(seed: int, n_steps: int = STEPS_PER_RUN, k: int = 4) -> list[Step]:
    """n_steps of draft pass / draft / density pass / accepts / reject + resample rounds."""
    rng = random.Random(seed)
    steps: list[Step] = []
    pos, calls, rnd = 0, 0.0, 0
    while len(steps) < n_steps:
        more, decided, calls = _bench_round(rng, rnd, pos, calls, k)
        steps += more
        pos += decided
        rnd += 1
    return steps[:n_steps]


def _write(st: Store, share_id: str, traces: list[list[Step]]) -> None:
    for i, tr in enumerate(traces):
        st.record_run(share_id, "assd", {"k": 4}, i, tr, completed_text="x" * 1000)


def run(url: str, n_runs: int, threads: int = 16) -> dict[str, float]:
    """Store n_runs runs from one writer, then as many from `threads` writers at once; runs per second
    of each phase (and bytes per run on SQLite)."""
    st = open_store(url)
    try:
        sid = st.create_session(
            "text", "bench", "x" * 2000, [{"start": 0, "end": 1000}]
        )
        traces = [bench_trace(i) for i in range(max(n_runs // threads, 1) * threads)]
        single = traces[:n_runs]
        t0 = time.perf_counter()
        _write(st, sid, single)
        single_rate = len(single) / (time.perf_counter() - t0)

        per = len(traces) // threads
        parts = [traces[i * per : (i + 1) * per] for i in range(threads)]
        ths = [threading.Thread(target=_write, args=(st, sid, p)) for p in parts]
        t0 = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        multi_rate = len(traces) / (time.perf_counter() - t0)
        out = {
            "single_runs_per_s": single_rate,
            "threads_runs_per_s": multi_rate,
            "runs": float(len(single) + len(traces)),
        }
        if st.engine.dialect.name == "sqlite":
            with st.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            path = Path(st.engine.url.database or "")
            out["bytes_per_run"] = path.stat().st_size / out["runs"]
        return out
    finally:
        st.close()


def main() -> None:
    """Parse the flags, benchmark the database and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--runs", type=int, default=320, help="runs per phase (default 320)"
    )
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument(
        "--url", default=None, help="database URL (default: a temporary SQLite file)"
    )
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        url = a.url or f"sqlite:///{d}/bench.db"
        r = run(url, a.runs, a.threads)
    print(f"backend: {url.split(':', 1)[0]}; runs of {STEPS_PER_RUN} steps")
    print(
        f"single writer : {r['single_runs_per_s']:8.1f} runs/s  "
        f"({r['single_runs_per_s'] * STEPS_PER_RUN:,.0f} steps/s)"
    )
    print(
        f"{a.threads} threads    : {r['threads_runs_per_s']:8.1f} runs/s  "
        f"({r['threads_runs_per_s'] * STEPS_PER_RUN:,.0f} steps/s)"
    )
    if "bytes_per_run" in r:
        print(
            f"database size : {r['bytes_per_run'] / 1024:8.1f} KiB per stored run "
            f"({int(r['runs'])} runs)"
        )


if __name__ == "__main__":
    main()
