"""Any-subset autoregressive model (AS-ARM): an XLNet-style two-stream transformer with rotary
positions, written so that decided tokens can be cached.

Content rows carry token + position; query rows carry only a position. Every content row has a
*rank*: the prompt (BOS included) is rank 0 and mutually visible; decided tokens get ranks 1, 2, ...
in decode order. A content row attends to keys of rank <= its own (the prompt block, or itself and
earlier ranks); a query row with limit L attends to keys of rank < L. Because a decided token
never sees later ranks, its per-layer K/V never change, which is what makes the cache exact.

This module holds the model's logic without importing transformers, so that the CLI and the app can
load a bundled checkpoint without paying for transformers' import: `AsArmLite` is the
same network on a plain nn.Module; `AsArmModel` (engine/models/asarm.py) is the Hugging Face
class for training, saving and the Auto classes. Both share `AsArmMixin`, so they compute the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from .layers import Block, _rows_mm, cpu_transposed, rope, special_token_mask

IGNORE = -100  # cross_entropy's ignore_index: a target that counts for nothing
DEFAULTS = dict(vocab_size=260, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024, max_positions=513,
                rope_theta=10000.0, dropout=0.0, pad_token_id=0, bos_token_id=1, mask_token_id=2,
                special_token_ids=[0, 1, 2, 3], domain="text", model_type="asarm")


@dataclass(kw_only=True)
class KVCache:
    """Per-layer K/V of content rows, in rank order, with their ranks. Truncate to roll back.

    The rows live in preallocated buffers (grown by doubling) so a call writes its new rows in
    place and attends to a view: no per-call concatenation of the whole cache."""

    k: list[torch.Tensor] = field(default_factory=list)  # [B, H, capacity, D] per layer
    v: list[torch.Tensor] = field(default_factory=list)
    rank_buf: torch.Tensor | None = None  # [B, capacity]
    n: int = 0

    def __len__(self) -> int:
        return self.n

    @property
    def ranks(self) -> torch.Tensor | None:
        """Ranks of the cached rows (the keys' side of the attention mask)."""
        return None if self.rank_buf is None else self.rank_buf[:, : self.n]

    def truncate(self, n: int) -> None:
        """Keep the first n rows: how rejected drafts are rolled back."""
        self.n = min(self.n, max(0, n))

    def reserve(self, layers: int, like: torch.Tensor, rank_like: torch.Tensor, extra: int) -> None:
        """Room for `extra` more rows; `like` [B, H, *, D] gives batch, heads, head size, dtype, device."""
        need = self.n + extra
        cap = 0 if self.rank_buf is None else self.rank_buf.shape[1]
        if need <= cap:
            return
        size = max(64, 1 << (need - 1).bit_length())
        b, h, _, d = like.shape

        def grow(old: list[torch.Tensor], i: int) -> torch.Tensor:
            t = torch.empty((b, h, size, d), dtype=like.dtype, device=like.device)
            if old and self.n:
                t[:, :, : self.n] = old[i][:, :, : self.n]
            return t

        self.k = [grow(self.k, i) for i in range(layers)]
        self.v = [grow(self.v, i) for i in range(layers)]
        ranks = torch.empty((b, size), dtype=rank_like.dtype, device=rank_like.device)
        if self.rank_buf is not None and self.n:
            ranks[:, : self.n] = self.rank_buf[:, : self.n]
        self.rank_buf = ranks

    def write(self, i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store layer i's new rows after the cached ones; return every row's K/V (views)."""
        end = self.n + k.shape[2]
        self.k[i][:, :, self.n : end] = k
        self.v[i][:, :, self.n : end] = v
        return self.k[i][:, :, :end], self.v[i][:, :, :end]


class AsArmMixin:
    """The two-stream network: submodules built by `_build`, then forward and the losses."""

    config: SimpleNamespace
    #: how the inference path multiplies on a CPU: "fp32" or "bf16" (engine/loading/precision.py)
    cpu_precision = "fp32"

    def set_cpu_precision(self, precision: str) -> None:
        """Every CPU matmul of the inference path in `precision` (the loader sets the setting's)."""
        self.cpu_precision = precision
        for blk in self.blocks:
            blk.cpu_precision = precision

    def _build(self, config) -> None:
        d = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, d)
        self.query_embed = nn.Parameter(torch.zeros(d))
        self.blocks = nn.ModuleList(
            Block(d=d, heads=config.num_heads, ffn=config.intermediate_size, theta=config.rope_theta, dropout=config.dropout)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size, bias=False)

    def forward(
        self,
        content_ids: torch.Tensor,  # [B, Lc] tokens of new content rows
        content_pos: torch.Tensor,  # [B, Lc] model positions (BOS = 0)
        content_rank: torch.Tensor,  # [B, Lc]
        query_pos: torch.Tensor,  # [B, Lq]
        query_limit: torch.Tensor,  # [B, Lq] attend to keys of rank < limit
        cache: KVCache | None = None,
        states: bool = False,
        head_rows: int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits [B, Lq, V] for the query rows. If `cache` is given, the new content rows' K/V
        are appended to it (the caller truncates it to roll back rejected drafts). With `states`,
        (logits, normed query states [B, Lq, d]): the input of the output head, which a drafter
        such as the PTP head reads (no forward hook needed). With `head_rows` (and `states`), the
        output head runs on the first head_rows query rows only: a caller that reads the other
        rows' logits for one outcome out of several (pipelined ASSD) puts those states through
        `output_head` itself, and the 4,096-wide head never runs on rows nobody reads."""
        past = len(cache) if cache is not None else 0
        key_rank = content_rank if not past else torch.cat([cache.ranks, content_rank], 1)
        nc = content_rank.shape[1]
        # both streams in one tensor: content rows then query rows (they share every weight)
        mask_c = key_rank[:, None, :] <= content_rank[:, :, None]
        mask_q = key_rank[:, None, :] < query_limit[:, :, None]
        g = self.query_embed.expand(query_pos.shape[0], query_pos.shape[1], -1)
        x = torch.cat([self.embed(content_ids), g], 1)
        # additive mask built once per call: attention adds it as is (a boolean mask is converted
        # to this very tensor inside every attention call, i.e. twice per layer before)
        bias = torch.zeros((x.shape[0], x.shape[1], key_rank.shape[1]), dtype=x.dtype, device=x.device)
        bias.masked_fill_(~torch.cat([mask_c, mask_q], 1), float("-inf"))
        d = self.config.hidden_size // self.config.num_heads
        theta = self.config.rope_theta
        npos = self.config.max_positions
        r_c = rope(content_pos, d, theta, x.dtype, npos)  # once per call, shared by every layer
        r_q = rope(query_pos, d, theta, x.dtype, npos)
        r_all = (torch.cat([r_c[0], r_q[0]], 2), torch.cat([r_c[1], r_q[1]], 2))
        if cache is not None:  # (the bf16 path attends in float64: its keys are kept so, converted once)
            kv_dtype = torch.float64 if self.cpu_precision == "bf16" and x.device.type == "cpu" else x.dtype
            cache.reserve(len(self.blocks), x.new_empty(x.shape[0], self.config.num_heads, 0, d, dtype=kv_dtype),
                          content_rank, nc)
        last = len(self.blocks) - 1
        for i, blk in enumerate(self.blocks):
            if i < last:
                x = blk.lean_step(x, nc, r_all, r_c, bias, cache, i)
            else:
                x = blk.lean_step(x, nc, r_q, r_c, bias[:, nc:], cache, i, last=True)
        if cache is not None:
            cache.rank_buf[:, past : past + nc] = content_rank
            cache.n = past + nc
        h = self.norm(x)
        if not states:
            return self.output_head(h)
        return (self.output_head(h if head_rows is None else h[:, :head_rows]), h)

    def output_head(self, h: torch.Tensor) -> torch.Tensor:
        """Logits [B, L, V] of normed states h [B, L, d]: `self.head`, from its [in, out] copy
        on a CPU at inference (layers.cpu_transposed)."""
        wt = cpu_transposed(self, ((self.head.weight,),), self.cpu_precision)
        return self.head(h) if wt is None else _rows_mm(h, wt[0])

    def joint_loss(self, ids: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """Teacher-forced joint NLL: ids [B, L] (BOS at 0), masked [B, L] bool. Masked positions
        are decoded left to right after the visible set; one pass gives every factor."""
        b, l = ids.shape
        pos = torch.arange(l, device=ids.device).expand(b, l)
        rank = torch.where(masked, torch.cumsum(masked.long(), 1), torch.zeros_like(ids))
        limit = torch.where(masked, rank, torch.ones_like(rank))  # visible rows: unused, non-empty
        logits = self(ids, pos, rank, pos, limit)
        logits = logits.masked_fill(self.special_mask(), float("-inf"))
        # every row's NLL with the visible rows' targets ignored: no boolean indexing, so no host sync
        targets = ids.masked_fill(~masked, IGNORE)
        nll = nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                          reduction="sum")
        return nll / masked.sum().clamp(min=1)

    def training_loss(self, ids: torch.Tensor, progress: float, gen: torch.Generator) -> torch.Tensor:
        """Joint loss with a masking-rate schedule: rate ~ U(0.1, hi) per sequence, hi warming up
        from 0.15 to 1.0 over the first 10% of training (the ASSD paper's warm-up)."""
        b, l = ids.shape
        hi = 0.15 + (1.0 - 0.15) * min(1.0, progress / 0.1)
        dev = gen.device  # a generator on the GPU draws the masks there (no host work per step)
        rate = 0.1 + (hi - 0.1) * torch.rand(b, 1, generator=gen, device=dev)
        masked = torch.rand(b, l, generator=gen, device=dev) < rate
        masked[:, 0] = False  # BOS
        masked[torch.arange(b, device=dev), torch.randint(1, l, (b,), generator=gen, device=dev)] = True  # at least one
        return self.joint_loss(ids, masked.to(ids.device))

    def special_mask(self) -> torch.Tensor:
        """[V] bool, True at the special ids (their logits are set to -inf)."""
        return special_token_mask(self.config, self.head.weight.device)


class AsArmLite(AsArmMixin, nn.Module):
    """The AS-ARM without transformers: built from config.json, weights from model.safetensors."""

    def __init__(self, config: SimpleNamespace):
        nn.Module.__init__(self)
        self.config = config
        self._build(config)

    @property
    def device(self) -> torch.device:
        """Where the weights are (inputs are built there)."""
        return self.head.weight.device

    @classmethod
    def from_folder(cls, folder: Path, dtype: torch.dtype) -> AsArmLite:
        """Load a saved AS-ARM (config.json + model.safetensors) without importing transformers."""
        from safetensors.torch import load_file

        cfg = SimpleNamespace(**{**DEFAULTS, **json.loads((Path(folder) / "config.json").read_text())})
        model = cls(cfg).to(dtype)  # (a meta-device build would import torch._dynamo: seconds)
        state = load_file(str(Path(folder) / "model.safetensors"))
        model.load_state_dict(state, strict=True)  # copies, casting to the model's dtype
        return model.eval()
