"""A hand-built any-subset model with known conditionals, for the samplers' round logic.

`table_logits(pos, context)` is the model: a fixed pseudo-random logit row for every (position, set
of known tokens) pair, large enough that every conditional depends strongly on what is known.
`TableOracle` serves it through the DensityOracle protocol the samplers drive; `exact_joint`
multiplies the conditionals along the decode order straight from `table_logits`, so the reference
the samplers are tested against shares no code with the oracle path or the samplers (issue 29).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math

import torch

from engine.inputs.masking import MaskedInput
from engine.samplers.base import Recorder
from tests.support.tiny import masked_input, tiny_codec

CODEC = tiny_codec()
V = CODEC.vocab_size
SYMBOLS = [CODEC.encode(ch)[0] for ch in "abc"]


@functools.cache
def table_logits(pos: int, context: frozenset, symbols: tuple[int, ...], scale: float, salt: int) -> tuple[float, ...]:
    """The model: logits at `pos` given the known (position, token) pairs; -inf off `symbols`.

    A pseudo-random row per (position, context), plus, for every known token on the left, scale /
    distance on a symbol picked by that token: every conditional depends strongly on its near
    left neighbours, and through the random part on everything else it sees."""
    key = f"{salt}|{pos}|{sorted(context)}".encode()
    seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    g = torch.Generator().manual_seed(seed)
    raw = (torch.randn(len(symbols), generator=g, dtype=torch.float64) * (scale / 4)).tolist()
    for p, t in context:
        if p < pos and t in symbols:
            raw[(symbols.index(t) + p) % len(symbols)] += scale / (pos - p)
    row = [-math.inf] * V
    for s, x in zip(symbols, raw):
        row[s] = x
    return tuple(row)


class TableOracle:
    """DensityOracle over `table_logits`: a query (pos, e) sees the visible tokens, the committed
    ones and the first e drafts (the AS-ARM's contract, engine/samplers/base.py)."""

    def __init__(self, mi: MaskedInput, symbols: tuple[int, ...], scale: float, salt: int):
        self.mi, self.symbols, self.scale, self.salt = mi, symbols, scale, salt
        self.visible = frozenset((i, mi.tokens[i]) for i in mi.visible)
        self.committed: list[tuple[int, int]] = []
        self.calls = 0
        self.queries: list[list[tuple[int, int]]] = []
        self.lean: list[tuple[int, int | None]] = []  # per states=True call: (drafts placed, logit_rows asked)
        self.head_positions: list[list[int] | None] = []  # the positions each head_logits call was given

    def call(self, drafts: list[tuple[int, int]], queries: list[tuple[int, int]], states: bool = False,
             logit_rows: int | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The table's rows; with `states`, the rows double as their own "states" (head_logits is
        the identity), and `logit_rows` returns only the first rows' logits, as the real oracle does."""
        if states:
            self.lean.append((len(drafts), logit_rows))
            rows = self.call(drafts, queries)
            return rows[: len(queries) if logit_rows is None else logit_rows], rows
        self.calls += 1
        self.queries.append(list(queries))
        known = self.visible | frozenset(self.committed)
        done = {p for p, _ in self.committed}
        assert not any(p in done for p, _ in drafts), "a draft placed on a decided position"
        rows = []
        for pos, e in queries:
            assert pos not in done, f"query for decided position {pos}"
            assert 0 <= e <= len(drafts), f"query sees {e} of {len(drafts)} drafts"
            rows.append(table_logits(pos, known | frozenset(drafts[:e]), self.symbols, self.scale, self.salt))
        return torch.tensor(rows, dtype=torch.float64).reshape(len(queries), V)

    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        self.head_positions.append(None if positions is None else list(positions))
        return states

    def commit(self, pos: int, tok: int) -> None:
        assert pos in self.mi.masked and pos not in {p for p, _ in self.committed}, f"position {pos} decided twice"
        self.committed.append((pos, tok))


def make_input(length: int, visible: dict[int, str]) -> MaskedInput:
    return masked_input(CODEC, visible, length)


def exact_joint(mi: MaskedInput, symbols: tuple[int, ...], scale: float, salt: int, temperature: float = 1.0) -> dict:
    """P(completion) under sequential decoding (masked positions left to right), from the table."""
    visible = frozenset((i, mi.tokens[i]) for i in mi.visible)
    out = {}
    for combo in itertools.product(symbols, repeat=len(mi.masked)):
        logp = 0.0
        for r, (pos, tok) in enumerate(zip(mi.masked, combo)):
            row = table_logits(pos, visible | frozenset(zip(mi.masked[:r], combo[:r])), symbols, scale, salt)
            z = [x / temperature for x in row if x > -math.inf]
            logp += row[tok] / temperature - math.log(sum(math.exp(x) for x in z))
        out[combo] = math.exp(logp)
    return out


def dependence(mi: MaskedInput, symbols: tuple[int, ...], scale: float, salt: int) -> float:
    """Min over later positions and prefixes of the largest TV between the conditionals given
    different previous tokens (how strongly each factor depends on the one before)."""
    visible = frozenset((i, mi.tokens[i]) for i in mi.visible)

    def probs(pos, ctx):
        return torch.softmax(torch.tensor(table_logits(pos, visible | ctx, symbols, scale, salt)), 0)

    worst = 1.0
    for r in range(1, len(mi.masked)):
        for stem in itertools.product(symbols, repeat=r - 1):
            ctx = frozenset(zip(mi.masked[: r - 1], stem))
            rows = [probs(mi.masked[r], ctx | {(mi.masked[r - 1], a)}) for a in symbols]
            worst = min(worst, max(0.5 * float((x - y).abs().sum()) for x in rows for y in rows))
    return worst


def recorder(oracle) -> Recorder:
    return Recorder(lambda t: CODEC.hf.convert_ids_to_tokens(t), lambda: oracle.calls)
