"""Hugging Face XLNet as an AS-ARM density oracle (no cache).

XLNet is the same two-stream family: `perm_mask[b, i, j] = 1` forbids i to attend to j and
`target_mapping` picks the query rows (without it XLNet reads the content stream and leaks the
token). One position has one content row and one query row sharing a mask row, so a query at a
drafted position must see exactly the ranks before it; pipelined ASSD, which asks several
questions of one position in a call, is therefore refused with a clear message.
"""

from __future__ import annotations

import torch

from engine.inputs.masking import MaskedInput
from engine.inputs.tokenization import Codec
from engine.loading.device import host64

from ..errors import IncompatibleModelsError


class XLNetOracle:
    """A pretrained XLNet seen as the density oracle ASSD needs: its permutation attention gives
    any-subset conditionals, so the AS-ARM samplers run on it unchanged (no cache)."""

    def __init__(self, model, mi: MaskedInput, codec: Codec):
        self.model, self.mi, self.codec = model, mi, codec
        self.calls = 0
        self.offset = 1 if codec.bos_id is not None else 0  # a BOS gives every query a key
        self.committed: list[tuple[int, int]] = []
        vocab = model.config.vocab_size
        self.special = torch.zeros(vocab, dtype=torch.bool)
        self.special[[i for i in codec.special_ids if i < vocab]] = True
        if not mi.visible and not self.offset:
            raise IncompatibleModelsError("This XLNet tokenizer has no BOS token: leave at least one token visible.")

    def commit(self, pos: int, tok: int) -> None:
        """Record a decided token (the next call sees it)."""
        self.committed.append((pos, tok))

    @torch.no_grad()
    def call(self, drafts: list[tuple[int, int]], queries: list[tuple[int, int]],
             states: bool = False, logit_rows: int | None = None) -> torch.Tensor:
        """One XLNet pass: logits of the query rows given the decided tokens and the drafts before each
        query (see DensityOracle.call; it offers no states, so no `logit_rows` either)."""
        self.calls += 1
        size = len(self.mi.tokens) + self.offset
        inf = 1 << 30
        ids = [self.codec.mask_id] * size
        rank = [inf] * size
        if self.offset:
            ids[0], rank[0] = self.codec.bos_id, 0
        for i in self.mi.visible:
            ids[i + self.offset], rank[i + self.offset] = self.mi.tokens[i], 0
        n = len(self.committed)
        for r, (p, t) in enumerate(self.committed):
            ids[p + self.offset], rank[p + self.offset] = t, r + 1
        for j, (p, t) in enumerate(drafts):
            ids[p + self.offset], rank[p + self.offset] = t, n + 1 + j
        limits = list(rank)  # a content row sees ranks < its own (and itself)
        seen = set()
        for p, e in queries:
            at, lim = p + self.offset, n + 1 + e
            if at in seen or (rank[at] != inf and rank[at] != lim):
                raise IncompatibleModelsError(
                    "XLNet checkpoints answer one question per position per call: use sequential or ASSD "
                    "(not pipelined ASSD) with them."
                )
            seen.add(at)
            limits[at] = lim
        if states:  # after the check above: pipelined samplers get its more specific message
            raise IncompatibleModelsError("This sampler reads the AS-ARM's query states; an XLNet adapter "
                                          "does not offer them: use a native AS-ARM.")
        r = torch.tensor(rank)
        lim_t = torch.tensor(limits)
        # 1 = may NOT attend; prompt rows (rank 0) see each other
        perm = ~((r[None, :] < lim_t[:, None]) | ((r[None, :] == 0) & (lim_t[:, None] == 0)))
        dtype = next(self.model.parameters()).dtype
        tmap = torch.zeros(1, len(queries), size, dtype=dtype)
        for k, (p, _) in enumerate(queries):
            tmap[0, k, p + self.offset] = 1.0
        dev = self.model.device  # built on the CPU (small), moved once
        out = host64(self.model(
            input_ids=torch.tensor([ids], device=dev), perm_mask=perm[None].to(dev, dtype),
            target_mapping=tmap.to(dev), use_mems=False,
        ).logits[0])
        return out.masked_fill(self.special, float("-inf"))
