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
from transformers import AutoConfig, AutoModel, PreTrainedModel

from .asarm_core import AsArmMixin, KVCache  # noqa: F401  (KVCache: re-exported)
from .config import ModelConfig
from .layers import init_weights


class AsArmConfig(ModelConfig):
    """The AS-ARM's config.json (`model_type="asarm"`): the shared fields plus dropout."""

    model_type = "asarm"

    def __init__(self, *, dropout: float = 0.0, **kwargs):
        self.dropout = dropout
        super().__init__(**kwargs)

    @classmethod
    def for_training(cls, a, codec) -> AsArmConfig:
        """The config `python -m engine train --kind asarm` builds from its flags."""
        return cls(num_layers=a.layers, **cls.shared_for_training(a, codec))


class AsArmModel(AsArmMixin, PreTrainedModel):
    """The AS-ARM as a Hugging Face model: what training saves and the Auto classes load
    (inference of a bundled checkpoint goes through the lighter AsArmLite, same computation)."""

    config_class = AsArmConfig
    base_model_prefix = "asarm"

    def __init__(self, config: AsArmConfig):
        super().__init__(config)
        self._build(config)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        init_weights(module)
        if isinstance(module, AsArmModel):
            nn.init.normal_(module.query_embed, std=0.02)


AutoConfig.register("asarm", AsArmConfig)
AutoModel.register(AsArmConfig, AsArmModel)
