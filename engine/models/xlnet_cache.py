"""XLNet's two-stream forward over only the rows a call needs, with the content-stream K/V of the
prompt and the decided tokens kept per layer.

Why it is exact: in the studio's decode order a decided token's content row sees the prompt and the
tokens decided before it, nothing else, so its keys and values at every layer never change once it
is decided; undecided, undrafted positions are seen by no row at all (Hugging Face's forward
computes them and masks them out with -1e30, a weight of exactly zero). XLNet has no absolute
positions: its attention adds a term of the query's and the key's distance, so each call computes
that term for its own rows against every kept key (a table of the distances, projected once per
model). A call then computes its new content rows (decided tokens not yet kept, and the drafts)
and its query rows only. The query stream of one position may be asked several questions in one
call (each row carries its own limit), which the full-window forward cannot do.
"""

from __future__ import annotations

import weakref

import torch

from ..errors import IncompatibleModelsError

#: per model: (largest distance, one [heads, 2 * span + 1, d_head] table per layer)
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def relative_tables(model, span: int) -> tuple[int, list[torch.Tensor]]:
    """Each layer's projected sinusoid of every distance -span..span, [heads, 2 * span + 1, d_head]
    (Hugging Face's relative_positional_encoding and `r` projection, computed once per model and span)."""
    have = _TABLES.get(model)
    if have is not None and have[0] >= span:
        return have
    tr = model.transformer
    cfg = model.config
    dev = next(model.parameters()).device
    dist = torch.arange(-span, span + 1, device=dev, dtype=torch.int64).float()
    if cfg.clamp_len > 0:
        dist = dist.clamp(-cfg.clamp_len, cfg.clamp_len)
    freq = torch.arange(0, cfg.d_model, 2.0, dtype=torch.int64, device=dev).float()
    inv = 1 / torch.pow(10000, (freq / cfg.d_model))
    arg = dist[:, None] * inv
    emb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=-1)
    with torch.inference_mode():
        tables = [torch.einsum("pd,dnh->nph", emb.to(layer.rel_attn.r.dtype), layer.rel_attn.r).contiguous()
                  for layer in tr.layer]
    _TABLES[model] = (span, tables)
    return span, tables


def check_supported(cfg) -> None:
    """The cached forward covers XLNet as the ASSD paper runs it: bidirectional attention, one data
    stream, no segment ids, no memory; anything else is refused in words."""
    if cfg.attn_type != "bi" or cfg.bi_data:
        raise IncompatibleModelsError("The XLNet KV cache covers attn_type 'bi' without bi_data; use an uncached "
                                      "sampler (sequential, assd) with this checkpoint.")


class XLNetKV:
    """Keys and values of the kept content rows, per layer, in buffers sized for the whole window:
    rows [0, kept) are the prompt and the decided tokens; rows after them are the latest call's
    drafts, kept tentatively (a draft decided as drafted keeps its row)."""

    def __init__(self, model, capacity: int, span: int):
        check_supported(model.config)
        self.model = model
        tr = model.transformer
        self.layers = list(tr.layer)
        p = next(model.parameters())
        n, d = model.config.n_head, model.config.d_head
        self.n, self.d = n, d
        self.k = [torch.empty(n, capacity, d, dtype=p.dtype, device=p.device) for _ in self.layers]
        self.v = [torch.empty(n, capacity, d, dtype=p.dtype, device=p.device) for _ in self.layers]
        # the projections as [d_model, heads * d_head] views of the weights (no copy per call)
        dm = model.config.d_model
        self.w = [{name: getattr(layer.rel_attn, name).reshape(dm, n * d) for name in "qkvo"} for layer in self.layers]
        self.pos = torch.empty(capacity, dtype=torch.long, device=p.device)
        self.rank = torch.empty(capacity, dtype=torch.long, device=p.device)
        self.kept = 0
        self.span, self.tables = relative_tables(model, span)

    def _attend(self, li: int, x: torch.Tensor, keys: int, allowed: torch.Tensor, rows_pos: torch.Tensor) -> torch.Tensor:
        """One layer's relative attention and feed-forward for rows `x` [m, d] over the first `keys`
        kept keys (allowed [m, keys]): Hugging Face's rel_attn_core, post_attention and
        XLNetFeedForward, as plain matrix products over [heads, rows, d_head]."""
        layer, w = self.layers[li], self.w[li]
        att = layer.rel_attn
        m = x.shape[0]
        q = (x @ w["q"]).view(m, self.n, self.d).transpose(0, 1)
        ac = torch.matmul(q + att.r_w_bias[:, None, :], self.k[li][:, :keys].transpose(1, 2))
        by_dist = torch.matmul(q + att.r_r_bias[:, None, :], self.tables[li].transpose(1, 2))
        idx = (rows_pos[:, None] - self.pos[None, :keys] + self.span).expand(self.n, -1, -1)
        bd = torch.gather(by_dist, 2, idx)
        score = ((ac + bd) * att.scale).masked_fill(~allowed, float("-inf"))
        vec = torch.matmul(torch.softmax(score, dim=-1), self.v[li][:, :keys])
        h = att.layer_norm(vec.transpose(0, 1).reshape(m, -1) @ w["o"].T + x)
        ff = layer.ff
        return ff.layer_norm(ff.layer_2(ff.activation_function(ff.layer_1(h))) + h)

    @torch.inference_mode()
    def forward(self, ids: list[int], pos: list[int], rank: list[int], keep: int,
                qpos: list[int], qlim: list[int]) -> torch.Tensor:
        """New content rows (ids at positions `pos` with ranks `rank`; the first `keep` are decided
        and become kept rows, the rest are drafts) and query rows (position, limit: sees ranks below
        the limit, never its own position): the query rows' final states [len(qpos), d]."""
        tr = self.model.transformer
        dev = self.pos.device
        base, m, nq = self.kept, len(ids), len(qpos)
        if base + m > self.pos.shape[0]:
            raise IncompatibleModelsError("The XLNet KV cache is full: more rows than the window holds.")
        end = base + m
        self.pos[base:end] = torch.tensor(pos, dtype=torch.long)
        self.rank[base:end] = torch.tensor(rank, dtype=torch.long)
        kpos, krank = self.pos[:end], self.rank[:end]
        new_rank = self.rank[base:end]
        own = torch.arange(base, end, device=dev)
        see_c = (krank[None, :] < new_rank[:, None]) | ((krank[None, :] == 0) & (new_rank[:, None] == 0))
        see_c[torch.arange(m, device=dev), own] = True  # a content row sees itself
        qp = torch.tensor(qpos, dtype=torch.long, device=dev)
        ql = torch.tensor(qlim, dtype=torch.long, device=dev)
        see_q = (krank[None, :] < ql[:, None]) & (kpos[None, :] != qp[:, None])
        allowed = torch.cat([see_c, see_q])
        rows_pos = torch.cat([self.pos[base:end], qp])
        h = tr.word_embedding(torch.tensor(ids, dtype=torch.long, device=dev))
        g = tr.mask_emb.reshape(1, -1).expand(nq, -1)
        for li in range(len(self.layers)):
            w = self.w[li]
            self.k[li][:, base:end] = (h @ w["k"]).view(m, self.n, self.d).transpose(0, 1)
            self.v[li][:, base:end] = (h @ w["v"]).view(m, self.n, self.d).transpose(0, 1)
            out = self._attend(li, torch.cat([h, g]), end, allowed, rows_pos)
            h, g = out[:m], out[m:]
        self.kept = base + keep
        return g

    def keep_next(self, n: int = 1) -> None:
        """The next `n` tentative rows (drafts decided as drafted) become kept rows."""
        self.kept += n
