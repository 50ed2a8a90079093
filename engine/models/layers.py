"""Transformer pieces shared by our models: rotary positions, a pre-norm block that can attend
from one set of rows to another set of keys, and a cached-KV container."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rotary(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate pairs of channels of x [B, H, L, D] by angles pos [B, L] * freq (RoPE, absolute)."""
    d = x.shape[-1]
    freq = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.to(torch.float32)[:, None, :, None] * freq  # [B, 1, L, D/2]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    """Pre-norm attention + MLP. `attend` lets any rows attend to any keys under a boolean mask,
    which is all the two-stream and causal-over-sigma tricks need."""

    def __init__(self, d: int, heads: int, ffn: int, theta: float, dropout: float = 0.0):
        super().__init__()
        self.h, self.theta = heads, theta
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))
        self.drop = nn.Dropout(dropout)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, l, d = x.shape
        return x.view(b, l, self.h, d // self.h).transpose(1, 2)

    def keys(self, h: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K (rotated) and V of content rows h at positions pos."""
        x = self.ln1(h)
        return rotary(self.split(self.k(x)), pos, self.theta), self.split(self.v(x))

    def attend(
        self, x: torch.Tensor, pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Residual update of rows x [B, L, D] at positions pos; mask [B, L, Lk] (True = may attend)."""
        q = rotary(self.split(self.q(self.ln1(x))), pos, self.theta)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        b, h, l, d = a.shape
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, l, h * d)))
        return x + self.drop(self.mlp(self.ln2(x)))
