"""Any-subset autoregressive model (AS-ARM): an XLNet-style two-stream transformer with rotary
positions, written so that decided tokens can be cached.

Content rows carry token + position; query rows carry only a position. Every content row has a
*rank*: the prompt (BOS included) is rank 0 and mutually visible; decided tokens get ranks 1, 2, ...
in decode order. A content row attends to keys of rank <= its own (the prompt block, or itself and
earlier ranks); a query row with limit L attends to keys of rank < L. Because a decided token
never sees later ranks, its per-layer K/V never change, which is what makes the cache exact.
"""

from __future__ import annotations

from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel

from .asarm_core import AsArmMixin, KVCache  # noqa: F401  (KVCache: re-exported)


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


class AsArmModel(AsArmMixin, PreTrainedModel):
    config_class = AsArmConfig
    base_model_prefix = "asarm"

    def __init__(self, config: AsArmConfig):
        super().__init__(config)
        self._build(config)
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


AutoConfig.register("asarm", AsArmConfig)
AutoModel.register(AsArmConfig, AsArmModel)
