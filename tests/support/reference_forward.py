"""The AS-ARM forward exactly as it was written before the speed work (issue 13): rotary angles
recomputed per call, ln1 twice per content row, K/V concatenated twice. Kept only so that a test
can check the fast forward returns the very same bits."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rotary(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    d = x.shape[-1]
    freq = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = pos.to(torch.float32)[:, None, :, None] * freq
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def _keys(blk, h, pos):
    x = blk.ln1(h)
    return rotary(blk.split(blk.k(x)), pos, blk.theta), blk.split(blk.v(x))


def _attend(blk, x, pos, k, v, mask):
    q = rotary(blk.split(blk.q(blk.ln1(x))), pos, blk.theta)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
    b, h, l, d = a.shape
    x = x + blk.o(a.transpose(1, 2).reshape(b, l, h * d))
    return x + blk.mlp(blk.ln2(x))


class RefCache:
    def __init__(self):
        self.k, self.v, self.ranks = [], [], None

    def __len__(self):
        return 0 if self.ranks is None else self.ranks.shape[1]

    def truncate(self, n):
        if self.ranks is None or n >= len(self):
            return
        self.k = [t[:, :, :n] for t in self.k]
        self.v = [t[:, :, :n] for t in self.v]
        self.ranks = self.ranks[:, :n]


@torch.no_grad()
def reference_forward(model, content_ids, content_pos, content_rank, query_pos, query_limit, cache=None,
                      states=False, head_rows=None):
    past = len(cache) if cache is not None else 0
    key_rank = content_rank if not past else torch.cat([cache.ranks, content_rank], 1)
    mask_c = key_rank[:, None, :] <= content_rank[:, :, None]
    mask_q = key_rank[:, None, :] < query_limit[:, :, None]
    h = model.embed(content_ids)
    g = model.query_embed.expand(query_pos.shape[0], query_pos.shape[1], -1)
    new_k, new_v = [], []
    for i, blk in enumerate(model.blocks):
        k, v = _keys(blk, h, content_pos)
        new_k.append(k)
        new_v.append(v)
        if past:
            k = torch.cat([cache.k[i], k], 2)
            v = torch.cat([cache.v[i], v], 2)
        if i < len(model.blocks) - 1:
            h = _attend(blk, h, content_pos, k, v, mask_c)
        g = _attend(blk, g, query_pos, k, v, mask_q)
    if cache is not None:
        if past:
            cache.k = [torch.cat([a, b], 2) for a, b in zip(cache.k, new_k)]
            cache.v = [torch.cat([a, b], 2) for a, b in zip(cache.v, new_v)]
        else:
            cache.k, cache.v = new_k, new_v
        cache.ranks = key_rank
    h = model.norm(g)
    if not states:
        return model.head(h)
    return model.head(h if head_rows is None else h[:, :head_rows]), h
