"""Speed figures from the machine that serves the page. The samplers' catalogue carries figures
measured once on the docs' 2-core CPU (engine.samplers.DEFAULT_SAMPLERS); a visitor on another
machine saw those as if they were this server's (0.96x on the page while `bench assd` here read
0.79x). "Measure this machine" runs a short `bench assd` in a child process, only when no run is
computing (it never runs at start-up, and tests replace the command), and keeps the result with
the machine's description; the page then states this machine's figure, and says where any other
figure comes from and when it was measured.

A kept measurement belongs to the machine, not to a thread: its identity (describe_machine) is what
every thread of one server shares (CPU model, cores, matmul precision). Torch's thread count is
per thread (the benchmark's child set its own, a handler thread reads torch's default), so it is
kept as a property of the measurement (`threads`) and shown with it, never compared."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from app.timing.units import speed_words
from engine.samplers import DEFAULT_SAMPLERS, SAMPLERS

BASELINE = "sequential-cache"
_lock = threading.Lock()


def cache_path() -> Path:
    """Where the measurement is kept (INFILL_MACHINE_SPEED_FILE, default ~/.cache/infill-studio/)."""
    default = Path.home() / ".cache" / "infill-studio" / "machine-speed.json"
    return Path(os.environ.get("INFILL_MACHINE_SPEED_FILE") or default)


def describe_machine() -> str:
    """This machine in a few words: CPU model, cores and the precision of its matmuls
    (engine/loading/precision.py: bf16 on a CPU with AMX changes which sampler is fastest), or the
    GPU that runs the models. Only what is the same in every thread of one server: a saved
    measurement is matched against it (measured_here), and torch's thread count differs between a
    handler thread and the thread that set it, so it is not part of it."""
    import torch

    from engine.loading.precision import resolve_precision

    if torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(0)}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {resolve_precision()} matmuls"


#: the thread count that files written before the machine's identity left it out kept inside it
_OLD_THREADS_RE = re.compile(r", (\d+) torch threads(?=,)")


def _saved_machine(entry: dict) -> tuple[object, int | None]:
    """A saved entry's machine identity and the torch threads it was measured with. An entry from
    before `threads` was kept names them inside its machine string ("..., 1 torch threads, ..."):
    read them from there, so that such a file still matches this machine."""
    machine, threads = entry.get("machine"), entry.get("threads")
    if isinstance(machine, str):
        m = _OLD_THREADS_RE.search(machine)
        if m is not None:
            machine = machine[:m.start()] + machine[m.end():]
            threads = threads if threads is not None else int(m.group(1))
    return machine, threads if isinstance(threads, int) and not isinstance(threads, bool) else None


def bench_inputs(domain: str, folder: Path) -> Path:
    """The benchmark's inputs: the domain's examples joined into one text, 90% masked, three times
    (seeds differ per input), so it needs no downloaded corpus."""
    from app.examples import EXAMPLES

    text = " ".join(re.sub(r"\[MASK[^\]]*\]", "", e).strip() for e in EXAMPLES.get(domain, EXAMPLES["text"]))
    path = folder / f"measure-{domain}.jsonl"
    path.write_text("".join(json.dumps({"text": text, "mask_rate": 0.9}) + "\n" for _ in range(3)))
    return path


def bench_command(domain: str, samplers: list[str], inputs: Path) -> list[str]:
    """The short benchmark: the samplers interleaved with cached sequential on `inputs`."""
    return [sys.executable, "-m", "engine", "bench", "assd", "--domain", domain, "--inputs", str(inputs),
            "--samplers", ",".join([BASELINE, *[s for s in samplers if s != BASELINE]]), "--json", "--quiet"]


def _run_bench(cmd: list[str], timeout: float) -> dict:
    out = subprocess.run(["nice", *cmd], capture_output=True, text=True, timeout=timeout, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def server_idle() -> bool:
    """No run holds or waits for a compute slot (a measurement beside a run would time both)."""
    from app.serving.slots import slots

    s = slots()
    return s.free == s.n and not s.estimate().busy


def measure(domain: str) -> str:
    """Measure this machine for `domain`'s default sampler against cached sequential decoding and
    keep it; the sentence to show (or why it did not run)."""
    if not server_idle():
        return "Not measured: runs are computing now and would share the machine. Try again when it is idle."
    if not _lock.acquire(blocking=False):
        return "A measurement is already running on this machine; its figure appears when it ends."
    try:
        sampler = DEFAULT_SAMPLERS.get(domain, DEFAULT_SAMPLERS["text"]).sampler
        try:
            with tempfile.TemporaryDirectory() as tmp:
                cmd = bench_command(domain, [sampler], bench_inputs(domain, Path(tmp)))
                res = _run_bench(cmd, float(os.environ.get("INFILL_MEASURE_SECONDS", "300")))
        except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
            return f"Not measured: the benchmark did not finish ({type(e).__name__})."
        row = next((r for r in res.get("rows", []) if r.get("sampler") == sampler), None)
        if row is None or "wall_ratio_vs_sequential_cache" not in row:
            return "Not measured: the benchmark gave no ratio against cached sequential decoding."
        entry = {"sampler": sampler, "ratio": row["wall_ratio_vs_sequential_cache"],
                 "low": row.get("wall_ratio_vs_sequential_cache_min"),
                 "high": row.get("wall_ratio_vs_sequential_cache_max"), "inputs": res.get("samples"),
                 "model": res.get("model"), "machine": describe_machine(), "threads": _threads_of(res),
                 "measured": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")}
        saved = _read()
        saved[domain] = entry
        path = cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(saved, indent=1))
        return speed_sentence(domain)
    finally:
        _lock.release()


def _threads_of(res: dict) -> int | None:
    """The torch threads the benchmark ran with (its child process reports them), None when unsaid."""
    n = res.get("torch_threads")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def _read() -> dict:
    try:
        data = json.loads(cache_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def measured_here(domain: str) -> dict | None:
    """This machine's kept measurement for `domain` (None when there is none, or it was made on
    another machine: a copied cache file is not this machine's figure), with its machine identity
    and `threads` read the same way for old and new files."""
    entry = _read().get(domain)
    if not isinstance(entry, dict) or not _readable(entry):
        return None
    machine, threads = _saved_machine(entry)
    if machine != describe_machine():
        return None
    return {**entry, "machine": machine, "threads": threads}


def _readable(entry: dict) -> bool:
    """Whether a saved entry has what the sentence shows (a hand-edited or truncated file is
    ignored, never a crash)."""
    def number(v) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and v > 0

    return (entry.get("sampler") in SAMPLERS and number(entry.get("ratio")) and number(entry.get("inputs"))
            and isinstance(entry.get("measured"), str)
            and all(entry.get(k) is None or number(entry.get(k)) for k in ("low", "high")))


def speed_sentence(domain: str) -> str:
    """What the domain's default costs against cached sequential decoding, and where that figure
    comes from: this machine's measurement when there is one, else the catalogue's, said to be
    from another machine."""
    m = measured_here(domain)
    if m is None:
        return (docs_sentence(domain) + " This server has not measured it yet: Statistics > Measure this "
                "machine times it here.")
    threads = m.get("threads")
    ran = "" if threads is None else f" with {threads} torch thread{'s' if threads != 1 else ''}"
    return (f"Default for {domain}: {m['sampler']}, {speed_words(m['ratio'], m.get('low'), m.get('high'))} than "
            f"cached sequential decoding on this server ({m['machine']}; {m['inputs']} inputs timed side by side"
            f"{ran}, range in brackets, measured {m['measured']} by Measure this machine).")


def docs_sentence(domain: str) -> str:
    """The catalogue's figure for the domain's default, said to be the docs' machine's
    ("on <machine> (docs)"), in the page's one unit (app.timing.speedup.speed_words)."""
    c = DEFAULT_SAMPLERS.get(domain, DEFAULT_SAMPLERS["text"])
    what, _, machine = c.source.rpartition(", ")
    return (f"Default for {domain}: {c.sampler}, the fastest exact speculative sampler measured, "
            f"{speed_words(c.ratio, *c.ratio_range)} than cached sequential decoding on {machine or c.source} "
            f"(docs{': ' + what if what else ''}).")
