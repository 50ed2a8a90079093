"""The PTP head as assd-ptp drafts with it on a CPU: its big linear layers in int8, each row by its own
scale; the input layer and the low-rank term in float32.

Why int8: on a CPU a drafting pass over k = 3-5 rows is bound by reading the weights, not by
arithmetic (the three-block text head's linear layers were ~25 MB of float32, read once a round, about a third
of what the AS-ARM's verify call reads). Dynamic int8 quantisation reads a quarter of the bytes.
The head's output is a proposal, so its exact numbers do not matter for the law, *provided* row j's
proposal is still a function of the context and u_1..u_{j-1} only (engine/samplers/ptp.py).

Why not every layer (measured 2026-12-02 on code-ptp, k = 3, the variants interleaved on the same
inputs and seeds): in int8 the input layer reads the uniform's 32 bits (0 or 1) in one row with the
AS-ARM's state, and `RowInt8` divides that row by its largest value and rounds it to 7 bits, so with
state values in the tens a bit's 1 becomes a coarse fraction of its weight (and 0 once the largest value
passes about 127): the bits that say where in its CDF the previous draft fell are blurred. The low-rank
term's weights share one int8 scale set by their largest value (5.2 on code-ptp, against a spread of
0.22), a step of about a fifth of their spread. On 8 code windows the expected acceptance of a tested
row (the sum of min(p, q)) was 0.483 with both in int8 and 0.513 with both in float32 (the input layer
alone in float32: 0.510), 1.74 against 1.84 tokens per call; on 8 text windows 0.512 with both in int8,
0.511 with both in float32 (the input layer alone: 0.497). Both layers are small (the input
layer [d + 32, d], the term [V, rank], one row a draft); float32 costs about 0.1 ms a round (the term's
2 MB against 0.5 MB). The output layer, [V, d] and the round's largest read, keeps int8 (in float32, on
4 code windows: no more tokens per call, 0.5 ms more a round).

Why each row by its own scale: dynamic quantisation picks one activation scale per call from the
range of its whole input. Fed a round's rows together, row j's numbers would depend on the rows
after it, which read u_j (and e_j): p_j would depend on the very uniform d_j is drawn with, and the
speculative test would no longer be exact (the copy did exactly that from 2026-11-27 to 2026-11-28:
on the text head, changing u_2 alone moved rows 1-2's residuals by up to 0.1;
tests/engine/models/test_ptp_int8.py holds every row <= j bitwise fixed). `RowInt8` first gave each
row its own call (m calls a layer); since 2026-11-28 (night) it divides each row by its own largest
magnitude and adds an anchor row (-1, 1, 0, ...) that pins the call's range to [-1, 1], so the one
call's scale is a constant and row i's numbers are row i's alone: one call a layer. A float32
matmul needs no such care (its row i reads row i only).

The embeddings, the norms and the small gate of the low-rank term stay float32 (lookups, or
small). `CpuDrafter` holds it all, made once per head object (`drafting_head`).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .layers import rope_table, rotate


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
        layer's forward calls, called directly: this runs once per int8 layer a drafting round)."""
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


class CpuDrafter:
    """A one-pass PTP head as assd-ptp drafts with it on a CPU: the head's own weights, its output
    and block layers in int8 (RowInt8; the bundled heads have neither since 2026-12-02), its input
    layer and low-rank term in float32 (module docstring), the round computed in as few operations as
    the arithmetic allows.

    Why a plain object and not the head itself: on a 2-core VM a drafting round was bound by its
    ~150 small operations (module calls, views, a fused attention kernel built for long sequences,
    per-layer conversions), each 10-40 us once the verify call has evicted the caches, so the op
    count, not the arithmetic, set its cost. Here the input projections of the state and of the
    uniform's bits are one float32 matmul, the block's attention over the round's few rows is three
    batched matmuls under a fixed causal mask, the gate of the low-rank term is one float32 matmul
    and the low-rank term's one row is one float32 matrix-vector product. A head without blocks (the
    bundled ones since 2026-11-29) runs all but the state's projection in NumPy, the final norm's
    weight and bias folded into the gate's matmul (2026-12-03: 0.11 ms a round's pass against 0.15).
    Row i's numbers are still a function of rows <= i alone (matmuls, RowInt8 where int8 rows meet,
    row-wise norms, causal attention), which is all exactness asks of a proposal (module docstring)."""

    def __init__(self, head: nn.Module):
        c = self.config = head.config
        self.heads, self.width = c.num_heads, c.hidden_size
        frozen = {n: p.detach() for n, p in head.named_parameters()}
        # [d + 32, d]: the state's projection and the uniform bits' embedding as one float32 matmul
        self.inp = torch.cat([frozen["in_proj.weight"], frozen["u_embed.weight"]], 1).t().contiguous()
        self.inp_bias = frozen["in_proj.bias"] + frozen["u_embed.bias"]
        self.tok, self.window_embed = frozen["tok_embed.weight"], frozen.get("window_embed")
        self.blocks = [_CpuBlock(blk) for blk in head.blocks]
        self.norm = _norm(head.norm)
        self.out = _int8_weights(frozen["out.weight"]) if "out.weight" in frozen else None
        self.gate = frozen["prev_gate.weight"].t().contiguous() if c.prev_rank else None
        # the low-rank term as NumPy float32 arrays: prev_in [V, rank] (one row a draft), prev_out [V, rank]
        # (one matrix-vector product a row, NumPy's a fifth to a third cheaper than torch.mv's once the verify call has
        # evicted the caches: docs/DESIGN.md §7.1)
        self.prev_in, self.prev_out = (None if frozen.get(n) is None else frozen[n].numpy()
                                       for n in ("prev_in.weight", "prev_out.weight"))
        # a head without blocks drafts in NumPy after the state's projection (torch's, one thread): each small
        # operation of a round costs 1-3 us there against 5-25 us in torch once the verify call has evicted
        # the caches (docs/DESIGN.md §7.1)
        d = self.width
        self.state_proj = self.inp[:d]
        self.bits_proj, self.np_bias, self.np_tok = self.inp[d:].numpy(), self.inp_bias.numpy(), self.tok.numpy()
        self.np_norm = tuple(t.numpy() for t in self.norm[1:3])
        self.eps = self.norm[3]
        if self.gate is not None:  # 1 + LN(x) @ gate = z @ (weight * gate) + (1 + bias @ gate), z = (x - mean) / std
            self.gate_w = (self.norm[1][:, None] * self.gate).numpy()
            self.gate_c = (self.norm[2] @ self.gate + 1).numpy()
        self.rope = rope_table(self.width // self.heads, c.rope_theta, c.max_positions, torch.device("cpu"))
        self.window_at = head.window_at

    def draft_pass(self, hidden: torch.Tensor, e_prev: torch.Tensor, u_prev: torch.Tensor, pos: torch.Tensor,
                   window: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor | None, np.ndarray | None]:
        """PtpHead.draft_pass for one round (batch 1), in the head's arithmetic up to int8 rounding; the
        gate as a NumPy float32 array [1, m, rank], what `prev_term` reads."""
        m = hidden.shape[1]
        bits = _bits(u_prev[0].numpy())  # uniform_bits, in NumPy: fewer, cheaper operations
        if not self.blocks:  # rows meet nowhere (the window is never read): NumPy but for the state's projection
            x = torch.mm(hidden[0].to(torch.float32), self.state_proj).numpy()
            x += bits @ self.bits_proj + self.np_tok[e_prev[0].numpy()] + self.np_bias
            z = _normalised(x, self.eps)  # the final norm's (x - mean) / std; its weight and bias are in gate_w, gate_c
            gate = None if self.gate is None else (z @ self.gate_w + self.gate_c)[None]
            resid = None if self.out is None else self.out(torch.from_numpy(z * self.np_norm[0] + self.np_norm[1]))[None]
            return resid, gate
        x = torch.addmm(self.inp_bias, torch.cat([hidden[0].to(torch.float32), torch.from_numpy(bits)], 1), self.inp)
        x.add_(self.tok[e_prev[0]])
        p = pos[0]
        if window is not None:
            x = torch.cat([self.tok[window[0][0]] + self.window_embed, x])
            p = torch.cat([window[1][0], p])
        cos, sin = self.rope[0][p], self.rope[1][p]
        mask = torch.full((len(p), len(p)), float("-inf")).triu_(1)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask, self.heads)
        h = F.layer_norm(x[-m:], *self.norm)
        gate = None if self.gate is None else torch.mm(h, self.gate).add_(1)[None].numpy()
        return (None if self.out is None else self.out(h)[None]), gate

    def prev_term(self, gate: np.ndarray, prev: int) -> np.ndarray:
        """PtpHead.prev_term: the low-rank logit term [V] (NumPy float32) of one row on the real previous
        draft, from that row's gate [rank] (NumPy float32, from `draft_pass`)."""
        return self.prev_out @ (self.prev_in[prev] * gate)


class _CpuBlock:
    """One Block of the head (pre-norm causal attention + GELU MLP) for CpuDrafter: Q|K|V one int8 layer."""

    def __init__(self, blk: nn.Module):
        self.ln1, self.ln2 = _norm(blk.ln1), _norm(blk.ln2)
        self.qkv = _int8_weights(torch.cat([blk.q.weight, blk.k.weight, blk.v.weight]).detach())
        self.o = _int8_weights(blk.o.weight.detach())
        self.fc1 = _int8_weights(blk.mlp[0].weight.detach(), blk.mlp[0].bias.detach())
        self.fc2 = _int8_weights(blk.mlp[2].weight.detach(), blk.mlp[2].bias.detach())

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                 heads: int) -> torch.Tensor:
        """Block.causal on rows x [L, D] at the rotary angles cos, sin [L, D/H/2]."""
        n, d = x.shape
        hd = d // heads
        y = self.qkv(F.layer_norm(x, *self.ln1)).view(n, 3 * heads, hd).transpose(0, 1)  # [3H, L, hd]
        qk = rotate(y[: 2 * heads], (cos, sin))  # Q's and K's heads turned by the same angles
        att = torch.baddbmm(mask, qk[:heads], qk[heads:].transpose(1, 2), alpha=hd**-0.5).softmax(-1)
        x = x + self.o(torch.bmm(att, y[2 * heads :]).transpose(0, 1).reshape(n, d))
        return x + self.fc2(F.gelu(self.fc1(F.layer_norm(x, *self.ln2))))


def _bits(u: np.ndarray) -> np.ndarray:
    """engine.models.ptp.uniform_bits of float64 uniforms [n], in NumPy: float32(u)'s 32 bits, lowest
    first, [n, 32] float32 (the little-endian bytes' bits, each byte's lowest first)."""
    return np.unpackbits(u.astype(np.float32).view(np.uint8), bitorder="little").reshape(-1, 32).astype(np.float32)


def _normalised(x: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over the last axis of float32 NumPy rows: F.layer_norm before its
    weight and bias (CpuDrafter folds those into the gate's matmul: fewer small operations)."""
    xc = x - np.add.reduce(x, -1, keepdims=True) * (1.0 / x.shape[-1])
    return xc / np.sqrt(np.add.reduce(xc * xc, -1, keepdims=True) * (1.0 / x.shape[-1]) + eps)


def _norm(ln: nn.LayerNorm) -> tuple:
    """F.layer_norm's arguments after the input, from a LayerNorm."""
    return ln.normalized_shape, ln.weight.detach(), ln.bias.detach(), ln.eps


def _int8_weights(weight: torch.Tensor, bias: torch.Tensor | None = None) -> RowInt8:
    """A RowInt8 layer of these float weights ([out, in]) and bias."""
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return _int8(layer)


def drafting_head(head: nn.Module, int8: bool = True) -> nn.Module | CpuDrafter:
    """What assd-ptp drafts with: for a float32 one-pass head on the CPU in eval mode (and `int8`),
    its CpuDrafter, made once per head object and kept beside it (not a submodule: never saved,
    never trained); the head itself elsewhere (a GPU reads weights fast and has no int8 kernels
    here; a float64 head, as the exactness tests use, is asking for its own arithmetic; a draft-mode
    head takes k + 1 passes a round whatever its arithmetic, and only the tests' tiny heads have that mode).
    The drafter reads the head's weights once, some as copies (the int8 layers, the input layer), some by
    reference: a head whose weights change in place afterwards needs a new one (`del head._cpu_drafter`).
    Exactness would not suffer from the mix, only the proposals' faithfulness."""
    from .ptp import PtpHead

    if not int8 or not isinstance(head, PtpHead) or head.training or head.config.mode != "onepass":
        return head
    w = head.in_proj.weight
    if w.device.type != "cpu" or w.dtype != torch.float32:
        return head
    cached = head.__dict__.get("_cpu_drafter")
    if cached is None:
        cached = head.__dict__["_cpu_drafter"] = CpuDrafter(head)
    return cached
