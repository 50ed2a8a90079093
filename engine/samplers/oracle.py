"""The density oracle, in one home: how a sampler sees an any-subset model, whichever family.

`call(drafts, queries)` is one network call. Drafts are tentative content rows appended after the
decided tokens; a query (position, e) asks for the distribution at `position` given the prompt,
every decided token and the first `e` drafts. `commit` decides a token (in decode order). Every
oracle answers through `oracle_rows` (special ids banned, the input's word-start and one-line rules
applied), and `make_oracle` picks the oracle for a loaded model: `AsArmOracle` for our AS-ARM,
`XLNetOracle` for a Hugging Face XLNet. Why one home: the samplers' exactness rests on every oracle
answering alike, which is easiest to check when they sit side by side.

With `use_cache=True` the K/V of decided tokens are kept; drafts that get committed keep theirs,
the first rejected draft rolls the cache back. Without it, every call recomputes everything (the
reference ASSD's behaviour). Samplers never know which: same calls, same numbers.

A Hugging Face XLNet is fed as the ASSD paper's authors feed it. It is the same two-stream family:
`perm_mask[b, i, j] = 1` forbids i to attend to j and `target_mapping` picks the query rows
(without it XLNet reads the content stream and leaks the token). The window is fed as it is, with
no `<s>` (the authors encode with add_special_tokens=False); only a window with nothing visible,
which the authors never run, gets one `<s>` before it so the first query has a key to attend to
(Hugging Face's -1e30 mask would otherwise spread it over every position, its own token included).

Uncached, each call is one Hugging Face forward over the whole window, and one position has one
content row and one query row sharing a mask row, so a query at a drafted position must see exactly
the ranks before it: pipelined ASSD is refused there. Cached (engine/models/xlnet_cache.py), a call
computes only its new content rows and its query rows, each query with its own limit, so every
sampler runs, pipelined ASSD included.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from engine.errors import IncompatibleModelsError
from engine.inputs.masking import MaskedInput
from engine.inputs.tokenization import Codec
from engine.loading.device import host64
from engine.loading.loaded_model import LoadedModel
from engine.models.asarm_core import AsArmMixin, KVCache
from engine.models.xlnet_cache import XLNetKV


def oracle_rows(mi: MaskedInput, logits: torch.Tensor, banned: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
    """A density oracle's answer as samplers read it, for every model family alike (the AS-ARM and
    the XLNet adapter): `banned` ids (special tokens) at -inf, then the input's word-start and
    one-line rules (MaskedInput.constrain) at the query positions."""
    return mi.constrain(logits.masked_fill(banned, float("-inf")), positions)


class CallClock:
    """Wall seconds inside the network, in all (`seconds`) and per call (`call_seconds`, a late
    output head's time added to the call whose states it reads): bench assd's AS-ARM share of a round
    and the price of each call shape in the same run (lab/bench.py, `observed_costs`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.call_seconds: list[float] = []

    def spent(self, t0: float, call: bool) -> None:
        """Book the seconds since `t0`: a call of its own (`call`), or the latest call's late work."""
        dt = time.perf_counter() - t0
        self.seconds += dt
        if call or not self.call_seconds:
            self.call_seconds.append(dt)
        else:
            self.call_seconds[-1] += dt


def make_oracle(lm: LoadedModel, mi: MaskedInput, use_cache: bool):
    """The density oracle an AS-ARM sampler drives: our AS-ARM (cached or not) or an XLNet adapter;
    refuses a model that is not an AS-ARM."""
    if lm.kind != "asarm":
        raise IncompatibleModelsError(f"{lm.name} is a {lm.kind} model; this sampler needs an AS-ARM.")
    if lm.model_type == "xlnet":
        return XLNetOracle(model=lm.model, mi=mi, codec=lm.codec, use_cache=use_cache, exclude_special=lm.exclude_special)
    return AsArmOracle(lm.model, mi, use_cache=use_cache)


class AsArmOracle(CallClock):
    """The AS-ARM as a density oracle (docs/DESIGN.md §2.1): samplers say which drafts to place and
    which positions to query; it builds ranks, runs the model and keeps the KV cache exact."""

    def __init__(self, model: AsArmMixin, mi: MaskedInput, use_cache: bool = False):
        self.model = model
        self.mi = mi
        self.use_cache = use_cache
        self.calls = 0
        self.shapes: list[tuple[int, int]] = []  # (content rows computed, query rows) per call: bench assd's cost model
        super().__init__()  # wall seconds inside the AS-ARM (calls and late output heads), CallClock
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
        # whether `logit_rows` makes a lean call: not in bfloat16 on a CPU, whose packed output head
        # costs the same for 1-32 rows (there every row's logits come back)
        self.lean_calls = model.cpu_precision == "fp32"

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
        other row's later, from its state (the lean call: no output head on unread rows). Not in
        bfloat16 on a CPU, where a packed output head costs the same for 1 to 32 rows: there every
        row's logits come back, and a second output head later would cost a whole one more."""
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
        lean = logit_rows is not None and self.lean_calls
        out = self.model(ids, pos, rank, qpos, qlim, cache=self.cache, states=states,
                         **({"head_rows": logit_rows} if lean else {}))
        logits, hidden = out if states else (out, None)
        if self.cache is not None:
            self.valid = n
            self.tentative = list(drafts)
        logits = self._finish(logits[0], [p for p, _ in queries[: logits.shape[1]]])
        self.spent(t0, call=True)
        return (logits, hidden[0]) if states else logits

    @torch.inference_mode()
    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Logits, as `call` returns them, of query rows whose states a call returned without their
        logits (`logit_rows`): the model's output head on those states, for the query positions."""
        t0 = time.perf_counter()
        out = self._finish(self.model.output_head(states[None])[0], positions)
        self.spent(t0, call=False)
        return out

    def _finish(self, logits: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Float64 on the host, special tokens and the input's word-start and line rules at -inf."""
        return oracle_rows(self.mi, host64(logits), self.special, positions)


def banned_ids(codec: Codec, vocab: int, exclude_special: bool) -> torch.Tensor:
    """[V] bool, the ids no fill may take: every special token of the tokenizer (the studio's rule,
    on by default) or, with it off, `<mask>` only (the ASSD authors' rule). Tokens the code mapping
    spells whitespace with are never special."""
    ban = torch.zeros(vocab, dtype=torch.bool)
    ids = codec.special_ids if exclude_special else [codec.mask_id]
    ban[[i for i in ids if i is not None and i < vocab]] = True
    return ban


class XLNetOracle(CallClock):
    """A pretrained XLNet seen as the density oracle ASSD needs: its permutation attention gives
    any-subset conditionals, so the AS-ARM samplers run on it unchanged; `use_cache` keeps the
    content K/V of decided tokens (engine/models/xlnet_cache.py)."""

    def __init__(self, *, model, mi: MaskedInput, codec: Codec, use_cache: bool = False,
                 exclude_special: bool = True):
        self.model, self.mi, self.codec = model, mi, codec
        self.calls = 0
        self.shapes: list[tuple[int, int]] = []  # (content rows computed, query rows) per call
        super().__init__()  # wall seconds inside the network, in all and per call (CallClock)
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
            self.spent(t0, call=True)

    @torch.inference_mode()
    def head_logits(self, states: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """Logits, as `call` returns them, of query rows whose states a call returned without logits."""
        t0 = time.perf_counter()
        try:
            return self._finish(self.model.lm_loss(states), positions)
        finally:
            self.spent(t0, call=False)

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
