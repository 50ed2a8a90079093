"""The judge: a small left-to-right language model, trained separately, used only to score what
the samplers produce (judge NLL). It is an AS-ARM whose visible set is always just BOS, which
makes it an ordinary causal LM with the same code path and tokenizer."""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModel

from .asarm import AsArmConfig, AsArmModel


class JudgeConfig(AsArmConfig):
    """The judge's config.json (`model_type="judge"`): an AS-ARM config under its own name."""

    model_type = "judge"

    def __init__(self, **kwargs):  # transformers 5 does not run an inherited config __init__
        super().__init__(**kwargs)


class JudgeModel(AsArmModel):
    """A left-to-right language model that scores completed texts (judge NLL in the report and
    benchmarks); it never fills masks."""

    config_class = JudgeConfig

    def training_loss(self, ids: torch.Tensor, progress: float, gen: torch.Generator) -> torch.Tensor:
        """Everything after BOS is masked and decoded left to right: an ordinary causal LM loss."""
        masked = torch.ones_like(ids, dtype=torch.bool)
        masked[:, 0] = False
        return self.joint_loss(ids, masked)

    @torch.no_grad()
    def token_nll(self, tokens: list[int]) -> float:
        """Mean negative log-likelihood per token of a whole sequence, left to right after BOS."""
        ids = torch.tensor([[self.config.bos_token_id] + list(tokens)], device=self.device)
        masked = torch.ones_like(ids, dtype=torch.bool)
        masked[:, 0] = False
        return float(self.joint_loss(ids, masked))


AutoConfig.register("judge", JudgeConfig)
AutoModel.register(JudgeConfig, JudgeModel)
