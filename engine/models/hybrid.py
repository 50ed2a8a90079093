"""Self-speculative masked diffusion model (docs/DESIGN.md §2.2): non-causal blocks, then causal block(s)
over the sequence permuted into the generation order sigma.

Layout of one sequence: model position 0 is BOS, token i sits at model position i + 1. Masked
positions hold the mask id at the input of the non-causal stack (full attention).

Two heads, one pass:
- non-causal (draft) head: `noncausal(ids) -> (hidden, logits)`, factorized over positions;
- causal (target) head: `causal(hidden, order, tokens)`. `order` [B, n] lists model positions in
  generation order (the *chain*: the unrevealed positions, first one first) and `tokens` [B, n]
  the tokens along it. Row r of the causal track stands at order[r] and predicts order[r + 1]; its
  input is a projection of [nc hidden at order[r], nc hidden at order[r + 1], embedding of
  tokens[r]] plus learned position embeddings of both order[r] and order[r + 1] (double
  positional encoding; rotary attention uses order[r]). The nc hidden state of order[r + 1] is
  added to the causal output before the logits (output residual). Returns logits [B, n - 1, V]
  for order[1:]; the first position of a chain has no causal row: its causal distribution *is*
  the non-causal one.

The chain only holds unrevealed positions: everything revealed is already seen by the non-causal
stack, whose states the causal rows read. So training's sigma "prompt first, then the masked
positions in a uniformly random order" is exactly a chain of the masked positions in random order.

The non-causal stack is either our own blocks or a frozen pretrained HF masked LM
(engine/models/backbone.py); `HybridConfig.backbone_config` selects the latter.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedModel

from .config import ModelConfig
from .layers import Block, init_weights, special_token_mask


class HybridConfig(ModelConfig):
    """The hybrid's config.json (`model_type="hybrid"`): the shared fields, dropout, the causal
    depth and, for a frozen pretrained non-causal stack, that backbone's own config."""

    model_type = "hybrid"

    def __init__(
        self,
        *,
        num_layers: int = 3,  # non-causal blocks (ignored with a backbone: its depth counts)
        causal_layers: int = 1,
        dropout: float = 0.0,
        backbone_config: dict | None = None,  # HF masked-LM config (to_dict()) for a frozen backbone
        **kwargs,
    ):
        self.causal_layers = causal_layers
        self.dropout = dropout
        self.backbone_config = backbone_config
        super().__init__(num_layers=num_layers, **kwargs)

    @classmethod
    def for_training(cls, a, codec) -> HybridConfig:
        """`--layers` is the total depth: layers - causal_layers non-causal blocks + causal_layers."""
        causal = getattr(a, "causal_layers", 1)
        if a.layers <= causal:
            raise ValueError("--layers counts every block and must exceed --causal-layers")
        return cls(num_layers=a.layers - causal, causal_layers=causal, **cls.shared_for_training(a, codec))

    @property
    def nc_blocks(self) -> int:
        """Blocks of the non-causal stack (the backbone's depth when there is one)."""
        if self.backbone_config:
            return int(self.backbone_config.get("num_hidden_layers", self.num_layers))
        return self.num_layers

    @property
    def nc_share(self) -> float:
        """Fraction of a full pass that the non-causal stack costs (its blocks / all blocks)."""
        return self.nc_blocks / (self.nc_blocks + self.causal_layers)

    @property
    def causal_share(self) -> float:
        """Fraction of a full pass that the causal block(s) cost."""
        return self.causal_layers / (self.nc_blocks + self.causal_layers)


class NativeNonCausal(nn.Module):
    """Our own masked-diffusion stack: embedding, full-attention rotary blocks, norm + head."""

    def __init__(self, config: HybridConfig):
        super().__init__()
        d = config.hidden_size
        self.dim = d
        self.embed = nn.Embedding(config.vocab_size, d)
        self.blocks = nn.ModuleList(
            Block(d=d, heads=config.num_heads, ffn=config.intermediate_size, theta=config.rope_theta, dropout=config.dropout)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, L] -> hidden states [B, L, D] under full attention."""
        b, l = ids.shape
        pos = torch.arange(l, device=ids.device).expand(b, l)
        full = torch.ones(b, l, l, dtype=torch.bool, device=ids.device)
        h = self.embed(ids)
        r = self.blocks[0].rope(pos, h) if len(self.blocks) else None  # once for every layer
        for blk in self.blocks:
            q, k, v = blk.qkv(h, r)  # ln1 once per row
            h = blk.attend(h, r, k, v, full, q=q)
        return h

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Hidden states -> logits (the draft head, and the causal head after its output residual)."""
        return self.head(self.norm(h))


class HybridModel(PreTrainedModel):
    """The self-speculative hybrid: one network whose non-causal head drafts and whose causal
    head verifies (docs/DESIGN.md §2.2), used by `mdm`, `self-spec` and as `assd-diffusion`'s drafter."""

    config_class = HybridConfig
    base_model_prefix = "hybrid"

    def __init__(self, config: HybridConfig):
        super().__init__(config)
        if config.backbone_config:
            from .backbone import MaskedLMBackbone

            self.nc = MaskedLMBackbone.from_config_dict(config.backbone_config)
        else:
            self.nc = NativeNonCausal(config)
        d, e = config.hidden_size, self.nc.dim
        self.tok_embed = nn.Embedding(config.vocab_size, d)
        self.in_norm = nn.LayerNorm(e)
        self.in_proj = nn.Linear(2 * e + d, d)
        self.pos_cur = nn.Embedding(config.max_positions, d)
        self.pos_next = nn.Embedding(config.max_positions, d)
        self.causal_blocks = nn.ModuleList(
            Block(d=d, heads=config.num_heads, ffn=config.intermediate_size, theta=config.rope_theta, dropout=config.dropout)
            for _ in range(config.causal_layers)
        )
        self.out_norm = nn.LayerNorm(d)
        self.out_proj = nn.Linear(d, e, bias=False)
        self.post_init()
        nn.init.zeros_(self.out_proj.weight)  # at initialisation the causal head is the nc head

    def _init_weights(self, module: nn.Module) -> None:
        if not getattr(module, "_frozen_backbone", False):
            init_weights(module)

    @classmethod
    def from_backbone(cls, path_or_model, causal_layers: int = 1, hidden_size: int | None = None,
                      num_heads: int = 4, intermediate_size: int | None = None, domain: str = "protein",
                      special_token_ids: list[int] | None = None, bos_token_id: int | None = None,
                      mask_token_id: int | None = None, pad_token_id: int | None = None) -> HybridModel:
        """A hybrid whose non-causal stack is a frozen pretrained HF masked LM (BERT/RoBERTa/ESM
        families); only the causal block(s) and projections are trainable."""
        from .backbone import MaskedLMBackbone

        bb = MaskedLMBackbone.load(path_or_model)
        bc = bb.mlm.config
        d = hidden_size or bc.hidden_size
        cfg = HybridConfig(
            vocab_size=bc.vocab_size, hidden_size=d, num_layers=bc.num_hidden_layers, causal_layers=causal_layers,
            num_heads=num_heads, intermediate_size=intermediate_size or 4 * d,
            max_positions=bb.max_positions, domain=domain,
            pad_token_id=bc.pad_token_id if pad_token_id is None else pad_token_id,
            bos_token_id=bb.bos_id if bos_token_id is None else bos_token_id,
            mask_token_id=bb.mask_id if mask_token_id is None else mask_token_id,
            special_token_ids=special_token_ids if special_token_ids is not None else bb.special_ids,
            backbone_config=bc.to_dict(),
        )
        model = cls(cfg)
        model.nc.mlm.load_state_dict(bb.mlm.state_dict())
        model.nc.freeze()
        return model

    # ------------------------------------------------------------------ the two heads
    def noncausal(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] (BOS at 0, mask id where masked) -> nc hidden [B, L, E], logits [B, L, V]."""
        h = self.nc(ids)
        return h, self.nc.logits(h)

    def causal(self, hidden: torch.Tensor, order: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Causal-track logits [B, n - 1, V]: row r predicts the token at model position order[:, r + 1]
        given the nc states and tokens[:, :r + 1] along the chain."""
        b, n = order.shape
        if n < 2:
            return hidden.new_zeros(b, 0, self.config.vocab_size)
        cur, nxt = order[:, :-1], order[:, 1:]
        hn = self.in_norm(hidden)
        gather = lambda t, idx: torch.gather(t, 1, idx[..., None].expand(-1, -1, t.shape[-1]))  # noqa: E731
        x = torch.cat([gather(hn, cur), gather(hn, nxt), self.tok_embed(tokens[:, :-1])], -1)
        z = self.in_proj(x) + self.pos_cur(cur) + self.pos_next(nxt)
        m = n - 1
        mask = torch.ones(m, m, dtype=torch.bool, device=order.device).tril().expand(b, m, m)
        r = self.causal_blocks[0].rope(cur, z) if len(self.causal_blocks) else None
        for blk in self.causal_blocks:
            q, k, v = blk.qkv(z, r)
            z = blk.attend(z, r, k, v, mask, q=q)
        out = gather(hidden, nxt) + self.out_proj(self.out_norm(z))  # output residual
        return self.nc.logits(out)

    def special_mask(self) -> torch.Tensor:
        """[V] bool, True at the special ids (their logits are set to -inf)."""
        return special_token_mask(self.config, self.tok_embed.weight.device)

    # ------------------------------------------------------------------ training
    def hybrid_loss(self, ids: torch.Tensor, n_masked: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """ids [B, L] (BOS at 0, true tokens). For sequence b, the n_masked[b] token positions with
        the smallest `scores` are masked and form sigma in increasing score order (so a uniform
        random `scores` gives a uniform random masked set and a uniform random order).
        Returns mean over the batch of (nc CE + causal CE) summed over the masked positions and
        weighted by D / (D - i) / D = 1 / (number masked)."""
        b, l = ids.shape
        dev = ids.device
        perm = torch.argsort(scores, dim=1) + 1  # [B, D] model positions in sigma order
        rank = torch.arange(l - 1, device=dev).expand(b, -1)
        in_chain = rank < n_masked[:, None]  # [B, D] along sigma
        masked = torch.zeros(b, l, dtype=torch.bool, device=dev)
        masked.scatter_(1, perm, in_chain)
        x = ids.masked_fill(masked, self.config.mask_token_id)
        h, nc_logits = self.noncausal(x)
        special = self.special_mask()
        nc_logits = nc_logits.masked_fill(special, float("-inf"))
        ce = nn.functional.cross_entropy
        nc_nll = ce(nc_logits.reshape(-1, nc_logits.shape[-1]).float(), ids.reshape(-1), reduction="none")
        nc_nll = torch.where(masked, nc_nll.view(b, l), 0.0).sum(1)
        chain_tokens = torch.gather(ids, 1, perm)
        c_logits = self.causal(h, perm, chain_tokens).masked_fill(special, float("-inf"))
        c_nll = ce(c_logits.reshape(-1, c_logits.shape[-1]).float(), chain_tokens[:, 1:].reshape(-1),
                   reduction="none").view(b, -1)
        c_nll = torch.where(in_chain[:, 1:], c_nll, 0.0).sum(1)
        # the first position of the chain: causal distribution = nc distribution
        first_nll = ce(torch.gather(nc_logits, 1, perm[:, :1, None].expand(-1, -1, nc_logits.shape[-1]))[:, 0].float(),
                       chain_tokens[:, 0], reduction="none")
        total = nc_nll + c_nll + first_nll
        return (total / n_masked.clamp(min=1)).mean()

    def training_loss(self, ids: torch.Tensor, progress: float, gen: torch.Generator) -> torch.Tensor:
        """Number masked from the cosine schedule (fraction cos(pi/2 u), u ~ U(0, 1)), masked set
        and sigma uniform."""
        b, l = ids.shape
        d = l - 1
        u = torch.rand(b, generator=gen, device=gen.device)  # drawn where the generator lives (GPU: no copy)
        n_masked = torch.ceil(d * torch.cos(0.5 * math.pi * u)).long().clamp(1, d)
        scores = torch.rand(b, d, generator=gen, device=gen.device)
        return self.hybrid_loss(ids, n_masked.to(ids.device), scores.to(ids.device))

    def train(self, mode: bool = True):
        """Train mode for the trainable parts only: a frozen backbone keeps dropout off."""
        super().train(mode)
        if self.config.backbone_config:
            self.nc.eval()  # a frozen backbone keeps dropout off
        return self


AutoConfig.register("hybrid", HybridConfig)
AutoModel.register(HybridConfig, HybridModel)
