"""The AS-ARM as a sampler sees it: a density oracle over a growing set of decided tokens.

`call(drafts, queries)` is one network call. Drafts are tentative content rows appended after the
decided tokens; a query (position, e) asks for the distribution at `position` given the prompt,
every decided token and the first `e` drafts. `commit` decides a token (in decode order).

With `use_cache=True` the K/V of decided tokens are kept; drafts that get committed keep theirs,
the first rejected draft rolls the cache back. Without it, every call recomputes everything (the
reference ASSD's behaviour). Samplers never know which: same calls, same numbers.
"""

from __future__ import annotations

import time

import torch

from engine.inputs.masking import MaskedInput, oracle_rows
from engine.loading.device import host64
from engine.models.asarm_core import AsArmMixin, KVCache


class AsArmOracle:
    """The AS-ARM as a density oracle (docs/DESIGN.md §2.1): samplers say which drafts to place and
    which positions to query; it builds ranks, runs the model and keeps the KV cache exact."""

    def __init__(self, model: AsArmMixin, mi: MaskedInput, use_cache: bool = False):
        self.model = model
        self.mi = mi
        self.use_cache = use_cache
        self.calls = 0
        self.shapes: list[tuple[int, int]] = []  # (content rows computed, query rows) per call: bench assd's cost model
        # wall seconds inside the AS-ARM (calls and late output heads): bench assd sets them beside
        # the drafter's and the host's share of a round
        self.seconds = 0.0
        cfg = model.config
        self.bos = cfg.bos_token_id
        # prompt: BOS at model position 0, visible tokens at index + 1; all rank 0
        self.prompt = [(-1, self.bos)] + [(i, mi.tokens[i]) for i in mi.visible]
        self.committed: list[tuple[int, int]] = []
        self.cache = KVCache() if use_cache else None
        self.valid = 0  # committed rows whose K/V sit in the cache
        self.tentative: list[tuple[int, int]] = []  # drafts in the cache after the valid rows
        self.special = model.special_mask().cpu()
        self.dtype = next(model.parameters()).dtype

    def commit(self, pos: int, tok: int) -> None:
        """Decide a token. With the cache, a commit that matches the next cached draft keeps its rows;
        anything else rolls the cache back to the decided prefix."""
        self.committed.append((pos, tok))
        if self.cache is None:
            return
        if self.tentative and self.tentative[0] == (pos, tok) and self.valid == len(self.committed) - 1:
            self.tentative.pop(0)
            self.valid += 1
        else:  # roll back: drop every draft row from the cache
            self.cache.truncate(len(self.prompt) + self.valid)
            self.tentative = []

    @torch.inference_mode()
    def call(self, drafts: list[tuple[int, int]], queries: list[tuple[int, int]],
             states: bool = False, logit_rows: int | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Logits (float64, special tokens and word-start violations at -inf) [len(queries), V].
        With `states`, (logits, states [len(queries), d]): the AS-ARM's normed query states (the
        output head's input, in the model's dtype), which the PTP head reads. With `logit_rows`
        (and `states`), logits of the first logit_rows queries only; `head_logits` gives any
        other row's later, from its state (the lean call: no output head on unread rows)."""
        t0 = time.perf_counter()
        self.calls += 1
        n = len(self.committed)
        rows: list[tuple[int, int, int]] = []  # (pos, tok, rank)
        if self.cache is None or len(self.cache) == 0:
            rows += [(p, t, 0) for p, t in self.prompt]
            start = 0
        else:
            self.cache.truncate(len(self.prompt) + self.valid)
            start = self.valid
        if self.cache is None:
            start = 0
        rows += [(p, t, r + 1) for r, (p, t) in enumerate(self.committed) if r >= start]
        rows += [(p, t, n + 1 + j) for j, (p, t) in enumerate(drafts)]
        dev = self.model.device
        ids = torch.tensor([[t for _, t, _ in rows]], device=dev, dtype=torch.long)
        pos = torch.tensor([[p + 1 for p, _, _ in rows]], device=dev, dtype=torch.long)
        rank = torch.tensor([[r for _, _, r in rows]], device=dev, dtype=torch.long)
        self.shapes.append((len(rows), len(queries)))
        qpos = torch.tensor([[p + 1 for p, _ in queries]], device=dev, dtype=torch.long)
        qlim = torch.tensor([[n + 1 + e for _, e in queries]], device=dev, dtype=torch.long)
        out = self.model(ids, pos, rank, qpos, qlim, cache=self.cache, states=states,
                         **({"head_rows": logit_rows} if logit_rows is not None else {}))
        logits, hidden = out if states else (out, None)
        if self.cache is not None:
            self.valid = n
            self.tentative = list(drafts)
        logits = self._finish(logits[0], [p for p, _ in queries[: logits.shape[1]]])
        self.seconds += time.perf_counter() - t0
        return (logits, hidden[0]) if states else logits

    @torch.inference_mode()
    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Logits, as `call` returns them, of query rows whose states a call returned without their
        logits (`logit_rows`): the model's output head on those states, for the query positions."""
        t0 = time.perf_counter()
        out = self._finish(self.model.head(states), positions)
        self.seconds += time.perf_counter() - t0
        return out

    def _finish(self, logits: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Float64 on the host, special tokens and the input's word-start and line rules at -inf."""
        return oracle_rows(self.mi, host64(logits), self.special, positions)
