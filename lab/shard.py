"""Batch work across processes: the inputs of `bench`, `eval` and `report` shared among the
processes a launcher started (torchrun, `accelerate launch`), with accelerate's PartialState.

Every process holds the whole input list and takes its contiguous share by index
(split_between_processes); input i keeps seed + i whichever process runs it, so each input's run
is the one a single process would make. The per-input results are gathered (gather_object: every
process gets all of them) and put back in input order, so everything computed from them, and
everything printed, is what one process computes. Only the main process prints or writes files
(is_main). One process (no launcher, WORLD_SIZE unset or 1) never touches torch.distributed.

    python -m torch.distributed.run --nproc_per_node 2 -m engine bench assd --inputs F.jsonl --json
    accelerate launch --multi_gpu --num_processes 4 -m engine report
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from . import progress

T = TypeVar("T")
R = TypeVar("R")

_state = None


def distributed() -> bool:
    """Launched as one of several processes (torchrun / accelerate launch set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def state():
    """accelerate's PartialState (process group: gloo on the CPU, NCCL on GPUs), made once; None
    for one process."""
    global _state
    if _state is None and distributed():
        import torch
        from accelerate import PartialState

        _state = PartialState(cpu=not torch.cuda.is_available())
        atexit.register(_close)
        if _state.device.type == "cuda" and os.environ.get("INFILL_DEVICE", "auto") in ("", "auto", "cuda"):
            os.environ["INFILL_DEVICE"] = f"cuda:{_state.local_process_index}"  # one GPU per process
    return _state


def is_main() -> bool:
    """The process that prints and writes (rank 0; the only one without a launcher)."""
    st = state()
    return st is None or st.is_main_process


def world() -> tuple[int, int]:
    """(this process's index, number of processes)."""
    st = state()
    return (0, 1) if st is None else (st.process_index, st.num_processes)


def shard_map(fn: Callable[[int, T], R], items: Sequence[T], desc: str = "") -> list[R]:
    """[fn(i, items[i]) for every i], each process running its share; every process gets the
    whole list back in input order. fn must not raise (a raise on one process would leave the
    others waiting at the gather): catch and return the error as a value."""
    st = state()
    idx = list(range(len(items)))
    if st is None:
        return [fn(i, items[i]) for i in progress.bar(idx, desc=desc)]
    with st.split_between_processes(idx) as mine:
        mine = list(mine)
    done = [(i, fn(i, items[i])) for i in progress.bar(mine, desc=f"{desc} [{len(mine)} of {len(items)} here]")]
    from accelerate.utils import gather_object

    everything = gather_object(done)
    return [r for _, r in sorted(everything, key=lambda x: x[0])]


def _close() -> None:
    """Take the process group down before the interpreter exits: left to the interpreter's
    teardown, gloo's threads could abort a process ("terminate called without an active
    exception", exit -6) after its work was done, about one launch in three on this CPU."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every process (no-op for one)."""
    st = state()
    if st is not None:
        st.wait_for_everyone()
