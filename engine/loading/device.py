"""Where the networks run: `INFILL_DEVICE=auto|cpu|cuda` (or `cuda:N`), or `--device` on the CLIs.

`auto` (the default) picks CUDA when torch sees a GPU, else the CPU. Asking for `cuda` where there
is none is an error with one line to act on, never a silent CPU run. The setting decides where
models live; every tensor a sampler feeds a model is created on the model's device, and the
logits come back to the CPU in float64, where the acceptance arithmetic and the run's generator
live (engine/samplers/acceptance.py): the same sampler code and the same random stream on both devices.
"""

from __future__ import annotations

import os

import torch

from engine.errors import BadParameterError

ENV = "INFILL_DEVICE"


def resolve_device(setting: str | torch.device | None = None) -> torch.device:
    """The torch device for a setting (None: $INFILL_DEVICE, default auto). A `torch.device`
    object passes through unchecked (the Python API's escape hatch: mps, meta for tests)."""
    if isinstance(setting, torch.device):
        return setting
    raw = setting if setting is not None else os.environ.get(ENV, "")
    s = (raw or "auto").strip().lower()
    if s == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if s == "cpu":
        return torch.device("cpu")
    if s == "cuda" or (s.startswith("cuda:") and s[5:].isdigit()):
        if not torch.cuda.is_available():
            raise BadParameterError(
                f"device {s!r} was asked for ({ENV} or --device) but torch sees no CUDA GPU "
                f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                "use auto or cpu, or install a CUDA build of torch on a GPU machine."
            )
        if s != "cuda" and int(s[5:]) >= torch.cuda.device_count():
            raise BadParameterError(f"device {s!r}: torch sees only {torch.cuda.device_count()} GPU(s).")
        return torch.device(s)
    raise BadParameterError(f"Unknown device {raw!r} ({ENV} or --device): use one of auto, cpu, cuda, cuda:N.")


def apply_device_flag(setting: str | None) -> torch.device:
    """For the CLIs: check `--device` (or the environment) now, so a bad setting is one line at
    start-up, and export it so everything loaded later (and worker processes) uses the same one."""
    dev = resolve_device(setting)
    if setting is not None:
        os.environ[ENV] = setting
    return dev


def device_name(device: torch.device | None = None) -> str:
    """For reports and benches: 'cpu' or 'cuda (NVIDIA H100 80GB HBM3)'."""
    dev = device or resolve_device()
    return f"cuda ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else dev.type


def host64(logits: torch.Tensor) -> torch.Tensor:
    """Logits as the acceptance arithmetic takes them: float64 on the CPU (a no-op copy there)."""
    return logits.to(device="cpu", dtype=torch.float64)
