"""Where the numbers came from: machine, software, code revision, models with their weight hashes,
seeds and runtime, for the report's last section and its header."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

import torch

from engine.loading.device import device_name

from ..machine import cpu_model, describe
from .measure import Models
from .plan import Plan
from .render import fmt, md_table


def machine_short(device, workers: int) -> str:
    """The machine in one line, for the header and every table caption."""
    return (f"{describe()}, {device_name(device)}, "
            f"torch threads {torch.get_num_threads()}") + (
        f", {workers} worker processes of 1 thread each in sections 1 and 5" if workers > 1 else "")


def git_rev() -> str:
    """The code's git revision, marked when the checkout has uncommitted changes."""
    try:
        root = Path(__file__).resolve().parents[2]
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return f"git {rev}{' (uncommitted changes)' if dirty else ''}" if rev else "not a git checkout"
    except Exception:  # noqa: BLE001
        return "git unavailable"


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def section_provenance(models: Models, plan: Plan, command: str, started: float, date: str,
                       section_seconds: dict[str, float]) -> list[str]:
    """Section 6: the models used (and those not), the command, machine, software, seeds, runtime."""
    rows = []
    for m in models.used.values():
        st = m.train_state
        rows.append([m.name, m.kind, m.domain, f"`{m.sha256}`", str(st.get("steps", "n/a")),
                     fmt(st.get("valid_loss", float("nan")), 3), str(m.max_tokens), _rel(m.path)])
    out = ["## 6. Provenance", "", f"Regenerate with: `{command}`", ""]
    out += md_table(["model", "kind", "domain", "model.safetensors sha256", "train steps", "valid loss",
                     "window (tokens)", "path"], rows)
    if models.missing:
        out += ["Models not used:", ""] + [f"- {k}: {v}" for k, v in sorted(models.missing.items())] + [""]
    p = plan
    return out + [
        f"- Date: {date}",
        f"- Machine: {os.cpu_count()} cores, CPU model {cpu_model()}, models on {device_name()}, "
        f"torch threads {torch.get_num_threads()}, "
        f"{platform.machine()}, {platform.system()} {platform.release()}",
        f"- Software: Python {platform.python_version()}, torch {torch.__version__}",
        f"- Code: {git_rev()}",
        f"- Seeds: inputs from `masked_windows(seed={p.seed})`; input i runs with seed {p.seed}+i for every "
        "sampler; HumanEval tasks `random.Random(0)`, task i with seed i.",
        f"- Mode: {'quick' if p.quick else 'full'}; inputs {p.samples} (section 1), {p.ss_samples} (section 3), "
        f"{p.scaling_samples} per point (section 5); k = {p.k}",
        f"- Data: INFILL_DATA_DIR={os.environ.get('INFILL_DATA_DIR', 'data')}",
        f"- Runtime: {time.time() - started:.0f} s in all; " + ", ".join(
            f"{k} {v:.0f} s" for k, v in section_seconds.items()),
        "",
    ]
