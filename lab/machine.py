"""The machine a figure was measured on, in words: speed ratios differ between CPUs (an AMD EPYC, an
older Intel Xeon and an AMX-capable Intel Xeon order the samplers differently, docs/RESULTS.md), so
every benchmark's output names its CPU, the instruction sets that decide its matmul speed, and the
load around the run."""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: the flags that decide how a small float32 matmul runs (and so the price of a call's extra rows)
FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        out.setdefault(key.strip().lower(), value.strip())
    return out


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown"


def describe() -> str:
    """Cores, CPU model and the matmul-relevant instruction sets, in one line."""
    flags = set(_cpuinfo().get("flags", "").split())
    have = [f for f in FEATURES if f in flags]
    return f"{os.cpu_count()} cores {cpu_model()}" + (f" ({', '.join(have)})" if have else "")


def load_average() -> float | None:
    """The one-minute load average (None where the OS has none): a quiet run is one whose load stays
    near its own one thread."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
