"""A frozen pretrained Hugging Face masked LM as the hybrid's non-causal stack (docs/DESIGN.md §2.2).

The self-speculative paper trains only the causal block on top of a frozen ESM for proteins; this
adapter does the same for any BERT / RoBERTa / ESM style `*ForMaskedLM`: the hybrid reads the
backbone's last hidden states (its "nc hidden") and its own MLM head turns hidden states into
logits, both for the draft head and, after the output residual, for the causal head.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PreTrainedModel

SUPPORTED = ("bert", "roberta", "esm", "xlm-roberta", "distilbert", "camembert")


def _head(mlm: PreTrainedModel) -> nn.Module:
    for name in ("cls", "lm_head", "vocab_projector"):
        if hasattr(mlm, name):
            return getattr(mlm, name)
    raise ValueError(f"cannot find the MLM head of {type(mlm).__name__}")


class MaskedLMBackbone(nn.Module):
    """A frozen Hugging Face masked LM wrapped as the hybrid's non-causal stack: hidden states in,
    its own MLM head for logits."""

    def __init__(self, mlm: PreTrainedModel):
        super().__init__()
        mt = mlm.config.model_type
        if mt not in SUPPORTED:
            raise ValueError(f"backbone model_type {mt!r} is not a supported masked LM ({', '.join(SUPPORTED)})")
        self.mlm = mlm
        self.dim = mlm.config.hidden_size
        self.freeze()

    @classmethod
    def load(cls, path_or_model) -> MaskedLMBackbone:
        """Wrap a loaded masked LM, or load one from a folder or Hub id."""
        mlm = path_or_model if isinstance(path_or_model, PreTrainedModel) else \
            AutoModelForMaskedLM.from_pretrained(str(path_or_model))
        return cls(mlm)

    @classmethod
    def from_config_dict(cls, d: dict) -> MaskedLMBackbone:
        """An untrained backbone of the saved config (a hybrid's weights are then loaded over it)."""
        d = dict(d)
        # untied: the (frozen) decoder is stored as its own tensor, so saving and loading a hybrid
        # never depends on the backbone class's tying rules
        d["tie_word_embeddings"] = False
        cfg = AutoConfig.for_model(d.pop("model_type"), **d)
        return cls(AutoModelForMaskedLM.from_config(cfg))

    def freeze(self) -> None:
        """No gradients, dropout off, and a flag that keeps the hybrid's initialisation off its weights."""
        for prm in self.mlm.parameters():
            prm.requires_grad_(False)
        for m in self.mlm.modules():
            m._frozen_backbone = True
        self.mlm.eval()

    def train(self, mode: bool = True):  # the backbone never trains (dropout stays off)
        """Stay in eval mode whatever the caller asks: the backbone never trains (dropout stays off)."""
        return super().train(False)

    @property
    def max_positions(self) -> int:
        """Tokens the backbone takes, BOS included (RoBERTa-style positions start after the pad index)."""
        cfg = self.mlm.config
        n = getattr(cfg, "max_position_embeddings", 512)
        if cfg.model_type in ("roberta", "xlm-roberta", "camembert"):
            n -= (cfg.pad_token_id or 0) + 1  # RoBERTa positions start after the padding index
        return n

    @property
    def bos_id(self) -> int:
        """The id the hybrid puts at position 0 (BOS, else CLS)."""
        cfg = self.mlm.config
        for name in ("bos_token_id", "cls_token_id"):
            v = getattr(cfg, name, None)
            if v is not None:
                return int(v)
        return 0

    @property
    def mask_id(self) -> int:
        """The backbone's mask id (masked positions of the input hold it)."""
        v = getattr(self.mlm.config, "mask_token_id", None)
        return int(v) if v is not None else self.mlm.config.vocab_size - 1

    @property
    def special_ids(self) -> list[int]:
        """The backbone's special ids, which the hybrid never samples."""
        cfg = self.mlm.config
        ids = {getattr(cfg, n, None) for n in ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id",
                                                "mask_token_id", "sep_token_id")}
        return sorted(int(i) for i in ids if i is not None)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, L] -> last hidden states [B, L, E] (the hybrid's nc hidden)."""
        out = self.mlm.base_model(input_ids=ids, attention_mask=torch.ones_like(ids))
        return out.last_hidden_state

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Hidden states -> logits through the backbone's MLM head."""
        return _head(self.mlm)(h)
