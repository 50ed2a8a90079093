"""The hybrid samplers (self-spec, mdm, the diffusion drafter of assd-diffusion) against a hand-built
hybrid with known conditionals (tests/support/hybrid_model.py), in seconds.

References are computed apart from the samplers: windows and the cosine grid from closed forms and
literal tables written here; the exact output laws enumerated from the model's tables (self-spec
along a given order: each window's drafts from the non-causal rows, targets from the causal rows
along sigma, the speculative test's accept / residual branches and the inner-loop limit; MDM: a
uniform subset per step, tokens factorized; assd-diffusion: the AS-ARM's joint of
tests/support/rounds_model.py). Every trace is replayed by a checker that recomputes each step's positions,
p and q values, notes, rounds and fractional calls from the tables. Seeds are fixed.
"""

from __future__ import annotations

import collections
import itertools
import math
import types

import pytest
import torch

from engine.errors import IncompatibleModelsError
from engine.samplers import mdm as mdm_mod
from engine.samplers import selfspec as selfspec_mod
from engine.samplers.assd import assd_drafted
from engine.samplers.base import Recorder
from engine.samplers.diffusion_drafter import DiffusionDrafter, check_pair
from engine.samplers.hybrid_passes import (
    CallCounter,
    causal_pass,
    cosine_remaining,
    hybrid_counter,
    model_ids,
    nc_pass,
    require_hybrid,
)
from engine.samplers.mdm import mdm
from engine.samplers.selfspec import random_order, self_spec, window_size
from engine.trace import DECIDING_KINDS, StepKind, trace_counts
from tests.support.hybrid_model import TableHybrid, causal_probs, nc_probs
from tests.support.rounds_model import CODEC, SYMBOLS, TableOracle, exact_joint, make_input
from tests.support.tiny import g_test

PASS = 1e-3
A, B, C = SYMBOLS
approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-12)  # noqa: E731


def constrained(length: int, visible: dict[int, str], word_start: int | None = None, ban: int = C):
    """A MaskedInput; with `word_start`, that position may not take the token `ban` (the word-start
    rule of engine/inputs/masking.py, applied by every pass the samplers read)."""
    mi = make_input(length, visible)
    if word_start is not None:
        mi.word_starts = [word_start]
        mi.not_word_start = torch.zeros(CODEC.vocab_size, dtype=torch.bool)
        mi.not_word_start[ban] = True
    return mi


def texts(tokens):
    return CODEC.hf.convert_ids_to_tokens(tokens)


def known_of(mi) -> dict[int, int]:
    return {i: mi.tokens[i] for i in mi.visible}


def outcome(mi, steps) -> tuple[int, ...]:
    decided = {}
    for s in steps:
        if s.kind in DECIDING_KINDS:
            for p, t in zip(s.positions, s.tokens):
                assert p not in decided, f"position {p} decided twice"
                decided[p] = t
    assert sorted(decided) == mi.masked
    return tuple(decided[p] for p in mi.masked)


# ------------------------------------------------------------------------------- windows
def hand_window(i: int, d: int, dtau: float, window: str) -> int:
    """W(i), written apart from selfspec.window_size: with alpha = (d - i)/d, cos(pi/2 (1 - tau)) is
    alpha itself, and cos(arccos(alpha) + b) = alpha cos b - sqrt(1 - alpha^2) sin b, b = pi dtau / 2."""
    x = d * dtau if window == "linear" else cosine_x(i, d, dtau)
    assert abs(x - round(x)) > 1e-9 or window == "linear", "a reference value on an integer boundary"
    return max(1, min(math.floor(x), d - i))


def cosine_x(i: int, d: int, dtau: float) -> float:
    alpha, b = (d - i) / d, math.pi * dtau / 2
    return d * (alpha * (1 - math.cos(b)) + math.sqrt(1 - alpha * alpha) * math.sin(b))


WINDOW_CASES = [(i, d, dt) for d in (1, 3, 4, 7, 10, 37, 100, 256) for i in range(0, d, max(1, d // 9))
                for dt in (0.05, 0.13, 0.3, 0.6, 1.0)]


def test_window_size_against_hand_values():
    # literal values worked out by hand from the module's formulas
    assert window_size(0, 100, 0.05, "linear") == 5
    assert window_size(0, 10, 0.35, "linear") == 3  # floor(3.5)
    assert window_size(8, 10, 0.35, "linear") == 2  # capped at what is left
    assert window_size(0, 10, 0.01, "linear") == 1  # floor(0.1) = 0, raised to 1
    assert window_size(0, 4, 0.6, "cosine") == 1  # 4 (1 - cos(0.3 pi)) = 1.65
    assert window_size(1, 4, 0.6, "cosine") == 3  # 4 (0.75 - cos(acos(0.75) + 0.3 pi)) = 3.37, 3 left
    assert window_size(0, 100, 0.5, "cosine") == 29  # 100 (1 - cos(pi / 4)) = 29.3
    assert window_size(50, 100, 0.2, "cosine") == 29  # 100 (0.5 - cos(pi/3 + pi/10)) = 29.2
    assert window_size(90, 100, 0.1, "cosine") == 10  # 100 (0.1 - cos(acos(0.1) + pi/20)) = 15.7, 10 left
    assert window_size(0, 256, 0.05, "cosine") == 0 + 1  # 256 (1 - cos(pi/40)) = 0.79, raised to 1
    for i, d, dt in WINDOW_CASES:
        for window in ("linear", "cosine"):
            if window == "cosine" and abs(cosine_x(i, d, dt) - round(cosine_x(i, d, dt))) < 1e-9:
                continue  # on an integer boundary: float rounding decides, not the formula
            assert window_size(i, d, dt, window) == hand_window(i, d, dt, window), (i, d, dt, window)
    assert window_size(0, 5, 0.4) == hand_window(0, 5, 0.4, "cosine")  # cosine is the default
    with pytest.raises(ValueError, match="unknown window 'square'"):
        window_size(0, 5, 0.4, "square")


# ------------------------------------------------------------------------------- self-spec
def selfspec_law(model, mi, order, dtau, window, inner, temperature) -> dict[tuple[int, ...], float]:
    """Self-spec's exact output law along `order`, enumerated from the tables: per outer iteration a
    window of W(i) positions, drafts from the non-causal rows given what is decided, targets from the
    causal rows along the chain (the first of the window: its non-causal row); per inner loop each
    draft is kept with min(p, q)(x) or, at the first rejection, resampled to x with max(q - p, 0)(x),
    and the next loop starts after it; after `inner` loops the rest is dropped."""
    out: dict[tuple[int, ...], float] = collections.defaultdict(float)
    m = len(order)

    def outer(i: int, known: dict[int, int], prob: float) -> None:
        if i == m:
            out[tuple(known[p] for p in mi.masked)] += prob
            return
        w = hand_window(i, m, dtau, window)
        positions = order[i: i + w]
        p = [nc_probs(model, mi, pos, known, temperature) for pos in positions]

        def loop(n_loop: int, s: int, chain: list[int], prob: float) -> None:
            if s == w or n_loop == inner:
                outer(i + s, {**known, **dict(zip(positions, chain))}, prob)
                return

            def walk(k: int, chain: list[int], prob: float) -> None:
                if k == w:
                    return loop(n_loop + 1, w, chain, prob)
                q = p[0] if k == 0 else causal_probs(model, mi, positions[k], known,
                                                     list(zip(positions, chain)), temperature)
                for x in q:
                    keep, res = min(p[k][x], q[x]), max(q[x] - p[k][x], 0.0)
                    if keep:
                        walk(k + 1, chain + [x], prob * keep)
                    if res:
                        loop(n_loop + 1, k + 1, chain + [x], prob * res)

            walk(s, chain, prob)

        loop(0, 0, [], prob)

    outer(0, known_of(mi), 1.0)
    return dict(out)


MAX_STEPS = 200  # far above any run here: a sampler that loops fails fast instead of hanging


def run_selfspec(mi, seed, order=None, dtau=1.0, window="linear", inner=2, temperature=1.0, check=True,
                 model=None):
    model = model or TableHybrid()
    counter = CallCounter()
    rec = Recorder(texts_one, counter)
    gen = torch.Generator().manual_seed(seed)
    steps = list(itertools.islice(self_spec(model, mi, rec, gen, temperature, dtau, window, inner, counter, order=order),
                                  MAX_STEPS))
    assert len(steps) < MAX_STEPS, "a run that does not end"
    if check and order is not None:
        replay_selfspec(model, mi, order, steps, counter, dtau, window, inner, temperature)
    return steps, model, counter


def texts_one(t: int) -> str:
    return CODEC.hf.convert_ids_to_tokens(t)


def replay_selfspec(model, mi, order, steps, counter, dtau, window, inner, temperature) -> None:
    """Replays a self-spec trace against the tables: every step's kind, round, positions, tokens, p and
    q, note, `tested` and calls (nc_share per non-causal pass, causal_share per causal pass) are what
    the algorithm prescribes given the run's own accept / reject outcomes; the model saw exactly the
    inputs that follow from the decided tokens (the causal passes: the window's non-causal states)."""
    cfg = model.config
    known = known_of(mi)
    m, i, rnd, j = len(order), 0, 0, 0
    n_nc = n_c = 0
    want_nc: list[list[int]] = []
    want_causal = []

    def ids_of(kn):
        return [CODEC.bos_id] + [kn.get(p, CODEC.mask_id) for p in range(len(mi.tokens))]

    def take(kinds):
        nonlocal j
        assert j < len(steps), f"trace ends early, {kinds} expected"
        s = steps[j]
        assert s.kind in kinds, f"step {j}: {s.kind} where {kinds} was expected"
        assert s.round == rnd, (j, s.round, rnd)
        assert s.calls == approx(n_nc * cfg.nc_share + n_c * cfg.causal_share), (j, s.calls)
        assert len(s.positions) == len(s.tokens) == len(s.p) == len(s.q) == len(s.texts)
        assert s.texts == texts(s.tokens)
        j += 1
        return s

    while i < m:
        w = hand_window(i, m, dtau, window)
        positions = order[i: i + w]
        wknown = dict(known)
        want_nc.append(ids_of(wknown))
        n_nc += 1
        st = take({StepKind.NC_PASS})
        assert (st.positions, st.note) == ([], f"non-causal pass, window {w}")
        p = [nc_probs(model, mi, pos, wknown, temperature) for pos in positions]
        st = take({StepKind.DRAFT})
        assert st.positions == positions and st.note == "non-causal drafts" and st.tested
        chain = list(st.tokens)
        assert st.p == [approx(p[k][t]) for k, t in enumerate(chain)] and st.q == [None] * w
        s = 0
        for n_loop in range(inner):
            if max(s, 1) < w:
                want_causal.append(([pos + 1 for pos in positions], list(chain), ids_of(wknown)))
                n_c += 1
                st = take({StepKind.CAUSAL_PASS})
                assert st.positions == []
                assert st.note == f"causal pass {n_loop + 1}: targets for {w - max(s, 1)} drafts"
            stop = w
            for k in range(s, w):
                pos, x = positions[k], chain[k]
                q = p[0] if k == 0 else causal_probs(model, mi, pos, wknown, list(zip(positions[:k], chain[:k])),
                                                     temperature)
                st = take({StepKind.ACCEPT, StepKind.REJECT})
                assert (st.positions, st.tokens) == ([pos], [x])
                assert st.p == [approx(p[k][x])] and st.q == [approx(q[x])]
                if st.kind == StepKind.ACCEPT:
                    assert st.note == ("first draft: causal = non-causal" if k == 0 else "")
                    assert st.tested == (k > 0)
                    known[pos] = x
                    continue
                assert k > 0, "the first draft of a window is always kept"
                assert st.tested and st.note == f"acceptance probability {min(1.0, q[x] / p[k][x]):.4f}"
                st = take({StepKind.RESAMPLE})
                y = st.tokens[0]
                assert st.positions == [pos] and q.get(y, 0) > p[k].get(y, 0)  # residual max(q - p, 0) > 0
                assert st.p == [None] and st.q == [approx(q[y])] and st.note == "residual max(q - p, 0)"
                assert st.tested
                chain[k] = y
                known[pos] = y
                stop = k + 1
                break
            s = stop
            if s == w:
                break
        i += s
        rnd += 1
    assert j == len(steps), f"{len(steps) - j} steps after the last decision"
    assert counter.calls == approx(n_nc * cfg.nc_share + n_c * cfg.causal_share)
    assert counter.best == counter.calls and counter() == counter.calls
    assert model.nc_inputs == want_nc
    assert model.causal_inputs == want_causal


def full_windows(m: int, dtau: float, window: str) -> list[int]:
    """The windows of a run in which no draft is dropped."""
    out, i = [], 0
    while i < m:
        out.append(hand_window(i, m, dtau, window))
        i += out[-1]
    return out


# 4 masked positions (0, 2, 3, 4) over 3 symbols: 81 outcomes; 3 masked (0, 1, 3): 27 outcomes
FOUR = dict(length=5, visible={1: "b"})
THREE = dict(length=4, visible={2: "a"})
SELFSPEC_CASES = [  # (input, word start, order, dtau, window, inner, temperature, runs)
    (FOUR, None, [4, 0, 3, 2], 1.0, "linear", 1, 0.7, 900),  # one window, drafts dropped after one loop
    (FOUR, 2, [2, 4, 0, 3], 0.6, "cosine", 2, 1.0, 900),  # windows of 1 then 3
    (THREE, 3, [1, 3, 0], 0.7, "linear", 1, 1.3, 600),  # windows of 2 then 1
    (THREE, 0, [3, 0, 1], 1.0, "linear", 3, 1.0, 600),  # one window, never dropped
]


def _case_id(case):
    inp, ws, order, dtau, window, inner, t, _ = case
    return f"{len(order)}masked-ws{ws}-{window}{dtau}-inner{inner}-T{t}"


@pytest.mark.parametrize("case", SELFSPEC_CASES, ids=[_case_id(c) for c in SELFSPEC_CASES])
def test_self_spec_is_its_exact_law(case):
    """G-test of self-spec's outcomes along a given order against the law enumerated from the tables,
    each run's trace replayed step by step; the paths under test (rejections, dropped drafts, several
    windows) happen."""
    inp, ws, order, dtau, window, inner, temperature, n = case
    mi = constrained(inp["length"], inp["visible"], ws)
    law = selfspec_law(TableHybrid(), mi, order, dtau, window, inner, temperature)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    counts: collections.Counter = collections.Counter()
    rejected = dropped = 0
    for seed in range(n):
        steps, _, _ = run_selfspec(mi, seed, order, dtau, window, inner, temperature)
        counts[outcome(mi, steps)] += 1
        rejected += any(s.kind == StepKind.REJECT for s in steps)
        dropped += sum(s.kind == StepKind.NC_PASS for s in steps) > len(full_windows(len(order), dtau, window))
    assert rejected > n // 10
    assert (dropped > n // 20) == (inner < max(full_windows(len(order), dtau, window)) - 1)
    p = g_test(counts, law, n)
    assert p > PASS, f"G-test p = {p:.2e}"


def test_fixtures_have_strong_dependence():
    """Every causal factor moves by TV >= 0.1 with the chain token before it, and the non-causal
    rows with the tokens decided before (so a wrong context changes the law), and draft and target
    rows disagree (so rejections happen)."""
    model = TableHybrid()
    for inp, ws, order, *case_knobs, _ in SELFSPEC_CASES:
        mi = constrained(inp["length"], inp["visible"], ws)
        base = known_of(mi)
        worst_c = worst_nc = worst_gap = 1.0
        for r in range(1, len(order)):
            for stem in itertools.product(SYMBOLS, repeat=r - 1):
                chain = list(zip(order[: r - 1], stem))
                rows = [causal_probs(model, mi, order[r], base, chain + [(order[r - 1], a)]) for a in SYMBOLS]
                nc = [nc_probs(model, mi, order[r], {**base, **dict(chain), order[r - 1]: a}) for a in SYMBOLS]
                worst_c = min(worst_c, max(tv(x, y) for x in rows for y in rows))
                worst_nc = min(worst_nc, max(tv(x, y) for x in nc for y in nc))
                worst_gap = min(worst_gap, max(tv(x, y) for x, y in zip(rows, nc)))
        assert worst_c >= 0.1 and worst_nc >= 0.1 and worst_gap >= 0.1, (worst_c, worst_nc, worst_gap)
        law = selfspec_law(model, mi, order, *case_knobs)
        assert max(law.values()) <= 0.5  # no dominant outcome


def tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(t, 0.0) - b.get(t, 0.0)) for t in set(a) | set(b))


def test_self_spec_draws_a_uniform_order_when_none_is_given():
    """Without an order: the decode order is a uniform permutation of the masked positions, drawn
    first from the run's generator (the same run as random_order on a twin generator, then the given
    order), and the outcomes follow the law averaged over all orders."""
    mi = constrained(**THREE, word_start=1)
    orders = [list(o) for o in itertools.permutations(mi.masked)]
    kw = dict(dtau=0.7, window="linear", inner=1, temperature=1.0)
    law: dict = collections.defaultdict(float)
    for o in orders:
        for key, pr in selfspec_law(TableHybrid(), mi, o, **kw).items():
            law[key] += pr / len(orders)
    counts: collections.Counter = collections.Counter()
    seen: collections.Counter = collections.Counter()
    n = 700
    for seed in range(n):
        steps, model, counter = run_selfspec(mi, seed, None, **kw)
        twin = torch.Generator().manual_seed(seed)
        order = random_order(mi, twin)
        assert sorted(order) == mi.masked
        decided = [p for s in steps if s.kind in DECIDING_KINDS for p in s.positions]
        assert decided == order  # positions get decided along sigma
        if seed < 60:  # the rest of the run is the run along that order on the advanced generator
            rec = Recorder(texts_one, counter2 := CallCounter())
            again = list(self_spec(TableHybrid(), mi, rec, twin, kw["temperature"], kw["dtau"], kw["window"],
                                   kw["inner"], counter2, order=order))
            assert [(s.kind, s.positions, s.tokens, s.p, s.q, s.calls, s.note) for s in again] == \
                [(s.kind, s.positions, s.tokens, s.p, s.q, s.calls, s.note) for s in steps]
            replay_selfspec(model, mi, order, steps, counter, **kw)
        seen[tuple(order)] += 1
        counts[outcome(mi, steps)] += 1
    assert g_test(seen, {tuple(o): 1 / len(orders) for o in orders}, n) > PASS
    assert g_test(counts, dict(law), n) > PASS


def test_random_order_is_uniform_and_seeded():
    mi = constrained(**FOUR)
    seen = collections.Counter(tuple(random_order(mi, torch.Generator().manual_seed(s))) for s in range(2400))
    perms = {o: 1 / 24 for o in itertools.permutations(mi.masked)}
    assert g_test(seen, perms, 2400) > PASS
    assert random_order(mi, torch.Generator().manual_seed(3)) == random_order(mi, torch.Generator().manual_seed(3))


def test_inner_loop_limit_and_first_draft():
    """One window over 4 positions: with N inner loops at most N causal passes, and a window left
    undecided only after exactly N of them, ending on a resample; the first draft of every window is
    kept untested, its p equal to its q."""
    mi = constrained(**FOUR)
    order = [3, 0, 4, 2]
    for inner in (1, 2, 3):
        short = 0
        for seed in range(150):
            steps, model, _ = run_selfspec(mi, seed, order, 1.0, "linear", inner, 1.0)
            rounds = collections.defaultdict(list)
            for s in steps:
                rounds[s.round].append(s)
            for group in rounds.values():
                causal = sum(s.kind == StepKind.CAUSAL_PASS for s in group)
                drafted = len(group[1].positions)
                decided = sum(s.kind in DECIDING_KINDS for s in group)
                first = [s for s in group if s.kind in DECIDING_KINDS][0]
                assert first.kind == StepKind.ACCEPT and not first.tested and first.p == first.q
                assert 1 <= causal <= inner or drafted == 1
                if decided < drafted:
                    short += 1
                    assert causal == inner and group[-1].kind == StepKind.RESAMPLE
        assert short > 10 or inner == 3


def test_one_position_window_needs_no_causal_pass():
    """dtau small: every window holds one position, whose target is its own non-causal row: no
    causal pass, one non-causal pass per position, calls = positions x nc_share."""
    mi = constrained(**FOUR)
    steps, model, counter = run_selfspec(mi, 0, [2, 0, 4, 3], 0.1, "linear", 2, 1.0)
    assert [s.kind for s in steps] == [StepKind.NC_PASS, StepKind.DRAFT, StepKind.ACCEPT] * 4
    assert counter.calls == 4 * 0.625 and model.causal_inputs == []


#: the knobs the catalogue's hybrid entries are run with below (each entry takes those it reads)
HYBRID_KNOBS = {"temperature": 0.8, "dtau": 0.6, "window": "cosine", "inner": 2, "steps": 3}


def hybrid_ctx(model, mi, seed, kind="hybrid"):
    lm = types.SimpleNamespace(model=model, kind=kind, name="table-hybrid")
    ctx = types.SimpleNamespace(lm=lm, mi=mi, gen=torch.Generator().manual_seed(seed))
    ctx.rec = Recorder(texts_one, lambda: ctx.counter())
    return ctx


def _reads(spec) -> dict:
    return {n: HYBRID_KNOBS[n] for n in spec.reads}


def test_catalogue_entries_run_the_samplers_with_the_runs_knobs():
    """The catalogue's run functions read the run's knobs, install a fresh call counter and refuse a
    model that is not a hybrid; the entries' fields are what the catalogue promises."""
    mi = constrained(**FOUR, word_start=0)
    for seed in range(3):
        ctx = hybrid_ctx(TableHybrid(), mi, seed)
        got = list(selfspec_mod.SPEC.run(ctx, **_reads(selfspec_mod.SPEC)))
        twin = torch.Generator().manual_seed(seed)
        order = random_order(mi, twin)
        counter = CallCounter()
        want = list(self_spec(TableHybrid(), mi, Recorder(texts_one, counter), twin, 0.8, 0.6, "cosine", 2, counter,
                              order=order))
        assert [(s.kind, s.tokens, s.p, s.q, s.calls) for s in got] == [(s.kind, s.tokens, s.p, s.q, s.calls) for s in want]
        assert ctx.counter.calls == counter.calls > 0
        ctx = hybrid_ctx(TableHybrid(), mi, seed)
        got = list(mdm_mod.SPEC.run(ctx, **_reads(mdm_mod.SPEC)))
        counter = CallCounter()
        want = list(mdm(TableHybrid(), mi, Recorder(texts_one, counter), torch.Generator().manual_seed(seed), 0.8, 3,
                        counter))
        assert [(s.kind, s.tokens, s.p, s.calls, s.note) for s in got] == [(s.kind, s.tokens, s.p, s.calls, s.note) for s in want]
        assert (ctx.counter.calls, ctx.counter.best) == (counter.calls, counter.best)
    for spec in (selfspec_mod.SPEC, mdm_mod.SPEC):
        with pytest.raises(IncompatibleModelsError, match="table-hybrid is a asarm model; this sampler needs a hybrid"):
            spec.run(hybrid_ctx(TableHybrid(), mi, 0, kind="asarm"), **_reads(spec))
    s = selfspec_mod.SPEC
    assert (s.name, s.kind, s.cache, s.reads, s.calls_bounded, s.second) == \
        ("self-spec", "hybrid", False, ("dtau", "window", "inner", "temperature"), False, None)
    assert s.default_steps == 32 and s.help.startswith("Self-speculative")
    s = mdm_mod.SPEC
    assert (s.name, s.kind, s.cache, s.reads, s.calls_bounded, s.second) == \
        ("mdm", "hybrid", False, ("steps", "temperature"), False, None)
    assert s.default_steps == 32 and s.help.startswith("Masked diffusion")


# ------------------------------------------------------------------------------- MDM
def hand_remaining(m: int, steps: int) -> list[int]:
    """Positions still masked after step s of the cosine grid: round(m cos(pi s / 2T)), 0 at T."""
    return [round(m * math.cos(math.pi * s / (2 * steps))) for s in range(steps)] + [0]


def test_cosine_grid_against_hand_values():
    assert hand_remaining(3, 1) == [3, 0]
    assert hand_remaining(3, 2) == [3, 2, 0]  # 3 cos(pi/4) = 2.12
    assert hand_remaining(3, 3) == [3, 3, 2, 0]  # 2.60, 1.50 (half to even)
    assert hand_remaining(3, 12) == [3, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 0, 0]
    assert hand_remaining(2, 4) == [2, 2, 1, 1, 0]  # 1.85, 1.41, 0.77


def mdm_law(model, mi, steps, temperature) -> dict[tuple[int, ...], float]:
    """MDM's law from its definition: per step of the grid a uniformly random subset of the schedule's
    size among the unrevealed positions, each of its tokens from the non-causal row given what is
    revealed (factorized)."""
    remaining = hand_remaining(len(mi.masked), steps)
    out: dict = collections.defaultdict(float)

    def walk(s, known, unrevealed, prob):
        if s > steps:
            out[tuple(known[p] for p in mi.masked)] += prob
            return
        n = remaining[s - 1] - remaining[s]
        subsets = list(itertools.combinations(unrevealed, n))
        for sub in subsets:
            rows = [nc_probs(model, mi, pos, known, temperature) for pos in sub]
            for toks in itertools.product(*[list(r) for r in rows]):
                pr = prob / len(subsets) * math.prod(r[t] for r, t in zip(rows, toks))
                walk(s + 1, {**known, **dict(zip(sub, toks))}, [p for p in unrevealed if p not in sub], pr)

    walk(1, known_of(mi), list(mi.masked), 1.0)
    return dict(out)


def run_mdm(mi, steps, seed, temperature=1.0):
    model = TableHybrid()
    counter = CallCounter()
    trace = list(mdm(model, mi, Recorder(texts_one, counter), torch.Generator().manual_seed(seed), temperature, steps,
                     counter))
    replay_mdm(model, mi, steps, trace, counter, temperature)
    return trace, model, counter


def replay_mdm(model, mi, steps, trace, counter, temperature) -> None:
    """Every MDM step against the grid and the tables: one pass step per grid step (round s - 1) whose
    calls grow by nc_share, best case only on steps that reveal; the reveal of the schedule's size,
    at unrevealed positions in increasing order, p from the non-causal row given what is revealed;
    the notes' numbers; a network pass only when the input changed."""
    share = model.config.nc_share
    remaining = hand_remaining(len(mi.masked), steps)
    known, unrevealed = known_of(mi), list(mi.masked)
    calls = best = 0.0
    j, want_nc, changed = 0, [], True
    for s in range(1, steps + 1):
        n = remaining[s - 1] - remaining[s]
        calls += share
        best += share if n else 0.0
        if changed:
            want_nc.append([CODEC.bos_id] + [known.get(p, CODEC.mask_id) for p in range(len(mi.tokens))])
        st = trace[j]
        j += 1
        assert (st.kind, st.round, st.positions) == (StepKind.MDM_PASS, s - 1, [])
        assert st.calls == approx(calls)
        assert st.note == f"step {s}/{steps}: reveal {n} of {len(unrevealed)}; best-case calls {best:g}"
        changed = bool(n)
        if not n:
            continue
        st = trace[j]
        j += 1
        assert (st.kind, st.round) == (StepKind.REVEAL, s - 1) and st.calls == approx(calls)
        assert len(st.positions) == n and st.positions == sorted(st.positions) and set(st.positions) <= set(unrevealed)
        assert st.texts == texts(st.tokens) and st.q == [None] * n and st.tested
        assert st.p == [approx(nc_probs(model, mi, pos, known, temperature)[t]) for pos, t in zip(st.positions, st.tokens)]
        known.update(zip(st.positions, st.tokens))
        unrevealed = [p for p in unrevealed if p not in st.positions]
        assert st.note == (f"raw calls {calls:g}, best-case calls {best:g}" if not unrevealed else "")
    assert j == len(trace) and not unrevealed
    assert (counter.calls, counter.best) == (approx(calls), approx(best))
    counts = trace_counts(trace)
    assert counts["calls"] == approx(calls) and counts["calls_best"] == approx(best)
    assert model.nc_inputs == want_nc


MDM_CASES = [(THREE, 1, 1, 1.0, 300), (THREE, 0, 2, 1.0, 700), (THREE, 3, 3, 0.6, 700), (FOUR, 2, 12, 1.0, 900)]


@pytest.mark.parametrize("case", MDM_CASES, ids=[f"{len(c[0]['visible'])}-ws{c[1]}-T{c[2]}-t{c[3]}" for c in MDM_CASES])
def test_mdm_is_its_exact_law(case):
    """G-test of MDM's outcomes against its law enumerated from the tables, every trace replayed;
    the subset revealed at the first productive step is uniform."""
    inp, ws, steps, temperature, n = case
    mi = constrained(inp["length"], inp["visible"], ws)
    law = mdm_law(TableHybrid(), mi, steps, temperature)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    counts: collections.Counter = collections.Counter()
    first: collections.Counter = collections.Counter()
    for seed in range(n):
        trace, _, _ = run_mdm(mi, steps, seed, temperature)
        counts[outcome(mi, trace)] += 1
        first[tuple(next(s for s in trace if s.kind == StepKind.REVEAL).positions)] += 1
    assert g_test(counts, law, n) > PASS
    size = len(next(iter(first)))
    subsets = list(itertools.combinations(mi.masked, size))
    assert g_test(first, {c: 1 / len(subsets) for c in subsets}, n) > PASS or len(subsets) == 1


# ------------------------------------------------------------------------------- diffusion drafter
def drafter_reference(model, known: list, positions, steps, temperature, drafts):
    """The drafter's inputs and rows for given drafts: the round's positions are revealed left to right
    in chunks of the cosine grid's sizes; each chunk is one non-causal pass on the known tokens and the
    drafts of earlier chunks (never those of its own chunk or later)."""
    remaining = hand_remaining(len(positions), steps)
    have = {i: t for i, t in enumerate(known) if t is not None}
    inputs, rows, done = [], [], 0
    for s in range(1, steps + 1):
        n = remaining[s - 1] - remaining[s]
        if not n:
            continue
        inputs.append([CODEC.bos_id] + [have.get(p, CODEC.mask_id) for p in range(len(known))])
        chunk = positions[done: done + n]
        rows += [nc_probs(model, types.SimpleNamespace(word_starts=[], not_word_start=None), pos, have, temperature)
                 for pos in chunk]
        have.update(zip(chunk, drafts[done: done + n]))
        done += n
    return inputs, rows


def drafter_law(model, known, positions, steps, temperature) -> dict[tuple[int, ...], float]:
    out = {}
    for combo in itertools.product(model.symbols, repeat=len(positions)):
        _, rows = drafter_reference(model, known, positions, steps, temperature, list(combo))
        out[combo] = math.prod(r[t] for r, t in zip(rows, combo))
    return out


@pytest.mark.parametrize("steps,temperature", [(1, 1.0), (2, 0.7), (4, 1.0), (12, 1.4)])
def test_diffusion_drafter_rows_depend_on_context_and_earlier_chunks_only(steps, temperature):
    """propose(): the inputs the hybrid saw, the rows returned (one per position, in order), the calls
    spent (nc_share per pass) and the pass counter, against the reference; the drafts follow the law
    of the chunked draws (G-test)."""
    known = [None, CODEC.encode("b")[0], None, None, CODEC.encode("a")[0], None]
    positions = [0, 2, 3, 5]
    model = TableHybrid()
    drafter = DiffusionDrafter(model, steps)
    assert drafter.passes == 0 and drafter.steps == steps and drafter.name == "diffusion"
    counts: collections.Counter = collections.Counter()
    n = 700
    gen = torch.Generator().manual_seed(steps)
    chunks = sum(1 for a, b in itertools.pairwise(hand_remaining(len(positions), steps)) if a != b)
    for r in range(n):
        model.nc_inputs.clear()
        drafts, rows, spent = drafter.propose(list(known), positions, gen, temperature)
        inputs, want = drafter_reference(model, known, positions, steps, temperature, drafts)
        assert model.nc_inputs == inputs and len(inputs) == chunks
        assert len(drafts) == len(rows) == len(positions)
        for row, ref in zip(rows, want):
            assert row.dtype == torch.float64 and row.shape == (CODEC.vocab_size,)
            assert row.tolist() == [approx(ref.get(t, 0.0)) for t in range(CODEC.vocab_size)]
        assert spent == chunks * model.config.nc_share and drafter.passes == (r + 1) * chunks
        counts[tuple(drafts)] += 1
    assert g_test(counts, drafter_law(model, known, positions, steps, temperature), n) > PASS


def test_diffusion_drafter_default_temperature_is_one():
    known = [None, None, CODEC.encode("c")[0]]
    model = TableHybrid()
    drafts, rows, _ = DiffusionDrafter(model, 2).propose(known, [0, 1], torch.Generator().manual_seed(0))
    _, want = drafter_reference(model, known, [0, 1], 2, 1.0, drafts)
    assert [r.tolist() for r in rows] == [[approx(w.get(t, 0.0)) for t in range(CODEC.vocab_size)] for w in want]


def run_assd_diffusion(mi, k, steps, seed, temperature=1.0):
    oracle = TableOracle(mi, tuple(SYMBOLS), 2.5, 7)
    drafter = DiffusionDrafter(TableHybrid(), steps)
    extra, passes = [0.0], [0]
    rec = Recorder(texts_one, lambda: oracle.calls + extra[0])
    trace = list(assd_drafted(oracle, mi, rec, torch.Generator().manual_seed(seed), temperature, k, drafter, extra,
                              passes))
    return trace, oracle, drafter, extra, passes


@pytest.mark.parametrize("k,steps,temperature", [(2, 2, 1.0), (3, 4, 0.7)])
def test_assd_diffusion_is_the_asarms_law(k, steps, temperature):
    """assd-diffusion's output law is the AS-ARM's (tests/support/rounds_model.py's joint), whatever the
    hybrid drafts; the drafter's calls (nc_share per pass) are the run's extra calls."""
    mi = make_input(5, {1: "b"})
    law = exact_joint(mi, tuple(SYMBOLS), 2.5, 7, temperature)
    counts: collections.Counter = collections.Counter()
    n = 600
    for seed in range(n):
        trace, oracle, drafter, extra, passes = run_assd_diffusion(mi, k, steps, seed, temperature)
        counts[outcome(mi, trace)] += 1
        assert passes[0] == drafter.passes > 0 and extra[0] == drafter.passes * 0.625
        assert trace[-1].calls == oracle.calls + extra[0]
    assert g_test(counts, law, n) > PASS


def test_check_pair_refuses_other_kinds_and_vocabularies():
    from engine.inputs.tokenization import Codec, char_tokenizer

    asarm = types.SimpleNamespace(name="text-asarm", kind="asarm", codec=CODEC)
    ok = types.SimpleNamespace(name="text-hybrid", kind="hybrid", codec=CODEC)
    same_vocab = types.SimpleNamespace(name="copy", kind="hybrid", codec=Codec(CODEC.hf))
    other = Codec(char_tokenizer("abcd"))
    bad = types.SimpleNamespace(name="abcd-hybrid", kind="hybrid", codec=other)
    assert check_pair(asarm, ok) is None and check_pair(asarm, same_vocab) is None
    with pytest.raises(IncompatibleModelsError) as e:
        check_pair(asarm, bad)
    assert str(e.value) == (
        f"text-asarm and abcd-hybrid use different vocabularies ({CODEC.vocab_size} vs {other.vocab_size} tokens); "
        "assd-diffusion needs an AS-ARM and a hybrid trained on the same tokenizer (e.g. text-asarm with text-hybrid).")
    with pytest.raises(IncompatibleModelsError) as e:
        check_pair(asarm, asarm)
    assert str(e.value) == ("--draft-model text-asarm is a asarm model; assd-diffusion drafts with a hybrid "
                            "(masked diffusion) model.")


def test_runs_replay_from_their_seed_alone():
    """Every draw comes from the run's generator: the same seed gives the same trace whatever the
    global torch generator holds (the subsets MDM reveals, self-spec's order and the diffusion
    drafter's drafts included)."""
    mi = constrained(**FOUR, word_start=2)
    for seed in range(4):
        traces = []
        for glob in (1, 2):
            torch.manual_seed(glob)
            steps, _, _ = run_mdm(mi, 3, seed)
            counter = CallCounter()
            more = list(self_spec(TableHybrid(), mi, Recorder(texts_one, counter), torch.Generator().manual_seed(seed),
                                  1.0, 0.6, "cosine", 2, counter))
            drafts = DiffusionDrafter(TableHybrid(), 3).propose([None, A, None, None, B], [0, 2, 3],
                                                                torch.Generator().manual_seed(seed))[0]
            traces.append([(s.kind, s.positions, s.tokens, s.p, s.q, s.calls) for s in steps + more] + [drafts])
        assert traces[0] == traces[1]


# ------------------------------------------------------------------------------- hybrid_passes
def test_cosine_remaining_is_the_grid():
    for m, steps in ((3, 1), (3, 2), (3, 3), (3, 12), (2, 4), (4, 12), (17, 5), (256, 32)):
        assert cosine_remaining(m, steps) == hand_remaining(m, steps), (m, steps)
    assert cosine_remaining(5, 4) == [5, 5, 4, 2, 0]  # 4.62, 3.54, 1.91
    assert cosine_remaining(0, 3) == [0, 0, 0, 0]


def test_passes_apply_specials_layout_and_word_starts():
    """nc_pass: BOS then the tokens (model_ids), one input on the model's device, float64 logits
    with -inf at the special ids (the table gives them finite logits) and, with a MaskedInput, at the
    ids a word-start position bans (row i + 1 is position i); causal_pass: the chain's model
    positions and tokens on the model's device, row r for positions[r + 1], the same masks."""
    model = TableHybrid()
    mi = constrained(**FOUR, word_start=3)
    ids = model_ids(model, mi.tokens)
    assert ids == [CODEC.bos_id] + mi.tokens
    with torch.device("meta"):  # tensors the passes make must go to model.device, not the default one
        h, logits = nc_pass(model, ids, mi)
        h2, plain = nc_pass(model, ids)
        q = causal_pass(model, h, [2, 3, 0], [A, B, C], mi)
        q_plain = causal_pass(model, h, [2, 3, 0], [A, B, C])
    assert model.nc_inputs == [ids, ids] and model.causal_inputs == [([3, 4, 1], [A, B, C], ids)] * 2
    assert logits.dtype == plain.dtype == q.dtype == torch.float64 and logits.device.type == "cpu"
    assert logits.shape == (len(ids), CODEC.vocab_size) and q.shape == (2, CODEC.vocab_size)
    known = known_of(mi)
    for r in range(len(ids)):
        pos = r - 1
        for t in range(CODEC.vocab_size):
            special = t in CODEC.special_ids
            assert (plain[r, t] == -math.inf) == special
            assert (logits[r, t] == -math.inf) == (special or (pos == 3 and t == C)), (r, t)
        if 0 <= pos:
            assert torch.softmax(logits[r], -1)[list(SYMBOLS)].tolist() == \
                [approx(nc_probs(model, mi, pos, known).get(t, 0.0)) for t in SYMBOLS]
    for r, pos in enumerate([3, 0]):
        chain = list(zip([2, 3, 0][: r + 1], [A, B, C][: r + 1]))
        assert torch.softmax(q[r], -1)[list(SYMBOLS)].tolist() == \
            [approx(causal_probs(model, mi, pos, known, chain).get(t, 0.0)) for t in SYMBOLS]
        assert [bool(q_plain[r, t] == -math.inf) for t in range(CODEC.vocab_size)] == \
            [t in CODEC.special_ids for t in range(CODEC.vocab_size)]
    assert (q[0, C] == -math.inf) and not (q[1, C] == -math.inf)  # the ban is position 3's only
    assert torch.equal(h, h2)


def test_call_counter_and_the_hybrid_check():
    c = CallCounter()
    assert (c.calls, c.best, c()) == (0.0, 0.0, 0.0)
    c.calls += 1.5
    assert c() == 1.5
    require_hybrid(types.SimpleNamespace(name="x", kind="hybrid"))
    require_hybrid(types.SimpleNamespace(name="x"))  # no kind: taken as a hybrid
    with pytest.raises(IncompatibleModelsError) as e:
        require_hybrid(types.SimpleNamespace(name="text-asarm", kind="asarm"))
    assert str(e.value) == ("text-asarm is a asarm model; this sampler needs a hybrid "
                            "(self-speculative masked diffusion) model.")
    ctx = types.SimpleNamespace(lm=types.SimpleNamespace(name="h", kind="hybrid"))
    counter = hybrid_counter(ctx)
    assert ctx.counter is counter and isinstance(counter, CallCounter) and counter() == 0.0
    with pytest.raises(IncompatibleModelsError):
        hybrid_counter(types.SimpleNamespace(lm=types.SimpleNamespace(name="a", kind="asarm")))


@pytest.mark.parametrize("wrong", ["residual_from_q", "accept_every_draft"])
def test_the_self_spec_g_test_sees_wrong_acceptance_rules(monkeypatch, wrong):
    """The law test has the power to see realistic bugs by itself (trace replay off): resampling
    from q instead of the residual, or keeping every draft (issue 29)."""
    from engine.exactness import wrong_samplers

    monkeypatch.setattr(selfspec_mod, "speculative_accept", getattr(wrong_samplers, wrong))
    inp, ws, order, dtau, window, inner, temperature, _ = SELFSPEC_CASES[0]
    mi = constrained(inp["length"], inp["visible"], ws)
    law = selfspec_law(TableHybrid(), mi, order, dtau, window, inner, temperature)
    n = 900
    counts = collections.Counter(
        outcome(mi, run_selfspec(mi, seed, order, dtau, window, inner, temperature, check=False)[0]) for seed in range(n))
    assert g_test(counts, law, n) < 1e-6
