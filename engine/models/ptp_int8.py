"""The PTP head as assd-ptp drafts with it on a CPU: its linear layers in int8, each row by its own scale.

Why int8: on a CPU a drafting pass over k = 3-5 rows is bound by reading the weights, not by
arithmetic (the three-block text head's linear layers were ~25 MB of float32, read once a round, about a third
of what the AS-ARM's verify call reads). Dynamic int8 quantisation reads a quarter of the bytes.
The head's output is a proposal, so its exact numbers do not matter for the law, *provided* row j's
proposal is still a function of the context and u_1..u_{j-1} only (engine/samplers/ptp.py).

Why each row by its own scale: dynamic quantisation picks one activation scale per call from the
range of its whole input. Fed a round's rows together, row j's numbers would depend on the rows
after it, which read u_j (and e_j): p_j would depend on the very uniform d_j is drawn with, and the
speculative test would no longer be exact (the copy did exactly that from 2026-11-27 to 2026-11-28:
on the text head, changing u_2 alone moved rows 1-2's residuals by up to 0.1;
tests/engine/models/test_ptp_int8.py holds every row <= j bitwise fixed). `RowInt8` first gave each
row its own call (m calls a layer); since 2026-11-28 (night) it divides each row by its own largest
magnitude and adds an anchor row (-1, 1, 0, ...) that pins the call's range to [-1, 1], so the one
call's scale is a constant and row i's numbers are row i's alone: one call a layer. The float32
head needs no such care (a matmul's row i reads row i only).

The embeddings and the norms stay float32 (lookups, or small). Each block also gets its Q, K and V
weights stacked into one layer (`qkv_proj`, int8 like the rest), which `Block.causal` uses: one
matmul call where it made three. The copy is made once per head object and kept beside it
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
    """A dynamically quantised int8 linear layer whose every row is quantised by its own scale, in ONE
    call for all rows (see the module's docstring: a row's activation scale must not depend on the
    other rows). Each row is divided by its own largest magnitude, so every row lies in [-1, 1]; one
    more row, the anchor (-1, 1, 0, ...), makes [-1, 1] the range of every call whatever the rows
    hold, so the layer's one activation scale is the same for every call; the result is multiplied
    back by each row's own magnitude and the bias added in float32. Row i's output is a function of
    row i alone, bitwise, as with one call per row, at the cost of one call."""

    def __init__(self, layer: nn.Module, bias: torch.Tensor | None):
        super().__init__()
        self.layer = layer  # the int8 layer, without its bias (added after the rescaling)
        self.packed = layer._packed_params._packed_params  # what its forward hands the int8 op
        self.bias = None if bias is None else bias.detach().clone()
        anchor = torch.zeros(1, layer.in_features)
        anchor[0, 0], anchor[0, -1] = -1.0, 1.0
        self.anchor = anchor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> [..., out], every row by its own scale, one int8 call (the op the int8
        layer's forward calls, called directly: this runs once per linear layer a drafting round, plus once
        per row for the low-rank term)."""
        rows = x.reshape(-1, x.shape[-1])
        size = torch.linalg.vector_norm(rows, float("inf"), -1, keepdim=True).clamp_min(torch.finfo(rows.dtype).tiny)
        y = torch.ops.quantized.linear_dynamic(torch.cat([rows / size, self.anchor]), self.packed, True)[:-1]
        y = y * size if self.bias is None else torch.addcmul(self.bias, y, size)
        return y.view(*x.shape[:-1], y.shape[-1])


def _int8(layer: nn.Linear) -> RowInt8:
    """`layer` as a RowInt8: its weight quantised to int8 (per tensor, dynamic activations), its bias kept."""
    bare = nn.Linear(layer.in_features, layer.out_features, bias=False)
    with torch.no_grad():
        bare.weight.copy_(layer.weight)
    with warnings.catch_warnings():  # torch's eager quantisation API announces its successor on every call
        warnings.simplefilter("ignore")
        q = torch.ao.quantization.quantize_dynamic(nn.Sequential(bare), {nn.Linear}, dtype=torch.qint8)[0]
    return RowInt8(q, layer.bias)


def _quantise(module: nn.Module) -> nn.Module:
    """`module` with every nn.Linear below it (or itself) replaced by its RowInt8 (in place where below)."""
    if isinstance(module, nn.Linear):
        return _int8(module)
    for name, child in list(module.named_children()):
        setattr(module, name, _quantise(child))
    return module


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
    for name in INT8_LAYERS:
        layer = getattr(twin, name, None)
        if layer is not None:
            setattr(twin, name, _quantise(layer))
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
