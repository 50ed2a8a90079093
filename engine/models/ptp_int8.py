"""The PTP head as assd-ptp drafts with it on a CPU: its linear layers in int8, one row at a time.

Why int8: on a CPU a drafting pass over k = 3-5 rows is bound by reading the weights, not by
arithmetic (the text head's linear layers are ~25 MB of float32, read once a round, about a third
of what the AS-ARM's verify call reads). Dynamic int8 quantisation reads a quarter of the bytes.
The head's output is a proposal, so its exact numbers do not matter for the law, *provided* row j's
proposal is still a function of the context and u_1..u_{j-1} only (engine/samplers/ptp.py).

Why one row at a time: dynamic quantisation picks one activation scale per call from the range of
its whole input. Fed a round's rows together, row j's numbers would depend on the rows after it,
which read u_j (and e_j): p_j would depend on the very uniform d_j is drawn with, and the
speculative test would no longer be exact (the copy did exactly that from 2026-11-27 to 2026-11-28:
on the text head, changing u_2 alone moved rows 1-2's residuals by up to 0.1;
tests/engine/models/test_ptp_int8.py now holds every row <= j bitwise fixed). `RowInt8` gives each
row its own call, so each row's scale is its own; the float32 head needs no such care (a matmul's
row i reads row i only).

The embeddings and the norms stay float32 (lookups, or small). Each block also gets its Q, K and V
weights stacked into one layer (`qkv_proj`, int8 like the rest), which `Block.causal` uses: one
matmul call per row where it made three. The copy is made once per head object and kept beside it
(not a submodule: never saved, never trained).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

#: layers of the head quantised for CPU drafting: every linear layer (blocks, output projection, low-rank term,
#: input projections)
INT8_LAYERS = ("blocks", "out", "prev_out", "in_proj", "u_embed", "prev_gate")


class RowInt8(nn.Module):
    """A dynamically quantised int8 linear layer applied to each row of its input by itself (see
    the module's docstring: a row's activation scale must not depend on the other rows)."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> [..., out], one call of the int8 layer per row."""
        rows = x.reshape(-1, x.shape[-1])
        y = torch.cat([self.layer(rows[i : i + 1]) for i in range(rows.shape[0])])
        return y.view(*x.shape[:-1], y.shape[-1])


def _rowwise(module: nn.Module) -> None:
    """Wrap every int8 linear layer below `module` in RowInt8 (in place)."""
    for name, child in list(module.named_children()):
        if isinstance(child, torch.ao.nn.quantized.dynamic.Linear):
            setattr(module, name, RowInt8(child))
        else:
            _rowwise(child)


def int8_copy(head: nn.Module) -> nn.Module:
    """A copy of `head` whose INT8_LAYERS' nn.Linear layers are dynamically quantised to int8
    (weights int8 per tensor, activations quantised per row: RowInt8), cached on the head."""
    cached = head.__dict__.get("_int8_copy")
    if cached is not None:
        return cached
    twin = copy.deepcopy(head)  # before the cache entry exists: the twin holds no copy of its own
    for blk in twin.blocks:  # Q|K|V stacked: one int8 matmul per block in the one-pass round (Block.causal)
        blk.qkv_proj = nn.Linear(blk.q.in_features, 3 * blk.q.out_features, bias=False)
        with torch.no_grad():
            blk.qkv_proj.weight.copy_(torch.cat([blk.q.weight, blk.k.weight, blk.v.weight]))
    with warnings.catch_warnings():  # torch's eager quantisation API announces its successor on every call
        warnings.simplefilter("ignore")
        for name in INT8_LAYERS:
            layer = getattr(twin, name, None)
            if layer is not None:
                setattr(twin, name, torch.ao.quantization.quantize_dynamic(
                    nn.Sequential(layer), {nn.Linear}, dtype=torch.qint8)[0])
    _rowwise(twin)
    twin.eval()
    head.__dict__["_int8_copy"] = twin
    return twin


def drafting_head(head: nn.Module, int8: bool = True) -> nn.Module:
    """The head assd-ptp drafts with: its int8 copy when a float32 head runs on the CPU in eval
    mode (and `int8`), the head itself elsewhere (a GPU reads weights fast and has no int8 kernels
    here; a float64 head, as the exactness tests use, is asking for its own arithmetic)."""
    from .ptp import PtpHead

    if not int8 or not isinstance(head, PtpHead) or head.training:
        return head
    w = head.in_proj.weight
    if w.device.type != "cpu" or w.dtype != torch.float32:
        return head
    return int8_copy(head)
