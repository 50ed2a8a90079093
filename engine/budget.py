"""Per-run budgets: a run stops, with a clear message, once it has computed for too long or spent
too many network calls; and parameters whose cost grows with the input are bounded by it.

A budget is checked by `InfillRun.stream` after every step, so the steps decided so far stay in
the trace (the app stores such a run with status 'stopped'). Seconds are the time the run spends
computing, not the time it waits for a free model slot or for its consumer, so a run that queues
behind others on a busy server is not cut short for it.

The library and CLI run without a budget; the app takes `Budget.from_env()`:
INFILL_RUN_MAX_SECONDS (default 20) and INFILL_RUN_MAX_CALLS (default 1024); 0 switches one off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import BadParameterError, InfillError

DEFAULT_MAX_SECONDS = 20.0
DEFAULT_MAX_CALLS = 1024.0


class BudgetExceededError(InfillError):
    """The run used its budget; the steps so far are kept. `run_status` tells a recorder how to
    store the partial run."""

    run_status = "stopped"


def _env_float(name: str, default: float) -> float | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        return default
    return None if v <= 0 or v != v else v


@dataclass(frozen=True)
class Budget:
    max_seconds: float | None = None  # computing time of one run
    max_calls: float | None = None  # network calls of one run (both networks, fractional)

    @classmethod
    def from_env(cls) -> Budget:
        return cls(_env_float("INFILL_RUN_MAX_SECONDS", DEFAULT_MAX_SECONDS),
                   _env_float("INFILL_RUN_MAX_CALLS", DEFAULT_MAX_CALLS))

    def check(self, seconds: float, calls: float) -> None:
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
