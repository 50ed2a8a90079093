"""Transformer pieces shared by our models: rotary positions, a pre-norm block that can attend
from one set of rows to another set of keys, the weight initialisation and the special-token mask.

Speed notes: the rotary cos/sin come from a table built once per (head size, theta,
device) instead of being recomputed in every layer of every call; a forward computes them once per
set of rows (`rope`) and hands them to every block. The table holds exactly the numbers the
per-call formula gave (same float32 products, same cos/sin), so outputs stay bitwise identical;
tests/engine/models/test_speed_exact.py checks that against the original code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

Rope = tuple[torch.Tensor, torch.Tensor]  # cos, sin [B, 1, L, D/2], in the activations' dtype

_TABLES: dict[tuple, Rope] = {}


def rope_table(d: int, theta: float, n: int, device: torch.device) -> Rope:
    """cos, sin [n', D/2] (float32) of angle p * freq for positions p < n' (n' >= n, grown by doubling)."""
    key = (d, theta, str(device))
    tab = _TABLES.get(key)
    if tab is None or tab[0].shape[0] < n:
        size = max(1024, 1 << (max(n, 1) - 1).bit_length())
        freq = theta ** (-torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
        ang = torch.arange(size, device=device).to(torch.float32)[:, None] * freq
        tab = _TABLES[key] = (ang.cos(), ang.sin())
    return tab


ROPE_POSITIONS = 4096  # table rows when the caller does not say (more than any bundled model's window)


def rope(pos: torch.Tensor, d: int, theta: float, dtype: torch.dtype, n: int | None = None) -> Rope:
    """cos, sin [B, 1, L, D/2] for positions pos [B, L] < n (looked up, not recomputed). The size
    comes from the caller, never from reading pos: no device-to-host sync on an accelerator."""
    cos, sin = rope_table(d, theta, max(n or 0, ROPE_POSITIONS), pos.device)
    return cos[pos][:, None].to(dtype), sin[pos][:, None].to(dtype)


def rotate(x: torch.Tensor, r: Rope) -> torch.Tensor:
    """Rotate pairs of channels of x [B, H, L, D] by the angles of r (RoPE, absolute)."""
    cos, sin = r
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def rotary(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate pairs of channels of x [B, H, L, D] by angles pos [B, L] * freq (RoPE, absolute)."""
    return rotate(x, rope(pos, x.shape[-1], theta, x.dtype))


def _rows_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x [B, L, Din] @ w.T as one 2-D matmul. F.linear on a row slice of a 3-D tensor (not
    contiguous as 3-D) takes torch's batched-matmul path, which expands and copies the weight
    on every call; as 2-D rows (a view for B = 1) it is a plain mm."""
    b, l, din = x.shape
    return F.linear(x.reshape(b * l, din), w).view(b, l, w.shape[0])


def cpu_transposed(owner: nn.Module, groups: tuple[tuple[torch.Tensor, ...], ...],
                   precision: str = "fp32") -> tuple[torch.Tensor, ...] | None:
    """Inference on a CPU: each group of weights stacked along their outputs and copied once into
    the layout its matmul is fastest from, cached on `owner` and rebuilt when a weight's storage or
    version or the precision changes (load_state_dict, an optimizer step, .to()). fp32: one
    contiguous [in, out] matrix; at the few rows of a decoding call, MKL multiplies x @ W^T from it
    markedly faster than from the [out, in] layout nn.Linear keeps (docs/RESULTS.md, "The weights'
    layout"). bf16: the bfloat16 weight packed by oneDNN for its tile kernels (engine/loading/precision.py
    says when and why); `_rows_mm` takes either. None while training (gradients flow through the
    layers themselves) and off the CPU (where the layers' own matmuls are the fast ones), and in
    train() mode (the fast path has no dropout): the caller then uses its layers.
    One grouping per owner. A weight edited through `.data` keeps its version: call
    `load_state_dict` or edit the parameter itself, as every caller here does."""
    ws = [w for g in groups for w in g]
    if ws[0].device.type != "cpu" or owner.training or (torch.is_grad_enabled() and any(w.requires_grad for w in ws)):
        return None
    key = [ws[0].dtype, precision] + [(w.data_ptr(), w._version) for w in ws]
    if owner.__dict__.get("_cpu_key") != key:
        # plain attributes, never in the state dict; ordinary tensors even when first built inside
        # an inference_mode call, so a later call with gradients on its inputs can save them
        with torch.inference_mode(False), torch.no_grad():
            if precision == "bf16":
                owner.__dict__["_cpu_w"] = tuple(_pack_bf16(torch.cat(g)) for g in groups)
            else:
                owner.__dict__["_cpu_w"] = tuple(torch.cat(g).t().contiguous() for g in groups)
        owner.__dict__["_cpu_key"] = key
    return owner.__dict__["_cpu_w"]


#: the most rows one packed bfloat16 matmul gets: up to 32 rows oneDNN computes every row as it
#: computes it alone (bit for bit), beyond that its 1536-deep matmul sums in another order
#: (tests/engine/models/test_precision.py checks it on the machine it runs on)
BF16_ROWS = 32


def _pack_bf16(w: torch.Tensor) -> torch.Tensor:
    """An [out, in] weight as oneDNN's packed bfloat16 matrix: packing it once is what makes a
    bf16 call of one row cheaper than float32 (packing inside every call costs more than it saves)."""
    return torch.ops.mkldnn._reorder_linear_weight(w.to(torch.bfloat16))


def _rows_mm(x: torch.Tensor, wt: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [B, L, Din] @ W (+ bias) as one 2-D matmul, W a `cpu_transposed` weight: an [in, out]
    copy (`_rows_linear` for that layout), or a packed bfloat16 one, which gets the rows rounded
    to bfloat16 and gives float32 back (the bias is added in float32)."""
    b, l, din = x.shape
    x2 = x.reshape(b * l, din)
    if wt.dtype == torch.bfloat16:
        xb = x2.to(torch.bfloat16)
        parts = [torch.ops.mkldnn._linear_pointwise(xb[i : i + BF16_ROWS], wt, None, "none", [], "")
                 for i in range(0, max(1, xb.shape[0]), BF16_ROWS)]
        y = (parts[0] if len(parts) == 1 else torch.cat(parts)).float()
        if bias is not None:
            y += bias
    else:
        y = torch.mm(x2, wt) if bias is None else torch.addmm(bias, x2, wt)
    return y.view(b, l, y.shape[1])


def _attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention in float64, back to float32: one of the bf16 path's two guards of a single law (the
    other: BF16_ROWS). Float32
    attention sums in an order that depends on how many rows and keys a call holds (last bits),
    and rounding to bfloat16 after it turns a last-bit difference into one of 1/256 now and then,
    which then spreads: rows of one model differed by up to 0.01 in total variation between a
    cached sequential run and one call. In float64 the order still varies but no longer reaches
    a float32 bit (tests/engine/models/test_precision.py)."""
    m = mask[:, None] if mask.dtype == torch.bool else mask[:, None].double()
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=m).float()


class Block(nn.Module):
    """Pre-norm attention + MLP. `attend` lets any rows attend to any keys under a boolean mask,
    which is all the two-stream and causal-over-sigma tricks need. Positions may be given as a
    position tensor [B, L] or as a precomputed `Rope` (what the fast paths pass)."""

    #: how `lean_step` multiplies on a CPU (`cpu_transposed`); set by the model's `set_cpu_precision`
    cpu_precision = "fp32"

    def __init__(self, *, d: int, heads: int, ffn: int, theta: float, dropout: float = 0.0):
        super().__init__()
        self.h, self.theta = heads, theta
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))
        self.drop = nn.Dropout(dropout)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L, D] -> [B, H, L, D/H]: the heads as their own axis."""
        b, l, d = x.shape
        return x.view(b, l, self.h, d // self.h).transpose(1, 2)

    def rope(self, pos: torch.Tensor | Rope, x: torch.Tensor) -> Rope:
        """The rotary cos/sin for positions pos (passed through when already computed for the layer)."""
        if isinstance(pos, tuple):
            return pos
        return rope(pos, x.shape[-1] // self.h, self.theta, x.dtype)

    def keys(self, h: torch.Tensor, pos: torch.Tensor | Rope) -> tuple[torch.Tensor, torch.Tensor]:
        """K (rotated) and V of content rows h at positions pos."""
        x = self.ln1(h)
        return rotate(self.split(self.k(x)), self.rope(pos, h)), self.split(self.v(x))

    def qkv(self, h: torch.Tensor, pos: torch.Tensor | Rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q, K (rotated) and V of rows that are both keys and queries: ln1 computed once."""
        r = self.rope(pos, h)
        x = self.ln1(h)
        return rotate(self.split(self.q(x)), r), rotate(self.split(self.k(x)), r), self.split(self.v(x))

    def kv_weight(self) -> torch.Tensor:
        """[2D, D]: the K and V weights stacked, so that content rows get both from one matmul.

        While training (grad enabled on the weights) it is built every call, so gradients flow
        into k and v. Otherwise it is cached and rebuilt whenever either weight's storage or
        version changes (load_state_dict, an optimizer step, .to(): all in-place or new storage)."""
        wk, wv = self.k.weight, self.v.weight
        if torch.is_grad_enabled() and (wk.requires_grad or wv.requires_grad):
            return torch.cat([wk, wv])
        key = (wk.data_ptr(), wk._version, wv.data_ptr(), wv._version, wk.dtype, wk.device)
        if getattr(self, "_kv_key", None) != key:
            with torch.no_grad():
                self._kv = torch.cat([wk, wv]).detach()  # a plain attribute: never in the state dict
            self._kv_key = key
        return self._kv

    def cpu_weights(self) -> tuple[torch.Tensor, ...] | None:
        """The K|V, Q, O, MLP-in and MLP-out weights as `cpu_transposed` copies (None: use the layers)."""
        mods, mlp = self._modules, self._modules["mlp"]._modules  # plain dict reads: this runs every layer of every call
        w = [mods[n]._parameters["weight"] for n in ("k", "v", "q", "o")] + [mlp[i]._parameters["weight"] for i in ("0", "2")]
        return cpu_transposed(self, ((w[0], w[1]), (w[2],), (w[3],), (w[4],), (w[5],)), self.cpu_precision)

    def lean_step(
        self, x: torch.Tensor, nc: int, r_all: Rope, r_c: Rope, mask: torch.Tensor, cache=None, layer: int = 0,
        last: bool = False,
    ) -> torch.Tensor:
        """One layer of the two-stream forward with both streams in one tensor: x [B, nc + nq, D]
        holds the content rows then the query rows, which share every weight, so each weight
        matrix is streamed from memory once per layer instead of once per stream. Content rows
        also give K/V (one matmul with the stacked K|V weight, written to `cache` if given);
        all rows attend to the content keys in one call under mask [B, nc + nq, Lk] (boolean, True
        = may attend, or additive: 0 / -inf). With `last`, only the query rows are carried on (the
        last layer's content rows feed nothing) and mask holds the query rows' part alone. Same
        arithmetic as `qkv`/`attend`, batched differently: float rounding may differ in the last
        bits (tests/engine/models/test_speed_exact.py bounds it)."""
        b, n, d = x.shape
        cw = self.cpu_weights()
        xn = self.ln1(x)
        kv = _rows_linear(xn[:, :nc], self.kv_weight()) if cw is None else _rows_mm(xn[:, :nc], cw[0])
        k = rotate(self.split(kv[..., :d]), r_c)
        v = self.split(kv[..., d:])
        if cache is not None:
            k, v = cache.write(layer, k, v)
        if last:
            x, xn = x[:, nc:], xn[:, nc:]
        q = rotate(self.split(_rows_linear(xn, self.q.weight) if cw is None else _rows_mm(xn, cw[1])), r_all)
        if cw is not None and self.cpu_precision == "bf16":
            a = _attention64(q, k, v, mask)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        _, h, l, hd = a.shape
        a = a.transpose(1, 2).reshape(b, l, h * hd)
        if cw is None:
            x = x + self.drop(self.o(a))
            return x + self.drop(self.mlp(self.ln2(x)))
        x = x + _rows_mm(a, cw[2])
        hid = self.mlp[1](_rows_mm(self.ln2(x), cw[3], self.mlp[0].bias))
        return x + _rows_mm(hid, cw[4], self.mlp[2].bias)

    def causal(self, x: torch.Tensor, r: Rope) -> torch.Tensor:
        """Residual update of rows x [B, L, D] that are their own keys, row i seeing rows <= i: a
        causal pass with no cache (the PTP head's one-pass round), so no mask is built."""
        q, k, v = self.qkv(x, r)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        b, h, l, hd = a.shape
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, l, h * hd)))
        return x + self.drop(self.mlp(self.ln2(x)))

    def attend(
        self, x: torch.Tensor, pos: torch.Tensor | Rope, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
        q: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Residual update of rows x [B, L, D] at positions pos; mask [B, L, Lk] (True = may attend).
        `q`: the rows' rotated queries when `qkv` already computed them."""
        if q is None:
            q = rotate(self.split(self.q(self.ln1(x))), self.rope(pos, x))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        b, h, l, d = a.shape
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, l, h * d)))
        return x + self.drop(self.mlp(self.ln2(x)))


def init_weights(module: nn.Module) -> None:
    """The initialisation every model of ours starts from (GPT-2's): N(0, 0.02) weights, zero
    biases, unit LayerNorms. Models add their own extras (the AS-ARM's query embedding ...)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def special_token_mask(config, device: torch.device) -> torch.Tensor:
    """[V] bool, True at the special token ids: logits are set to -inf there, so no model ever
    proposes or scores [PAD], [BOS], [MASK] ... as a token of the text."""
    m = torch.zeros(config.vocab_size, dtype=torch.bool, device=device)
    m[config.special_token_ids] = True
    return m
