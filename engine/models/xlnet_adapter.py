"""Hugging Face XLNet as an AS-ARM density oracle, fed as the ASSD paper's authors feed it.

XLNet is the same two-stream family: `perm_mask[b, i, j] = 1` forbids i to attend to j and
`target_mapping` picks the query rows (without it XLNet reads the content stream and leaks the
token). The window is fed as it is, with no `<s>` (the authors encode with
add_special_tokens=False); only a window with nothing visible, which the authors never run, gets
one `<s>` before it so the first query has a key to attend to (Hugging Face's -1e30 mask would
otherwise spread it over every position, its own token included).

Uncached, each call is one Hugging Face forward over the whole window, and one position has one
content row and one query row sharing a mask row, so a query at a drafted position must see exactly
the ranks before it: pipelined ASSD is refused there. Cached (engine/models/xlnet_cache.py), a call
computes only its new content rows and its query rows, each query with its own limit, so every
sampler runs, pipelined ASSD included.
"""

from __future__ import annotations

import time

import torch

from engine.inputs.masking import MaskedInput, oracle_rows
from engine.inputs.tokenization import Codec
from engine.loading.device import host64

from ..errors import IncompatibleModelsError
from .xlnet_cache import XLNetKV


def banned_ids(codec: Codec, vocab: int, exclude_special: bool) -> torch.Tensor:
    """[V] bool, the ids no fill may take: every special token of the tokenizer (the studio's rule,
    on by default) or, with it off, `<mask>` only (the ASSD authors' rule). Tokens the code mapping
    spells whitespace with are never special."""
    ban = torch.zeros(vocab, dtype=torch.bool)
    ids = codec.special_ids if exclude_special else [codec.mask_id]
    ban[[i for i in ids if i is not None and i < vocab]] = True
    return ban


class XLNetOracle:
    """A pretrained XLNet seen as the density oracle ASSD needs: its permutation attention gives
    any-subset conditionals, so the AS-ARM samplers run on it unchanged; `use_cache` keeps the
    content K/V of decided tokens (engine/models/xlnet_cache.py)."""

    def __init__(self, model, mi: MaskedInput, codec: Codec, use_cache: bool = False,
                 exclude_special: bool = True):
        self.model, self.mi, self.codec = model, mi, codec
        self.calls = 0
        self.shapes: list[tuple[int, int]] = []  # (content rows computed, query rows) per call
        self.seconds = 0.0  # wall seconds inside the network (bench assd's AS-ARM share of a round)
        self.offset = 0 if mi.visible else 1  # only a window with nothing visible gets a <s>
        if self.offset and codec.bos_id is None:
            raise IncompatibleModelsError("This XLNet tokenizer has no <s> token: leave at least one token visible.")
        self.committed: list[tuple[int, int]] = []
        self.banned = banned_ids(codec, model.config.vocab_size, exclude_special)
        self.prompt = ([(-1, codec.bos_id)] if self.offset else []) + [(i, mi.tokens[i]) for i in mi.visible]
        self.cache = XLNetKV(model, len(self.prompt) + len(mi.masked), len(mi.tokens) + 1) if use_cache else None
        self.valid = 0  # decided tokens whose rows are kept
        self.tentative: list[tuple[int, int]] = []  # the latest call's drafts, after the kept rows

    def commit(self, pos: int, tok: int) -> None:
        """Record a decided token (the next call sees it); a cached draft decided as drafted keeps its rows."""
        self.committed.append((pos, tok))
        if self.cache is None:
            return
        if self.tentative and self.tentative[0] == (pos, tok) and self.valid == len(self.committed) - 1:
            self.tentative.pop(0)
            self.cache.keep_next()
            self.valid += 1
        else:
            self.tentative = []

    def call(self, drafts: list[tuple[int, int]], queries: list[tuple[int, int]],
             states: bool = False, logit_rows: int | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits (float64, banned ids and the input's constraints at -inf) of the query rows given
        the decided tokens and the drafts before each query (see DensityOracle.call); `states` and
        `logit_rows` with the cache only (the query states are the output head's input)."""
        self.calls += 1
        t0 = time.perf_counter()
        try:
            if self.cache is None:
                return self._full(drafts, queries, states)
            return self._cached(drafts, queries, states, logit_rows)
        finally:
            self.seconds += time.perf_counter() - t0

    @torch.inference_mode()
    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Logits, as `call` returns them, of query rows whose states a call returned without logits."""
        t0 = time.perf_counter()
        try:
            return self._finish(self.model.lm_loss(states), positions)
        finally:
            self.seconds += time.perf_counter() - t0

    def _finish(self, logits: torch.Tensor, positions: list[int]) -> torch.Tensor:
        return oracle_rows(self.mi, host64(logits), self.banned, positions)

    def _cached(self, drafts, queries, states, logit_rows):
        n = len(self.committed)
        new = self.prompt if self.cache.kept == 0 else []
        ranks = [0] * len(new)
        fresh = self.committed[self.valid:]
        new = new + fresh + list(drafts)
        ranks += [self.valid + 1 + r for r in range(len(fresh))] + [n + 1 + j for j in range(len(drafts))]
        self.shapes.append((len(new), len(queries)))
        g = self.cache.forward([t for _, t in new], [p for p, _ in new], ranks, len(new) - len(drafts),
                               [p for p, _ in queries], [n + 1 + e for _, e in queries])
        self.valid, self.tentative = n, list(drafts)
        rows = len(queries) if logit_rows is None or not states else logit_rows
        with torch.inference_mode():
            logits = self._finish(self.model.lm_loss(g[:rows]), [p for p, _ in queries[:rows]])
        return (logits, g) if states else logits

    @torch.inference_mode()
    def _full(self, drafts, queries, states):
        """One Hugging Face forward over the whole window (what the authors' sampler computes)."""
        size = len(self.mi.tokens) + self.offset
        self.shapes.append((size, len(queries)))
        inf = 1 << 30
        ids = [self.codec.mask_id] * size
        rank = [inf] * size
        for p, t in self.prompt:
            ids[p + self.offset], rank[p + self.offset] = t, 0
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
                    "Uncached, XLNet answers one question per position per call: use pipelined ASSD with "
                    "the cache (it is a cached sampler), or sequential / ASSD."
                )
            seen.add(at)
            limits[at] = lim
        if states:  # after the check above: pipelined samplers get its more specific message
            raise IncompatibleModelsError("This sampler reads the query states, which the uncached XLNet "
                                          "forward does not offer: use its cached form.")
        r = torch.tensor(rank)
        lim_t = torch.tensor(limits)
        # 1 = may NOT attend; prompt rows (rank 0) see each other
        perm = ~((r[None, :] < lim_t[:, None]) | ((r[None, :] == 0) & (lim_t[:, None] == 0)))
        dtype = next(self.model.parameters()).dtype
        tmap = torch.zeros(1, len(queries), size, dtype=dtype)
        for k, (p, _) in enumerate(queries):
            tmap[0, k, p + self.offset] = 1.0
        dev = self.model.device  # built on the CPU (small), moved once
        out = self.model(
            input_ids=torch.tensor([ids], device=dev), perm_mask=perm[None].to(dev, dtype),
            target_mapping=tmap.to(dev), use_mems=False,
        ).logits[0]
        return self._finish(out, [p for p, _ in queries])
