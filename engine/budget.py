"""Per-run budgets: a run stops, with a clear message, once it has computed for too long or spent
too many network calls; and parameters whose cost grows with the input are bounded by it.

A budget is checked before every network pass (a forward pre-hook on the models' embeddings,
`install`) and after every step, so one long step (a diffusion drafter can spend minutes on
one round) cannot outrun it, and the steps decided so far stay in the trace (the app stores such
a run with status 'stopped'). Seconds are the time the run spends computing, not the time it
waits for a free model slot or for its consumer, so a run that queues behind others on a busy
server is not cut short for it. The same checkpoint lets a consumer pause a run between two
network passes (`Meter.pause`: the app hands its compute slot to a lighter run there).

The library and CLI run without a budget; the app takes `Budget.from_env()`:
INFILL_RUN_MAX_SECONDS (default 20) and INFILL_RUN_MAX_CALLS (default 1024); 0 switches one off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .envvars import env_limit
from .errors import BadParameterError, InfillError

DEFAULT_MAX_SECONDS = 20.0
DEFAULT_MAX_CALLS = 1024.0


class BudgetExceededError(InfillError):
    """The run used its budget; the steps so far are kept. `run_status` tells a recorder how to
    store the partial run."""

    run_status = "stopped"


@dataclass(frozen=True)
class Budget:
    """Per-run limits a public server sets (computing seconds, network calls), so one visitor's run
    cannot hold a compute slot for long (docs/SERVING.md)."""

    max_seconds: float | None = None  # computing time of one run
    max_calls: float | None = None  # network calls of one run (both networks, fractional)

    @classmethod
    def from_env(cls) -> Budget:
        """The server's budget from INFILL_RUN_MAX_SECONDS / INFILL_RUN_MAX_CALLS (0 switches one off)."""
        return cls(env_limit("INFILL_RUN_MAX_SECONDS", DEFAULT_MAX_SECONDS),
                   env_limit("INFILL_RUN_MAX_CALLS", DEFAULT_MAX_CALLS))

    def check(self, seconds: float, calls: float) -> None:
        """Raise BudgetExceededError, with what to change, once the run is over either limit."""
        if self.max_seconds is not None and seconds > self.max_seconds:
            raise BudgetExceededError(
                f"Stopped: this run computed for {seconds:.1f} s, over the server's budget of "
                f"{self.max_seconds:g} s per run. The steps so far are kept; try fewer masked tokens, a "
                "smaller k, or fewer steps / inner loops.")
        if self.max_calls is not None and calls > self.max_calls:
            raise BudgetExceededError(
                f"Stopped: this run spent {calls:g} network calls, over the server's budget of "
                f"{self.max_calls:g} per run. The steps so far are kept; try fewer masked tokens or fewer "
                "steps / inner loops.")

    def check_params(self, masked: int, params: dict) -> None:
        """Limits that scale with the input, checked before the run: diffusion steps (MDM spends a
        pass a step, diffusion drafting up to min(steps, k) a round) at most 4 per masked token,
        and steps x inner loops (self-spec verifies up to `inner` times a step) at most 16 per
        masked token, with floors so that short inputs keep the usual settings."""
        steps, inner = params.get("steps"), params.get("inner", 1)
        if steps is None:
            return
        cap_steps = max(64, 4 * masked)
        if steps > cap_steps:
            raise BadParameterError(
                f"steps = {steps} is more than this input needs: with {masked} masked tokens the server takes "
                f"at most {cap_steps} steps (4 per masked token, at least 64).")
        cap_work = max(256, 16 * masked)
        if steps * inner > cap_work:
            raise BadParameterError(
                f"steps x inner = {steps * inner:,} is more than this input needs: with {masked} masked tokens "
                f"the server takes steps x inner up to {cap_work:,} (16 per masked token, at least 256).")


_local = threading.local()


class Meter:
    """One run's accounting while its sampler computes in this thread: computing seconds (pauses
    excluded), the budget check at each checkpoint, and the consumer's optional pause."""

    def __init__(self, budget: Budget | None, calls: Callable[[], float], pause: Callable[[], None] | None = None):
        self.budget, self.calls, self.pause = budget, calls, pause
        self.seconds = 0.0
        self._t = 0.0
        self._outer = None

    def __enter__(self) -> Meter:
        self._outer = getattr(_local, "meter", None)
        _local.meter = self
        self._t = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.perf_counter() - self._t
        _local.meter = self._outer

    def checkpoint(self) -> None:
        """Called before every network pass: add the time since the last one, enforce the budget and
        let the app hand the compute slot to a waiting run."""
        now = time.perf_counter()
        self.seconds += now - self._t
        self._t = now
        if self.budget is not None:
            self.budget.check(self.seconds, self.calls())
        if self.pause is not None:
            self.pause()
            self._t = time.perf_counter()  # time paused is not computing time


def checkpoint() -> None:
    """Called before every network pass: checks the running run's budget (raising
    BudgetExceededError) and lets its consumer pause it. No-op outside a metered run."""
    m = getattr(_local, "meter", None)
    if m is not None:
        m.checkpoint()


def install(model) -> None:
    """Put `checkpoint` before every network pass of `model` (a torch module): a forward pre-hook
    on its embedding layers, which every pass of every model kind starts with. Idempotent."""
    import torch

    if getattr(model, "_infill_checkpoints", False):
        return
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            m.register_forward_pre_hook(lambda _m, _a: checkpoint())
    model._infill_checkpoints = True
