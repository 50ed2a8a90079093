"""How many torch threads sampling uses: one default per process (INFILL_THREADS), or the number a
command chose. Its own module because loading a model applies the default and the lab's commands
override it, and neither should have to import the other to agree on who decided."""

from __future__ import annotations

import os

import torch

_threads_applied = False


def apply_thread_default() -> None:
    """Torch intra-op threads for sampling, once per process: INFILL_THREADS (default 1; 0 keeps
    torch's own default). On the 2-core shared machine a second thread made calls slower (docs/RESULTS.md,
    "Why speculation does not pay on text and code on this CPU"): the calls are small and a second thread
    mostly waits for a core."""
    global _threads_applied
    if _threads_applied:
        return
    _threads_applied = True
    n = int(os.environ.get("INFILL_THREADS", "1") or 0)
    if n > 0:
        torch.set_num_threads(n)


def set_threads(n: int) -> None:
    """Torch threads chosen by the caller (bench/report/train --threads): the default no longer applies."""
    global _threads_applied
    _threads_applied = True
    torch.set_num_threads(n)
