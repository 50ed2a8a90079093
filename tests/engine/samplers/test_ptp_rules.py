"""assd-ptp's rules, fast: the sampler driven by the hand-built table model of tests/support/rounds_model.py
and by hand-built PTP heads whose residual logits are written out here, so every number the
sampler should produce has a reference computed apart from engine/samplers/ptp.py.

* exactness: the joint of the completions against `exact_joint`, multiplied out from the table
  (strong dependence, k below the masked count so rounds follow rounds, a head that drafts far from
  the AS-ARM's rows), for a draft-mode head (with and without a window) and a one-pass head (with
  and without the low-rank term on the previous draft);
* per round, from the trace and the table alone: what the head was handed (the parallel rows of
  the round's positions given what the previous call knew, model positions, the token before the
  round, the drafts or uniforms before each row, the known window), each draft's proposal p_j, the
  one-pass head's drafts as F^-1_{p_j}(u_j), the exact first row, the notes, the calls the oracle
  was asked for (states, and logits of the verified rows only), the head's pass counter;
* the helpers (`row_inputs`, `known_window`, `check_pair`, `run_ptp`) against values written out.

The table model is a dictionary look-up and the heads are table look-ups too, so each test takes
seconds: `make mutation` runs this file for engine/samplers/ptp.py (tests/engine/samplers/test_ptp.py keeps the
end-to-end checks with a real, random PtpHead on the tiny AS-ARM).
"""

from __future__ import annotations

import collections
import hashlib
import importlib
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.errors import IncompatibleModelsError
from engine.samplers.ptp import SPEC, assd_ptp, check_pair, known_window, row_inputs, run_ptp
from engine.trace import DECIDING_KINDS, StepKind
from tests.engine.samplers.test_acceptance_rule import (
    inverse_cdf,  # the reference draw, written apart from engine.samplers.acceptance
)
from tests.engine.samplers.test_rounds import FOUR, SALT, SCALE, SIX, check_trace, outcome
from tests.support.rounds_model import CODEC, TableOracle, V, exact_joint, make_input, recorder, table_logits
from tests.support.tiny import g_test

ptp_mod = importlib.import_module("engine.samplers.ptp")

PASS = 1e-3
BOS = CODEC.bos_id
SPECIAL = torch.tensor([v in CODEC.special_ids for v in range(V)])
DRAFT_NOTE = "PTP head: draft j drawn by inverse CDF at u_j, conditioned on drafts 1..j-1"
ONEPASS_NOTE = "PTP head: draft j drawn by inverse CDF at u_j, conditioned on u_1..u_j-1 (one pass)"


class PtpOracle(TableOracle):
    """The table model as the AS-ARM of assd-ptp: special-token mask, BOS id, and a record of how
    each call was asked (states?, logit_rows): the real oracle returns logits of the first
    `logit_rows` rows only."""

    def __init__(self, *a):
        super().__init__(*a)
        self.special, self.bos = SPECIAL, BOS
        self.asked: list[tuple[bool, int | None]] = []
        self.heads: list[tuple[torch.Tensor, list[int]]] = []

    def head_logits(self, states, positions):
        """The states are the rows here; the real oracle also applies the input's rules at `positions`."""
        self.heads.append((states.clone(), None if positions is None else list(positions)))
        return states

    def call(self, drafts, queries, states=False, logit_rows=None):
        self.asked.append((states, logit_rows))
        rows = TableOracle.call(self, drafts, queries)
        if not states:
            return rows
        return rows[: len(queries) if logit_rows is None else logit_rows], rows


def head_row(tag: str, *key) -> list[float]:
    """A fixed pseudo-random residual row per key, in multiples of 1/16 within [-2.5, 2.5] (exact in
    float32): the hand-built heads' weights, looked up, never learned."""
    seed = int.from_bytes(hashlib.sha256(f"{tag}|{key}".encode()).digest()[:8], "little")
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-40, 41, (V,), generator=g).to(torch.float64) / 16).tolist()


def window_of(first_model_pos: int, w: int) -> list[int]:
    """Model positions of the w tokens just left of a round, 0 (BOS) past the start."""
    return [max(0, first_model_pos - w + i) for i in range(w)]


class DraftHead:
    """A draft-mode head (row j reads d_{j-1}, one `step` per row, a window pass per round):
    residual_j = head_row("d", token before, model position, window tokens). Records its inputs."""

    def __init__(self, window: int = 0, mode: str | None = "draft"):
        self.config = SimpleNamespace(window=window)
        if mode is not None:  # None: an old checkpoint's config, without the field
            self.config.mode = mode
        self.norm = SimpleNamespace(weight=torch.zeros(1, dtype=torch.float32))
        self.steps: list[tuple[torch.Tensor, int, int]] = []  # (hid row, token before, model position)
        self.windows: list[tuple[list[int], list[int]]] = []
        self.asked_at: list[int] = []

    def window_at(self, first: int) -> list[int]:
        self.asked_at.append(first)
        return window_of(first, self.config.window)

    def start(self, ids, pos, cache):
        assert cache == []
        self.windows.append((ids[0].tolist(), pos[0].tolist()))
        cache.append(tuple(ids[0].tolist()))

    def step(self, hid, prev, pos, cache):
        assert hid.shape == (1, 1, V) and prev.shape == (1, 1) and pos.shape == (1, 1)
        self.steps.append((hid[0, 0].clone(), int(prev), int(pos)))
        win = cache[0] if cache else ()
        return torch.tensor([[head_row("d", int(prev), int(pos), win)]], dtype=torch.float32)


def draft_resid(before: int, model_pos: int, win: list[int]) -> list[float]:
    return head_row("d", before, model_pos, tuple(win))


class OnePassHead:
    """A one-pass head: row j's residual from its own inputs (e_{j-1}, u_{j-1}, model position) and
    the window only; with `rank`, the gate 1 + u_{j-1} of a term on the real previous draft; with
    `out` False (and `rank`), no residual at all but that term (a head without its output layer)."""

    def __init__(self, window: int = 0, rank: bool = False, out: bool = True):
        self.config = SimpleNamespace(window=window, mode="onepass")
        self.rank, self.out = rank, out
        self.passes: list[dict] = []

    def window_at(self, first: int) -> list[int]:
        return window_of(first, self.config.window)

    def draft_pass(self, states, e_prev, u_prev, pos, win):
        m = states.shape[1]
        assert states.shape == (1, m, V) and e_prev.shape == u_prev.shape == pos.shape == (1, m)
        self.passes.append({"states": states[0].clone(), "e": e_prev[0].tolist(), "u": u_prev[0].tolist(),
                            "u_dtype": u_prev.dtype, "pos": pos[0].tolist(),
                            "win": None if win is None else (win[0][0].tolist(), win[1][0].tolist())})
        wt = () if win is None else tuple(win[0][0].tolist())
        resid = torch.tensor([[onepass_resid(int(e), float(u), int(p), wt)
                               for e, u, p in zip(e_prev[0], u_prev[0], pos[0])]], dtype=torch.float64)
        gate = torch.tensor([[[1.0 + float(u), 0.5] for u in u_prev[0]]], dtype=torch.float64) if self.rank else None
        return (resid if self.out else None), gate

    def prev_term(self, gate, prev):
        assert gate.shape == (2,)
        return torch.tensor(prev_term(gate.tolist(), prev), dtype=torch.float64)


def onepass_resid(e: int, u: float, model_pos: int, win) -> list[float]:
    return [a + 3 * u * b for a, b in zip(head_row("o", e, model_pos, tuple(win)), head_row("u", model_pos))]


def prev_term(gate: list[float], prev: int) -> list[float]:
    return [gate[0] * a + gate[1] * b for a, b in zip(head_row("p", prev), head_row("q", prev))]


def softmax(row: list[float], temperature: float) -> list[float]:
    z = [x / temperature for x in row]
    top = max(z)
    e = [math.exp(x - top) if x > -math.inf else 0.0 for x in z]
    return [x / sum(e) for x in e]


def run(mi, symbols, head, k: int, seed: int, temperature: float = 1.0, note: str = "", monkeypatch=None):
    """One assd-ptp run on the table model; with `monkeypatch`, the drafting draws are recorded (`us`):
    the one-pass head's uniforms, and the draft-mode head's (row, token) of each draw."""
    oracle = PtpOracle(mi, symbols, SCALE, SALT)
    passes = [0]
    us: list = []
    if monkeypatch is not None:
        real_u, real_s = ptp_mod.uniforms, ptp_mod.sample_categorical

        def drawn(p, gen):
            tok = real_s(p, gen)
            us.append((p.tolist(), tok))
            return tok

        monkeypatch.setattr(ptp_mod, "uniforms", lambda gen, n: us.extend(real_u(gen, n)) or us[len(us) - n:])
        monkeypatch.setattr(ptp_mod, "sample_categorical", drawn)
    steps = list(assd_ptp(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), temperature, k, head,
                          note, passes))
    if monkeypatch is not None:
        monkeypatch.setattr(ptp_mod, "uniforms", real_u)
        monkeypatch.setattr(ptp_mod, "sample_categorical", real_s)
    return steps, oracle, passes, us


HEADS = {
    "draft": lambda: DraftHead(),
    "draft-window": lambda: DraftHead(window=3),
    "old-config": lambda: DraftHead(mode=None),
    "onepass": lambda: OnePassHead(),
    "onepass-window-rank": lambda: OnePassHead(window=2, rank=True),
    "onepass-rank-no-output": lambda: OnePassHead(rank=True, out=False),
}

EXACT_CASES = [  # (head, fixture, k, temperature, runs)
    ("draft", FOUR, 2, 1.0, 1500),
    ("draft-window", FOUR, 3, 0.7, 1500),
    ("onepass", FOUR, 2, 1.4, 1500),
    ("onepass-window-rank", FOUR, 3, 1.0, 1500),
    ("draft-window", SIX, 5, 1.0, 1500),
    ("onepass-window-rank", SIX, 4, 1.0, 1500),
    ("onepass-rank-no-output", FOUR, 3, 1.0, 1500),
]


@pytest.mark.parametrize("case", EXACT_CASES, ids=[f"{c[0]}-{len(c[1][0])}vis-k{c[2]}-T{c[3]}" for c in EXACT_CASES])
def test_assd_ptp_is_exact_with_a_head_that_drafts_far_from_the_asarm(case):
    name, (visible, length, symbols), k, temperature, n = case
    mi = make_input(length, visible)
    assert k < len(mi.masked)
    exact = exact_joint(mi, symbols, SCALE, SALT, temperature)
    counts: collections.Counter = collections.Counter()
    rejected = 0
    for seed in range(n):
        steps, oracle, _, _ = run(mi, symbols, HEADS[name](), k, seed, temperature)
        check_trace(mi, steps, oracle, k)
        assert steps[-1].kind in DECIDING_KINDS  # no pass after the last token
        counts[outcome(mi, steps)] += 1
        rejected += any(s.kind == StepKind.REJECT for s in steps)
    assert rejected > n // 4  # the head's drafts are often wrong: the rule is really exercised
    p = g_test(counts, exact, n)
    assert p > PASS, f"{name} k={k} T={temperature}: G-test p = {p:.2e}"


def check_rounds(mi, symbols, steps, oracle, head, passes, us, k: int, temperature: float, note: str = "") -> dict:
    """Walk the trace round by round and check everything the sampler handed the head and the
    oracle, and every proposal, against references from the table and the heads' definitions."""
    visible = {i: mi.tokens[i] for i in mi.visible}
    decided: dict[int, int] = {}
    resampled: tuple[int, int] | None = None
    full = True  # round 0, or the previous round accepted every draft
    onepass = isinstance(head, OnePassHead)
    w = head.config.window
    rounds = collections.defaultdict(list)
    for s in steps:
        rounds[s.round].append(s)
    assert sorted(rounds) == list(range(len(rounds))) and [s.round for s in steps] == sorted(s.round for s in steps)
    assert steps[0].kind == StepKind.DRAFT_PASS and steps[0].round == 0 and steps[0].calls == 1
    assert [s for s in steps if s.kind == StepKind.DRAFT_PASS] == [steps[0]]
    stats = collections.Counter()
    calls = iter(oracle.asked)
    assert next(calls) == (True, None)  # the first call: parallel rows only, every logit
    rows_seen = iter(head.steps if not onepass else [])
    uniforms = iter(us)
    for r in range(len(rounds)):
        group = rounds[r]
        (draft,) = [s for s in group if s.kind == StepKind.DRAFT]
        positions, drafts, m = draft.positions, draft.tokens, len(draft.positions)
        todo = [p for p in mi.masked if p not in decided]
        assert positions == todo[:k]
        if r == 0:
            assert steps[0].note == f"parallel rows for {m} positions{note}"
        assert draft.note == (ONEPASS_NOTE if onepass else DRAFT_NOTE)
        # the parallel rows: computed by the previous call, which knew every decided token but a
        # resampled one (drawn after the call)
        ctx = frozenset(visible.items()) | frozenset(decided.items())
        if resampled:
            ctx = ctx - {resampled}
        base = [list(table_logits(p, ctx, symbols, SCALE, SALT)) for p in positions]
        before_round = [p for p in mi.masked if p < positions[0]]
        prev = decided[before_round[-1]] if before_round else BOS  # the last decided token in lattice order
        win_pos = window_of(positions[0] + 1, w)
        known = {**visible, **decided}
        win = [BOS if wp == 0 else known[wp - 1] for wp in win_pos]
        if r > 0:  # the output head ran on this round's rows, at this round's positions
            states, at = oracle.heads[r - 1]
            assert at == positions and torch.equal(states, torch.tensor(base, dtype=torch.float64))
        if onepass:
            call = head.passes[r]
            assert torch.equal(call["states"], torch.tensor(base, dtype=torch.float64))
            assert call["pos"] == [p + 1 for p in positions]
            assert call["win"] == ((win, win_pos) if w else None)
            u = [next(uniforms) for _ in range(m)]
            base_p = [softmax(b, temperature) for b in base]
            e_ref = [prev] + [inverse_cdf(base_p[j - 1], u[j - 1]) for j in range(1, m)]
            assert call["e"] == e_ref and call["u"] == [0.0] + u[:-1] and call["u_dtype"] == torch.float64
        elif w:
            assert head.asked_at[r] == positions[0] + 1
            assert head.windows[r] == (win, win_pos)
        for j in range(m):
            if j == 0 and full:
                row = base[0]  # the AS-ARM's exact row: no residual
            elif onepass:
                resid = onepass_resid(e_ref[j], ([0.0] + u)[j], positions[j] + 1, win) if head.out else [0.0] * V
                if head.rank:
                    resid = [a + b for a, b in zip(resid, prev_term([1.0 + ([0.0] + u)[j], 0.5],
                                                                    prev if j == 0 else drafts[j - 1]))]
                row = [b + x for b, x in zip(base[j], resid)]
            else:
                row = [b + x for b, x in zip(base[j], draft_resid(prev if j == 0 else drafts[j - 1], positions[j] + 1,
                                                                  win))]
            if not onepass:
                hid, before, model_pos = next(rows_seen)
                assert hid.dtype == torch.float32  # cast to the head's own dtype
                assert torch.equal(hid, torch.tensor(base[j], dtype=torch.float32))
                assert (before, model_pos) == (prev if j == 0 else drafts[j - 1], positions[j] + 1)
            p = softmax(row, temperature)
            assert draft.p[j] == pytest.approx(p[drafts[j]], rel=1e-9, abs=1e-12), (r, j)
            if onepass:
                assert drafts[j] == inverse_cdf(p, u[j])
            elif us:  # the draft is drawn from p_j itself (the row the trace and the test show)
                row_p, tok = next(uniforms)
                assert tok == drafts[j] and row_p == pytest.approx(p, rel=1e-9, abs=1e-15), (r, j)
        # decisions: the exact first row kept untested, then accepts, at most one reject + resample
        dec = [s for s in group if s.kind in DECIDING_KINDS]
        tested = [s for s in group if s.kind in (StepKind.ACCEPT, StepKind.REJECT)]
        start = 1 if full else 0
        if full:
            first = dec[0]
            assert (first.kind, first.tested, first.note) == (StepKind.ACCEPT, False, "exact row")
            assert first.positions == positions[:1] and first.tokens == drafts[:1]
            assert first.p == first.q == [pytest.approx(softmax(base[0], temperature)[drafts[0]], rel=1e-9)]
            tested = tested[1:]
        assert all(s.tested for s in tested)
        assert [s.positions[0] for s in tested] == positions[start : start + len(tested)]
        assert [s.tokens[0] for s in tested] == drafts[start : start + len(tested)]
        dense = [s for s in group if s.kind == StepKind.DENSITY_PASS]
        if full and len(todo) == 1:
            assert not dense  # the last token came from an exact row: no call after it
        else:
            assert [s.note for s in dense] == [f"verify {m - start} dependent drafts, parallel rows for next round"]
            assert next(calls) == (True, m - start)  # logits of the verified rows only
        kinds = [s.kind for s in dec]
        assert all(kd == StepKind.ACCEPT for kd in kinds[:-1])
        for s in dec:
            for p_, t in zip(s.positions, s.tokens):
                decided[p_] = t
        res = [s for s in group if s.kind == StepKind.RESAMPLE]
        resampled = (res[0].positions[0], res[0].tokens[0]) if res else None
        stats["resample"] += bool(res)
        stats["exact"] += full
        stats["full after round 0"] += full and r > 0
        full = not res
    assert next(calls, None) is None
    # and once more, on no rows, when the last round ended with a call (not with an exact row)
    assert [at for _, at in oracle.heads[len(rounds) - 1 :]] in ([], [[]])
    assert sorted(decided) == mi.masked
    if onepass:
        assert len(head.passes) == len(rounds) and passes == [len(rounds)] and next(uniforms, None) is None
    else:
        assert next(rows_seen, None) is None
        assert passes == [len(head.steps) + (len(rounds) if w else 0)]
        assert len(head.windows) == (len(rounds) if w else 0)
        assert next(uniforms, None) is None
    stats["rounds"] += len(rounds)
    return stats


RULE_CASES = [  # (head, fixture, k, temperature)
    ("draft", FOUR, 2, 1.0),
    ("old-config", FOUR, 3, 0.8),
    ("draft-window", SIX, 2, 1.0),
    ("draft-window", FOUR, 1, 1.3),
    ("onepass", FOUR, 3, 1.0),
    ("onepass-window-rank", SIX, 3, 0.8),
    ("onepass-window-rank", FOUR, 2, 1.0),
    ("onepass", SIX, 1, 1.0),
    ("onepass-rank-no-output", SIX, 3, 1.0),
]


@pytest.mark.parametrize("case", RULE_CASES, ids=[f"{c[0]}-{len(c[1][0])}vis-k{c[2]}-T{c[3]}" for c in RULE_CASES])
def test_each_round_hands_the_head_what_the_rule_says(case, monkeypatch):
    name, (visible, length, symbols), k, temperature = case
    mi = make_input(length, visible)
    total = collections.Counter()
    for seed in range(40):
        head = HEADS[name]()
        steps, oracle, passes, us = run(mi, symbols, head, k, seed, temperature, note="; N", monkeypatch=monkeypatch)
        check_trace(mi, steps, oracle, k)
        assert steps[-1].kind in DECIDING_KINDS
        total += check_rounds(mi, symbols, steps, oracle, head, passes, us, k, temperature, note="; N")
    # every branch was taken: rejections, exact first rows after round 0, several rounds a run
    assert total["rounds"] >= 80
    if k > 1:
        assert total["resample"] > 5 and total["full after round 0"] >= 3
    else:  # one draft a round: always the exact row, never tested
        assert total["exact"] == total["rounds"] and total["resample"] == 0


def test_without_a_pass_counter_the_run_is_the_same():
    """`passes` is optional: None counts nothing and changes no draw."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    for head in (DraftHead(window=2), OnePassHead(rank=True)):
        a = run(mi, symbols, head, 2, 5)[0]
        oracle = PtpOracle(mi, symbols, SCALE, SALT)
        b = list(assd_ptp(oracle, mi, recorder(oracle), torch.Generator().manual_seed(5), 1.0, 2, head))
        assert [(s.kind, s.positions, s.tokens, s.p, s.note) for s in a] == \
            [(s.kind, s.positions, s.tokens, s.p, s.note) for s in b]


class TwoStreamOracle(PtpOracle):
    """The table model with states that are not its logits (twice them; the output head halves
    them), so reading one for the other shows; with `all_rows`, an oracle whose extra rows cost
    nothing (the AS-ARM in bfloat16 on a CPU): every row's logits whatever `logit_rows` asks."""

    def __init__(self, *a, all_rows: bool = False):
        super().__init__(*a)
        self.all_rows = all_rows

    def head_logits(self, states, positions):
        return super().head_logits(states, positions) / 2

    def call(self, drafts, queries, states=False, logit_rows=None):
        out = super().call(drafts, queries, states, None if self.all_rows else logit_rows)
        return (out[0], out[1] * 2) if states else out


def test_rows_a_call_already_gave_are_read_from_it_with_the_same_draws():
    """With every row's logits in the call, the next round's parallel rows come from it (no late
    output head) and the run is the lean oracle's, draw for draw."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    for head in (DraftHead(window=2), OnePassHead(rank=True)):
        lean = TwoStreamOracle(mi, symbols, SCALE, SALT)
        full = TwoStreamOracle(mi, symbols, SCALE, SALT, all_rows=True)
        a, b = (list(assd_ptp(o, mi, recorder(o), torch.Generator().manual_seed(7), 1.0, 3, head)) for o in (lean, full))
        assert lean.heads and not full.heads
        assert [(s.kind, s.positions, s.tokens, s.p, s.q) for s in a] == [(s.kind, s.positions, s.tokens, s.p, s.q) for s in b]


def test_a_run_replays_from_its_seed_alone_whatever_the_global_generator_holds():
    """Every draw of a round (drafting and the acceptance test) comes from the run's generator: two
    runs with one seed give the same trace whatever torch's global generator holds (a stored run
    replays from its seed)."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    for head in (DraftHead(window=2), OnePassHead(rank=True)):
        traces = []
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            traces.append([(s.kind, s.positions, s.tokens, s.p) for s in run(mi, symbols, head, 3, 7)[0]])
        assert traces[0] == traces[1]
        assert any(s[0] == StepKind.REJECT for s in traces[0])  # the acceptance test drew and said no


def test_row_inputs_read_only_earlier_uniforms():
    """Row j of a one-pass head gets u_{j-1} and e_{j-1} = F^-1 of the AS-ARM's parallel row j-1 at
    u_{j-1} (its tempered softmax: the logits are the row's); row 1 gets the last decided token and u = 0."""
    rows = [[0.0, 0.5, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.1, 0.9], [0.7, 0.0, 0.0, 0.3]]
    with np.errstate(divide="ignore"):
        logits = np.log(np.array(rows))
    u = [0.6, 0.1, 0.05, 0.99]
    e, up = row_inputs(logits, u, 9, 1.0)
    assert e == [9, 2, 0, 2] and up == [0.0, 0.6, 0.1, 0.05]
    assert e == [9] + [inverse_cdf(rows[j - 1], u[j - 1]) for j in range(1, 4)]
    assert row_inputs(logits[:1], u[:1], 5, 1.0) == ([5], [0.0])
    # in float64, as the rows: a uniform just below a CDF edge stays below it (float32 would round it onto it)
    half = np.log(np.array([[0.5, 0.5, 1e-300, 1e-300]]))
    assert row_inputs(half, [0.5 - 1e-12, 0.3], 9, 1.0)[0] == [9, 0]
    # the temperature is the run's: at T = 0.5 row [0.25, 0.75] is [0.1, 0.9], and u = 0.2 falls in token 1
    assert row_inputs(np.log(np.array([[0.25, 0.75]])), [0.2, 0.5], 9, 1.0)[0] == [9, 0]
    assert row_inputs(np.log(np.array([[0.25, 0.75]])), [0.2, 0.5], 9, 0.5)[0] == [9, 1]


def test_known_window_reads_visible_and_decided_tokens():
    mi = make_input(6, {1: "b", 4: "a"})  # masked: 0, 2, 3, 5
    a, b = mi.tokens[4], mi.tokens[1]
    known: list[int | None] = [None] * 6
    known[0], known[2], known[3] = 4, 6, 5  # decided before the round that starts at position 5
    assert known_window(mi, known, [2, 3, 4, 5], BOS) == [b, 6, 5, a]
    assert known_window(mi, known, [0, 1, 2], BOS) == [BOS, 4, b]  # model position 0 is BOS; 1 is position 0
    assert known_window(mi, known, [0, 0], 3) == [3, 3]
    known[1] = 6  # what is decided wins over the input's token (the sampler never decides a visible one)
    assert known_window(mi, known, [2], BOS) == [6]
    known[3] = None
    with pytest.raises(AssertionError, match="position 3 left of a round is not decided yet"):
        known_window(mi, known, [4, 5], BOS)


def fake_models(kind="ptp", model_type="asarm", width=(16, 16), vocab=(None, None), teacher="tiny-asarm"):
    vocab_of = lambda extra: {**CODEC.vocab, **({extra: 99} if extra else {})}  # noqa: E731
    lm = SimpleNamespace(name="big", kind="asarm", model_type=model_type,
                         model=SimpleNamespace(config=SimpleNamespace(hidden_size=width[0])),
                         codec=SimpleNamespace(vocab=vocab_of(vocab[0]), vocab_size=7))
    head = SimpleNamespace(name="hd", kind=kind, model_type=kind,
                           model=SimpleNamespace(config=SimpleNamespace(hidden_size=width[1], teacher=teacher)),
                           codec=SimpleNamespace(vocab=vocab_of(vocab[1]), vocab_size=8))
    return lm, head


def test_check_pair_refuses_what_does_not_fit():
    check_pair(*fake_models())  # fits: no error
    with pytest.raises(IncompatibleModelsError, match="hd is a asarm model"):
        check_pair(*fake_models(kind="asarm"))
    with pytest.raises(IncompatibleModelsError, match="big is a hybrid model"):
        check_pair(*fake_models(model_type="hybrid"))
    with pytest.raises(IncompatibleModelsError) as e:
        check_pair(*fake_models(width=(16, 8)))  # same vocabulary, other width
    assert "hd (width 8, 8 tokens)" in str(e.value) and "big (width 16, 7 tokens)" in str(e.value)
    assert str(e.value).endswith("from tiny-asarm.")
    with pytest.raises(IncompatibleModelsError) as e:
        check_pair(*fake_models(vocab=(None, "zz"), teacher=""))  # same width, other vocabulary
    assert str(e.value).endswith("from another AS-ARM.")


def test_run_ptp_wires_the_run_and_says_which_head_drafts(monkeypatch):
    """The catalogue entry: the run's oracle, input, k, temperature and pass counter reach assd_ptp;
    the first note names the head, its teacher, and warns when another AS-ARM verifies."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)

    def ctx(teacher, lm_name="tiny-asarm", draft=True, temperature=1.0):
        lm, dl = fake_models(teacher=teacher)
        lm.name = lm_name
        dl.model = DraftHead(window=2)
        dl.model.config.teacher = teacher
        dl.model.config.hidden_size = 16
        oracle = PtpOracle(mi, symbols, SCALE, SALT)
        return SimpleNamespace(lm=lm, draft_lm=dl if draft else None, oracle=oracle, mi=mi, rec=recorder(oracle),
                               gen=torch.Generator().manual_seed(3), temperature=temperature, k=3,
                               drafter_passes=[4], drafter_seconds=[1.0])

    def entry(c):  # the run function as the run calls it: the context, and its knobs by name
        return run_ptp(c, k=c.k, temperature=c.temperature)

    c = ctx("tiny-asarm")
    t0 = time.perf_counter()
    steps = list(entry(c))
    wall = time.perf_counter() - t0
    assert steps[0].note == "parallel rows for 3 positions; PTP head hd (distilled from tiny-asarm)"
    direct = run(mi, symbols, DraftHead(window=2), 3, 3, note="; PTP head hd (distilled from tiny-asarm)")
    assert [(s.kind, s.positions, s.tokens, s.p, s.note) for s in steps] == \
        [(s.kind, s.positions, s.tokens, s.p, s.note) for s in direct[0]]
    assert c.drafter_passes == [4 + direct[2][0]] and direct[2][0] > 0
    # the head's drafting time is added to what the counter held (bench assd's drafter ms per round), never
    # more than the run's own time
    assert 1.0 < c.drafter_seconds[0] <= 1.0 + wall, c.drafter_seconds
    c = ctx("other")
    assert next(entry(c)).note == ("parallel rows for 3 positions; PTP head hd (distilled from other), verifying "
                                     "with tiny-asarm: still exact, drafts may be accepted less often")
    c = ctx("")
    assert next(entry(c)).note == "parallel rows for 3 positions; PTP head hd"
    c = ctx("tiny-asarm", temperature=0.5)
    steps = list(entry(c))
    check_rounds(mi, symbols, steps, c.oracle, c.draft_lm.model, [c.drafter_passes[0] - 4], [], 3, 0.5,
                 note="; PTP head hd (distilled from tiny-asarm)")
    with pytest.raises(IncompatibleModelsError, match="needs a PTP drafter"):
        entry(ctx("x", draft=False))
    bad = ctx("x")
    bad.draft_lm.kind = "asarm"
    with pytest.raises(IncompatibleModelsError, match="drafts with a PTP head"):
        entry(bad)


def test_catalogue_entry():
    assert (SPEC.name, SPEC.kind, SPEC.cache, SPEC.reads, SPEC.run) == ("assd-ptp", "asarm", True,
                                                                          ("k", "temperature"), run_ptp)
    assert SPEC.second.kind == "ptp" and SPEC.second.check is check_pair and "--kind ptp" in SPEC.second.how


class TensorsMade:
    """Stands in for the module's `torch`: records the device of every tensor ptp.py makes itself
    (everything else is torch's own)."""

    def __init__(self):
        self.devices: list = []

    def __getattr__(self, name):
        return getattr(torch, name)

    def tensor(self, *a, **kw):
        self.devices.append(kw.get("device", "none given"))
        return torch.tensor(*a, **kw)


@pytest.mark.parametrize("name", ["draft-window", "onepass-window-rank"])
def test_drafting_puts_every_tensor_it_makes_on_the_states_device(name, monkeypatch):
    """The head's inputs (model positions, the token before, the window, e_{j-1}, u_{j-1}) go to the
    device the AS-ARM's states are on (a GPU in serving), never to torch's default device: on a
    CPU-only machine both are the CPU, so the rule is read from the device each tensor is given."""
    made = TensorsMade()
    monkeypatch.setattr(ptp_mod, "torch", made)
    visible, length, symbols = FOUR
    steps = run(make_input(length, visible), symbols, HEADS[name](), 3, 2)[0]
    assert steps[-1].kind in DECIDING_KINDS
    assert len(made.devices) >= 4 and all(d == torch.device("cpu") for d in made.devices), made.devices


def test_the_entry_drafts_with_the_cpu_drafter_on_a_cpu(monkeypatch):
    """The catalogue entry asks for the head's CPU drafter (INT8_ON_CPU; the drafter itself, its
    closeness and where it is refused: tests/engine/models/test_ptp_int8.py)."""
    import engine.samplers.ptp as ptp_mod

    asked = []
    monkeypatch.setattr(ptp_mod, "drafting_head", lambda head, int8: asked.append(int8) or head)
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    lm, dl = fake_models(teacher="tiny-asarm")
    dl.model = DraftHead(window=2)
    dl.model.config.teacher, dl.model.config.hidden_size = "tiny-asarm", 16
    oracle = PtpOracle(mi, symbols, SCALE, SALT)
    c = SimpleNamespace(lm=lm, draft_lm=dl, oracle=oracle, mi=mi, rec=recorder(oracle), gen=torch.Generator().manual_seed(3),
                        drafter_passes=[0], drafter_seconds=[0.0])
    list(run_ptp(c, k=3, temperature=1.0))
    assert asked == [ptp_mod.INT8_ON_CPU] and ptp_mod.INT8_ON_CPU is True
