"""A hand-built hybrid (non-causal + causal head) with known conditionals, for the hybrid samplers.

`TableHybrid` is what mdm, self-spec and the diffusion drafter read from a hybrid model: `config`
(bos, mask, special ids, nc_share, causal_share), `device`, `special_mask()`, `noncausal(ids) ->
(states, logits)` and `causal(states, order, tokens) -> logits`. Its rows are tables
(`hybrid_logits`, one salt per head): the non-causal row of a position given the
tokens the input shows, and the causal row of order[r + 1] given those tokens plus tokens[:r + 1]
placed at order[:r + 1]. Special ids get *finite* logits here, so a pass that forgot the special
mask would let them through. The states are the input itself, so the causal head conditions on
exactly what the non-causal pass saw. Every input is recorded (`nc_inputs`, `causal_inputs`).

`nc_probs` and `causal_probs` give the reference rows straight from the tables (specials removed,
a word-start ban applied, tempered), for the exact laws the tests build (issue 29).
"""

from __future__ import annotations

import functools
import hashlib
import math
import types

import torch

from tests.support.rounds_model import CODEC, SYMBOLS, V

NC_SALT, CAUSAL_SALT = 101, 202


@functools.cache
def hybrid_logits(pos: int, context: frozenset, symbols: tuple[int, ...], scale: float, noise: float, salt: int,
                  special: float) -> tuple[float, ...]:
    """Logits at `pos` given the known (position, token) pairs: a pseudo-random row (std `noise`) per
    (head, position, context), so any change of context moves the whole row, plus scale / distance
    on a symbol picked by each known token (either side); -inf off `symbols`, `special` (finite) at
    the special ids."""
    key = f"{salt}|{pos}|{sorted(context)}".encode()
    seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    g = torch.Generator().manual_seed(seed)
    raw = (torch.randn(len(symbols), generator=g, dtype=torch.float64, device="cpu") * noise).tolist()
    for p, t in context:
        if p != pos and t in symbols:
            raw[(symbols.index(t) + p + salt) % len(symbols)] += scale / abs(pos - p)
    row = [-math.inf] * V
    for s, x in zip(symbols, raw):
        row[s] = x
    for s in CODEC.special_ids:
        row[s] = special
    return tuple(row)


class TableHybrid:
    """A hybrid model over tables (see the module docstring). Shares are exact binary fractions,
    different from each other, so every count of passes is readable from the calls."""

    def __init__(self, symbols: tuple[int, ...] = tuple(SYMBOLS), scale: float = 1.0, noise: float = 1.5,
                 nc_share: float = 0.625, causal_share: float = 0.375, special_logit: float = 2.0):
        self.symbols, self.scale, self.noise, self.special_logit = symbols, scale, noise, special_logit
        self.config = types.SimpleNamespace(
            vocab_size=V, bos_token_id=CODEC.bos_id, mask_token_id=CODEC.mask_id, pad_token_id=CODEC.pad_id,
            special_token_ids=list(CODEC.special_ids), nc_share=nc_share, causal_share=causal_share)
        self.device = torch.device("cpu")
        self.nc_inputs: list[list[int]] = []
        self.causal_inputs: list[tuple[list[int], list[int], list[int]]] = []

    def special_mask(self) -> torch.Tensor:
        m = torch.zeros(V, dtype=torch.bool, device="cpu")
        m[list(CODEC.special_ids)] = True
        return m

    def context(self, ids: list[int]) -> frozenset:
        """The (position, token) pairs an input shows: BOS first, then position i at i + 1."""
        assert ids[0] == CODEC.bos_id, f"input does not start with BOS: {ids}"
        return frozenset((j - 1, t) for j, t in enumerate(ids) if j > 0 and t != CODEC.mask_id)

    def _row(self, pos: int, context: frozenset, salt: int) -> list[float]:
        return list(hybrid_logits(pos, context, self.symbols, self.scale, self.noise, salt, self.special_logit))

    def noncausal(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        assert x.dim() == 2 and x.shape[0] == 1 and x.dtype == torch.long and x.device == self.device
        ids = x[0].tolist()
        self.nc_inputs.append(ids)
        ctx = self.context(ids)
        logits = torch.tensor([self._row(j - 1, ctx, NC_SALT) for j in range(len(ids))], dtype=torch.float64,
                              device="cpu")
        return x.to(torch.float64)[..., None], logits[None]

    def causal(self, h: torch.Tensor, order: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        assert order.shape == tokens.shape and order.shape[0] == 1 and h.shape[0] == 1
        assert order.dtype == tokens.dtype == torch.long and order.device == tokens.device == self.device
        ids = [int(v) for v in h[0, :, 0].tolist()]
        ctx = self.context(ids)
        order_l, toks = order[0].tolist(), tokens[0].tolist()
        self.causal_inputs.append((order_l, toks, ids))
        rows = []
        for r in range(len(order_l) - 1):
            chain = frozenset((order_l[j] - 1, toks[j]) for j in range(r + 1))
            rows.append(self._row(order_l[r + 1] - 1, ctx | chain, CAUSAL_SALT))
        return torch.tensor(rows, dtype=torch.float64, device="cpu").reshape(1, len(order_l) - 1, V)


def _probs(row: list[float], allowed: list[int], temperature: float) -> dict[int, float]:
    z = sum(math.exp(row[t] / temperature) for t in allowed)
    return {t: math.exp(row[t] / temperature) / z for t in allowed}


def allowed(model: TableHybrid, mi, pos: int) -> list[int]:
    """The symbols a position may take: a word-start position loses the ids its ban names."""
    if pos in mi.word_starts and mi.not_word_start is not None:
        return [t for t in model.symbols if not bool(mi.not_word_start[t])]
    return list(model.symbols)


def nc_probs(model: TableHybrid, mi, pos: int, known: dict[int, int], temperature: float = 1.0) -> dict[int, float]:
    """Reference non-causal row of `pos` given the known tokens (visible and decided), as token -> prob."""
    row = model._row(pos, frozenset(known.items()), NC_SALT)
    return _probs(row, allowed(model, mi, pos), temperature)


def causal_probs(model: TableHybrid, mi, pos: int, known: dict[int, int], chain: list[tuple[int, int]],
                 temperature: float = 1.0) -> dict[int, float]:
    """Reference causal row of `pos` given what the non-causal pass saw (`known`) and the chain."""
    row = model._row(pos, frozenset(known.items()) | frozenset(chain), CAUSAL_SALT)
    return _probs(row, allowed(model, mi, pos), temperature)
