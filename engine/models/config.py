"""`ModelConfig`: the fields every model of ours shares (vocabulary, width, depth, heads, context,
rotary base, the special token ids, the domain), so that the AS-ARM, the hybrid and the PTP head
declare only what is theirs. config.json keys are unchanged: the fields are the same attributes.
"""

from __future__ import annotations

from transformers import PretrainedConfig


class ModelConfig(PretrainedConfig):
    """Shared fields with the AS-ARM's defaults; a subclass passes its own defaults through.

    transformers 5 runs only a config class's own __init__, so every subclass defines one that
    calls super().__init__ (see JudgeConfig)."""

    def __init__(
        self,
        *,
        vocab_size: int = 260,
        hidden_size: int = 256,
        num_layers: int = 4,
        num_heads: int = 4,
        intermediate_size: int = 1024,
        max_positions: int = 513,  # positions including BOS
        rope_theta: float = 10000.0,
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
        self.max_positions = max_positions
        self.rope_theta = rope_theta
        self.mask_token_id = mask_token_id
        self.special_token_ids = special_token_ids if special_token_ids is not None else [0, 1, 2, 3]
        self.domain = domain
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, **kwargs)

    @classmethod
    def shared_for_training(cls, a, codec) -> dict:
        """The shared fields as `python -m engine train` sets them from its flags and the codec."""
        return dict(vocab_size=codec.vocab_size, hidden_size=a.hidden, num_heads=a.heads, intermediate_size=a.ffn,
                    max_positions=a.seq_len + 1, bos_token_id=codec.bos_id, pad_token_id=codec.pad_id,
                    mask_token_id=codec.mask_id, special_token_ids=codec.special_ids, domain=a.domain)
