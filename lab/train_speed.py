"""Training throughput for `python -m engine train`: the optimizer, windows built on the device,
the batch-size probe and the tokens/s meter.

Why a module of its own: these are the pieces that decide how fast a lent GPU trains (one job with
the whole GPU, no per-step host work), and each one is tested on the CPU (tests/lab/test_train_speed.py),
where the GPU is never there to check them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch


def fused_devices() -> list[str]:
    """Device types on which this torch has fused AdamW kernels (a private torch helper, so a
    torch without it falls back to CUDA only)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        return list(_get_fused_kernels_supported_devices())
    except (ImportError, AttributeError):
        return ["cuda"]


def make_optimizer(params: list[torch.nn.Parameter], lr: float, weight_decay: float = 0.01
                   ) -> tuple[torch.optim.AdamW, str]:
    """AdamW with fused kernels where the parameters' device has them (one kernel for the whole
    update instead of several per tensor), else the multi-tensor `foreach` path. Returns
    (optimizer, "fused" | "foreach")."""
    device = params[0].device.type if params else "cpu"
    if device in fused_devices():
        try:
            return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True), "fused"
        except (RuntimeError, ValueError):  # e.g. a dtype the fused kernel refuses
            pass
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, foreach=True), "foreach"


class DeviceWindows:
    """Random BOS-led windows of seq_len tokens, gathered on the device from a token stream moved
    there once (int32: half the bytes of int64). No host-to-device copy per step: the window starts
    are drawn by a generator on the stream's device and the gather is one indexing kernel.

    With a CPU stream the windows equal token_windows.batches' (same generator, same draws)."""

    def __init__(self, *, stream: torch.Tensor, seq_len: int, bos_id: int, device: torch.device, seed: int = 0):
        if len(stream) <= seq_len + 1:
            raise ValueError(f"a stream of {len(stream)} tokens is too short for windows of {seq_len}")
        self.stream = stream.to(device=device, dtype=torch.int32)
        self.seq_len, self.bos_id, self.device = seq_len, bos_id, self.stream.device
        self.gen = torch.Generator(device=self.device).manual_seed(seed)
        self.offsets = torch.arange(seq_len, device=self.device)

    def take(self, batch: int, gen: torch.Generator | None = None) -> torch.Tensor:
        """[batch, seq_len + 1] int64 on the device: BOS, then a window of the stream."""
        g = gen or self.gen
        starts = torch.randint(0, len(self.stream) - self.seq_len - 1, (batch,), generator=g, device=self.device)
        x = self.stream[starts[:, None] + self.offsets].long()
        return torch.cat([torch.full((batch, 1), self.bos_id, dtype=torch.long, device=self.device), x], 1)

    def batches(self, batch: int) -> Iterator[torch.Tensor]:
        """An endless iterator of take(batch)."""
        while True:
            yield self.take(batch)


@dataclass
class ProbeResult:
    """The batch the probe chose and what it measured (tokens/s per batch tried)."""

    batch: int
    rows: list[dict] = field(default_factory=list)
    reason: str = ""


def probe_batch(step: Callable[[int], None], seq_len: int, max_tokens: int, *, start: int = 8,
                fixed: list[int] | None = None, tolerance: float = 0.9, budget_s: float = 30.0,
                reps: int = 2, sync: Callable[[], None] = lambda: None,
                clock: Callable[[], float] = time.perf_counter, memory_ok: Callable[[], bool] = lambda: True,
                log: Callable[[str], None] = print) -> ProbeResult:
    """Time a forward + backward of doubling batch sizes (from `start`, at most `max_tokens` tokens
    a step) and choose one: the smallest batch whose tokens/s is within `tolerance` of the best
    measured. Why the smallest near the best: past the point where the device is busy, a bigger
    batch buys no speed, only fewer optimizer steps for the same tokens (worse training per token).
    A batch that runs out of memory (or leaves `memory_ok()` false) ends the doubling; so does the
    probe's time budget. `step(batch)` must leave the weights unchanged (no optimizer step)."""
    sizes = fixed or []
    if not sizes:
        b = max(1, start)
        while b * seq_len <= max_tokens:
            sizes.append(b)
            b *= 2
        sizes = sizes or [max(1, max_tokens // seq_len)]
    rows: list[dict] = []
    began = clock()
    reason = "every size tried"
    for b in sizes:
        try:
            step(b)  # warm-up: allocation, kernel selection
            sync()
            t0 = clock()
            for _ in range(reps):
                step(b)
            sync()
            dt = max(clock() - t0, 1e-9)
        except torch.OutOfMemoryError:
            reason = f"batch {b} ran out of memory"
            _free()
            break
        rows.append({"batch": b, "tokens_per_step": b * seq_len, "tokens_per_s": reps * b * seq_len / dt})
        log(f"probe: batch {b:>5} ({b * seq_len:>8,} tokens/step) {rows[-1]['tokens_per_s']:>12,.0f} tokens/s")
        if not memory_ok():
            reason = f"batch {b} filled the memory bound"
            break
        if clock() - began > budget_s:
            reason = f"probe budget {budget_s:.0f}s spent at batch {b}"
            break
    if not rows:
        raise RuntimeError(f"the batch probe could not run even batch {sizes[0]} ({reason})")
    best = max(r["tokens_per_s"] for r in rows)
    chosen = next(r for r in rows if r["tokens_per_s"] >= tolerance * best)
    log(f"probe: batch {chosen['batch']} chosen ({chosen['tokens_per_s']:,.0f} tokens/s, best {best:,.0f}; "
        f"{reason}; cap {max_tokens:,} tokens/step)")
    return ProbeResult(chosen["batch"], rows, reason)


def _free() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cuda_memory_ok(device: torch.device, fraction: float = 0.6) -> Callable[[], bool]:
    """A memory bound for the probe: the peak allocation stayed under `fraction` of the GPU (the
    rest is headroom for the optimizer's moments and fragmentation). Always true off CUDA."""
    if device.type != "cuda":
        return lambda: True
    total = torch.cuda.get_device_properties(device).total_memory
    return lambda: torch.cuda.max_memory_allocated(device) < fraction * total


def device_sync(device: torch.device) -> Callable[[], None]:
    """What a timer must wait for on this device (CUDA kernels run asynchronously)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


class TokenMeter:
    """Tokens trained per wall second, from the first timed step on (the first steps allocate)."""

    def __init__(self) -> None:
        self.tokens = 0
        self.timed_tokens = 0
        self.since: float | None = None

    def add(self, tokens: int, now: float) -> None:
        """Count one step's tokens; timing starts at the first call (that step is not timed)."""
        self.tokens += tokens
        if self.since is None:
            self.since = now
        else:
            self.timed_tokens += tokens
        self.now = now

    def rate(self) -> float:
        """Tokens per second over the timed steps (0 before two steps)."""
        if self.since is None or self.timed_tokens == 0:
            return 0.0
        return self.timed_tokens / max(self.now - self.since, 1e-9)
