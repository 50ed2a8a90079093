"""The PTP head as assd-ptp drafts with it on a CPU: its big matrices in int8.

Why: on a CPU a drafting pass over k = 5 rows is bound by reading the weights, not by arithmetic
(the text head's 3 blocks, output projection and low-rank term are ~25 MB of float32, read once a
round, about a third of what the AS-ARM's verify call reads). Dynamic int8 quantisation of those
linear layers reads a quarter of the bytes. The head's output is a proposal, so its exact numbers
do not matter for the law: assd-ptp stays exact whatever the head computes (engine/samplers/ptp.py);
only how often drafts are accepted can move, which `bench assd` measures.

The embeddings and the norms stay float32 (lookups, or small). Each block
also gets its Q, K and V weights stacked into one layer (`qkv_proj`, int8 like the rest), which
`Block.causal` uses: the one-pass round makes one matmul call where it made three. The copy is
made once per head object and kept beside it (not a submodule: never saved, never trained).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

#: layers of the head quantised for CPU drafting: every linear layer (blocks, output projection, low-rank term,
#: input projections); at 3-5 rows an int8 matmul costs a quarter of a float32 one even for the 384 x 384 ones
INT8_LAYERS = ("blocks", "out", "prev_out", "in_proj", "u_embed", "prev_gate")


def int8_copy(head: nn.Module) -> nn.Module:
    """A copy of `head` whose INT8_LAYERS' nn.Linear layers are dynamically quantised to int8
    (weights int8 per tensor, activations quantised per call), cached on the head."""
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
