"""How an AS-ARM multiplies on the CPU: `INFILL_PRECISION=auto|fp32|bf16`, or `--precision` on the CLIs.

Why it matters: on a CPU with AMX tiles (Intel Xeon since Sapphire Rapids) oneDNN multiplies
bfloat16 matrices in tiles, and with the weights packed once for it a call of 16 rows costs about
what a call of one row costs, and the one-row call itself is faster than in float32 (half the bytes
of weight to stream). Extra rows are what speculation pays for, so on such a CPU speculative
decoding wins where in float32 it barely breaks even (docs/RESULTS.md, "bfloat16 matmuls").

`bf16` rounds each matmul's input rows to bfloat16 and keeps everything else in float32 (the
residual stream, norms, attention, softmax); the weights lose nothing, since the bundled
checkpoints are stored in bfloat16. It is a slightly different model from `fp32`, one law for every
call shape, so sequential and speculative decoding still sample the same law whichever is chosen.
`auto` (the default) picks bf16 where the CPU has AMX and torch's oneDNN supports bfloat16, else
fp32. Only float32 models on the CPU use it; a GPU and float64 models (the tests' tiny ones) keep
their own arithmetic. Asking for bf16 elsewhere is an error with one line to act on: on a CPU without
AMX oneDNN may emulate bfloat16 with other kernels, for which neither the speed nor the one-law
property (tests/engine/models/test_precision.py, run where bf16 is available) has been checked.
"""

from __future__ import annotations

import os

import torch

from engine.errors import BadParameterError

ENV = "INFILL_PRECISION"
PRECISIONS = ("fp32", "bf16")  # what a model computes in
CHOICES = ("auto", *PRECISIONS)  # what a setting may say


def bf16_supported() -> bool:
    """oneDNN can multiply bfloat16 matrices on this CPU (natively or by emulation)."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def amx_present() -> bool:
    """The CPU has AMX tiles: where bf16 matmuls were measured (docs/RESULTS.md) and tested."""
    return bool(torch.cpu._is_amx_tile_supported())


def bf16_available() -> bool:
    """bf16 can be chosen here: AMX tiles and oneDNN's bfloat16."""
    return amx_present() and bf16_supported()


def resolve_precision(setting: str | None = None) -> str:
    """'fp32' or 'bf16' for a setting (None: $INFILL_PRECISION, default auto)."""
    raw = setting if setting is not None else os.environ.get(ENV, "")
    s = (raw or "auto").strip().lower()
    if s not in CHOICES:
        raise BadParameterError(f"Unknown precision {raw!r} ({ENV} or --precision): use one of {', '.join(CHOICES)}.")
    if s == "auto":
        return "bf16" if bf16_available() else "fp32"
    if s == "bf16" and not bf16_available():
        raise BadParameterError(f"precision 'bf16' was asked for ({ENV} or --precision) but this CPU has no AMX "
                                "tiles or torch's oneDNN no bfloat16 (the bf16 path is built and tested for AMX "
                                "CPUs); use auto or fp32.")
    return s


def apply_precision_flag(setting: str | None) -> str:
    """For the CLIs: check `--precision` (or the environment) now, so a bad setting is one line at
    start-up, and export it so everything loaded later (and worker processes) uses the same one."""
    p = resolve_precision(setting)
    if setting is not None:
        os.environ[ENV] = setting
    return p


def model_precision(model: torch.nn.Module, device: str, precision: str) -> str:
    """The precision a loaded model computes in: `precision` (resolved) for a float32 model on the
    CPU whose network can use it (it has `set_cpu_precision`); fp32 otherwise."""
    p = next(model.parameters(), None)
    if device != "cpu" or p is None or p.dtype != torch.float32 or not hasattr(model, "set_cpu_precision"):
        return "fp32"
    return precision
