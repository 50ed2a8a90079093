"""Any-subset autoregressive model (AS-ARM): an XLNet-style two-stream transformer with rotary
positions, written so that decided tokens can be cached.

Content rows carry token + position; query rows carry only a position. Every content row has a
*rank*: the prompt (BOS included) is rank 0 and mutually visible; decided tokens get ranks 1, 2, ...
in decode order. A content row attends to keys of rank <= its own (the prompt block, or itself and
earlier ranks); a query row with limit L attends to keys of rank < L. Because a decided token
never sees later ranks, its per-layer K/V never change, which is what makes the cache exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel

from .layers import Block


class AsArmConfig(PretrainedConfig):
    model_type = "asarm"

    def __init__(
        self,
        vocab_size: int = 260,
        hidden_size: int = 256,
        num_layers: int = 4,
        num_heads: int = 4,
        intermediate_size: int = 1024,
        max_positions: int = 513,
        rope_theta: float = 10000.0,
        dropout: float = 0.0,
        pad_token_id: int = 0,
        bos_token_id: int = 1,
        mask_token_id: int = 2,
        special_token_ids: list[int] | None = None,
        domain: str = "text",
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.max_positions = max_positions  # positions including BOS
        self.rope_theta = rope_theta
        self.dropout = dropout
        self.mask_token_id = mask_token_id
        self.special_token_ids = special_token_ids if special_token_ids is not None else [0, 1, 2, 3]
        self.domain = domain
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, **kwargs)

    @classmethod
    def for_training(cls, a, codec) -> AsArmConfig:
        return cls(
            vocab_size=codec.vocab_size, hidden_size=a.hidden, num_layers=a.layers, num_heads=a.heads,
            intermediate_size=a.ffn, max_positions=a.seq_len + 1, bos_token_id=codec.bos_id,
            pad_token_id=codec.pad_id, mask_token_id=codec.mask_id, special_token_ids=codec.special_ids,
            domain=a.domain,
        )


@dataclass
class KVCache:
    """Per-layer K/V of content rows, in rank order, with their ranks. Truncate to roll back."""

    k: list[torch.Tensor] = field(default_factory=list)
    v: list[torch.Tensor] = field(default_factory=list)
    ranks: torch.Tensor | None = None  # [B, n]

    def __len__(self) -> int:
        return 0 if self.ranks is None else self.ranks.shape[1]

    def truncate(self, n: int) -> None:
        if self.ranks is None or n >= len(self):
            return
        self.k = [t[:, :, :n] for t in self.k]
        self.v = [t[:, :, :n] for t in self.v]
        self.ranks = self.ranks[:, :n]


class AsArmModel(PreTrainedModel):
    config_class = AsArmConfig
    base_model_prefix = "asarm"

    def __init__(self, config: AsArmConfig):
        super().__init__(config)
        d = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, d)
        self.query_embed = nn.Parameter(torch.zeros(d))
        self.blocks = nn.ModuleList(
            Block(d, config.num_heads, config.intermediate_size, config.rope_theta, config.dropout)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, AsArmModel):
            nn.init.normal_(module.query_embed, std=0.02)

    def forward(
        self,
        content_ids: torch.Tensor,  # [B, Lc] tokens of new content rows
        content_pos: torch.Tensor,  # [B, Lc] model positions (BOS = 0)
        content_rank: torch.Tensor,  # [B, Lc]
        query_pos: torch.Tensor,  # [B, Lq]
        query_limit: torch.Tensor,  # [B, Lq] attend to keys of rank < limit
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Logits [B, Lq, V] for the query rows. If `cache` is given, the new content rows' K/V
        are appended to it (the caller truncates it to roll back rejected drafts)."""
        past = len(cache) if cache is not None else 0
        key_rank = content_rank if not past else torch.cat([cache.ranks, content_rank], 1)
        mask_c = key_rank[:, None, :] <= content_rank[:, :, None]
        mask_q = key_rank[:, None, :] < query_limit[:, :, None]
        h = self.embed(content_ids)
        g = self.query_embed.expand(query_pos.shape[0], query_pos.shape[1], -1)
        new_k, new_v = [], []
        for i, blk in enumerate(self.blocks):
            k, v = blk.keys(h, content_pos)
            new_k.append(k)
            new_v.append(v)
            if past:
                k = torch.cat([cache.k[i], k], 2)
                v = torch.cat([cache.v[i], v], 2)
            if i < len(self.blocks) - 1:  # the last layer's content rows feed nothing
                h = blk.attend(h, content_pos, k, v, mask_c)
            g = blk.attend(g, query_pos, k, v, mask_q)
        if cache is not None:
            if past:
                cache.k = [torch.cat([a, b], 2) for a, b in zip(cache.k, new_k)]
                cache.v = [torch.cat([a, b], 2) for a, b in zip(cache.v, new_v)]
            else:
                cache.k, cache.v = new_k, new_v
            cache.ranks = key_rank
        logits = self.head(self.norm(g))
        return logits

    def joint_loss(self, ids: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """Teacher-forced joint NLL: ids [B, L] (BOS at 0), masked [B, L] bool. Masked positions
        are decoded left to right after the visible set; one pass gives every factor."""
        b, l = ids.shape
        pos = torch.arange(l, device=ids.device).expand(b, l)
        rank = torch.where(masked, torch.cumsum(masked.long(), 1), torch.zeros_like(ids))
        limit = torch.where(masked, rank, torch.ones_like(rank))  # visible rows: unused, non-empty
        logits = self(ids, pos, rank, pos, limit)
        logits = logits.masked_fill(self.special_mask(), float("-inf"))
        nll = nn.functional.cross_entropy(logits[masked].float(), ids[masked], reduction="sum")
        return nll / masked.sum().clamp(min=1)

    def training_loss(self, ids: torch.Tensor, progress: float, gen: torch.Generator) -> torch.Tensor:
        """Joint loss with a masking-rate schedule: rate ~ U(0.1, hi) per sequence, hi warming up
        from 0.15 to 1.0 over the first 10% of training (the ASSD paper's warm-up)."""
        b, l = ids.shape
        hi = 0.15 + (1.0 - 0.15) * min(1.0, progress / 0.1)
        rate = 0.1 + (hi - 0.1) * torch.rand(b, 1, generator=gen)
        masked = torch.rand(b, l, generator=gen) < rate
        masked[:, 0] = False  # BOS
        masked[torch.arange(b), torch.randint(1, l, (b,), generator=gen)] = True  # at least one
        return self.joint_loss(ids, masked.to(ids.device))

    def special_mask(self) -> torch.Tensor:
        m = torch.zeros(self.config.vocab_size, dtype=torch.bool, device=self.head.weight.device)
        m[self.config.special_token_ids] = True
        return m


AutoConfig.register("asarm", AsArmConfig)
AutoModel.register(AsArmConfig, AsArmModel)
