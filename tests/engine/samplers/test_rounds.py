"""Every AS-ARM sampler's round logic against a hand-built model with known conditionals.

The reference joint is multiplied out from the model's table (tests/support/rounds_model.py), not from
the oracle or a sampler. The fixtures have strong dependence (each conditional moves by TV >= 0.1
with the token before it) and k below the number of masked positions, so rounds follow rounds and
every stopping point of a round feeds the next one; one case runs k = 5 over 6 masked positions.
The table model is a dictionary look-up, so thousands of runs take seconds; seeds are fixed, so
each p-value is a deterministic number.
"""

from __future__ import annotations

import collections
import importlib
import time

import pytest
import torch

from engine.samplers.assd import assd, assd_drafted, assd_pipelined, next_first_is_exact, pipelined_queries
from engine.samplers.assd_reuse import assd_reuse
from engine.samplers.drafters import NgramDrafter
from engine.samplers.ngram_prior import CorpusBigram, count
from engine.samplers.sequential import sequential
from engine.trace import DECIDING_KINDS, PASS_KINDS, StepKind
from tests.support.rounds_model import CODEC, SYMBOLS, TableOracle, dependence, exact_joint, make_input, recorder
from tests.support.tiny import g_test

assd_mod = importlib.import_module("engine.samplers.assd")

PASS = 1e-3
SCALE, SALT = 2.5, 7
# 4 masked positions (0, 2, 3, 5) over 3 symbols: 81 outcomes
FOUR = ({1: "b", 4: "a"}, 6, tuple(SYMBOLS))
# 6 masked positions over 2 symbols (64 outcomes): room for k = 5 with rounds after it
SIX = ({0: "c"}, 7, tuple(SYMBOLS[:2]))


#: a corpus prior over the fixtures' symbols: each symbol's follower is the next one (a -> b -> c -> a)
CYCLE_PRIOR = CorpusBigram(*count(torch.tensor(SYMBOLS * 20), CODEC.vocab_size, CODEC.special_ids))


def run_sampler(name: str, mi, symbols, k: int, seed: int, temperature: float = 1.0):
    oracle = TableOracle(mi, symbols, SCALE, SALT)
    rec = recorder(oracle)
    gen = torch.Generator().manual_seed(seed)
    extra = [0.0]
    if name == "sequential":
        steps = sequential(oracle, mi, rec, gen, temperature)
    elif name in ("assd", "assd-bonus"):
        steps = assd(oracle, mi, rec, gen, temperature, k, bonus=name == "assd-bonus")
    elif name == "assd-pipelined":
        steps = assd_pipelined(oracle, mi, rec, gen, temperature, k)
    elif name == "assd-reuse":
        steps = assd_reuse(oracle, mi, rec, gen, temperature, k)
    elif name.startswith("assd-ngram"):  # "assd-ngram@0.5": with that confidence (plain: 0, a draft per position);
        # "+prior": with a corpus prior whose followers are sure (a -> b -> c -> a), so rounds draft often
        setting, _, prior = name.partition("+")
        confidence = float(setting.partition("@")[2] or 0)
        steps = assd_drafted(oracle, mi, rec, gen, temperature, k, NgramDrafter(
            vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids, confidence=confidence,
            prior=CYCLE_PRIOR if prior else None), extra)
    else:
        raise AssertionError(name)
    return list(steps), oracle


def outcome(mi, steps) -> tuple[int, ...]:
    decided = {p: t for s in steps if s.kind in DECIDING_KINDS for p, t in zip(s.positions, s.tokens)}
    return tuple(decided[p] for p in mi.masked)


def check_trace(mi, steps, oracle, k: int) -> None:
    """Rules every run obeys whatever the random draws: each masked position decided once, in
    lattice order, to the token the oracle was told; calls never exceed the masked tokens; the
    calls counter of the trace follows the oracle's."""
    decided = [(p, t) for s in steps if s.kind in DECIDING_KINDS for p, t in zip(s.positions, s.tokens)]
    assert [p for p, _ in decided] == mi.masked
    assert decided == oracle.committed
    assert oracle.calls <= len(mi.masked)
    assert steps[-1].calls == oracle.calls
    passes = [s for s in steps if s.kind in PASS_KINDS]
    assert [s.calls for s in passes if s.kind == StepKind.DENSITY_PASS or s.kind == StepKind.DRAFT_PASS] == \
        list(range(1, oracle.calls + 1))
    for s in steps:
        assert len(s.positions) == len(s.tokens) == len(s.p) == len(s.q) == len(s.texts)
        assert s.texts == [CODEC.hf.convert_ids_to_tokens(t) for t in s.tokens]
        if s.kind == StepKind.DRAFT:
            assert 1 <= len(s.positions) <= k


SAMPLE_CASES = [
    ("sequential", FOUR, 1, 1.0, 1500),
    ("assd", FOUR, 2, 1.0, 1500),
    ("assd", FOUR, 3, 0.6, 1500),
    ("assd-bonus", FOUR, 2, 1.0, 1500),
    ("assd-bonus", FOUR, 3, 1.0, 1500),
    ("assd-pipelined", FOUR, 2, 1.0, 1500),
    ("assd-pipelined", FOUR, 3, 1.6, 1500),
    ("assd-ngram", FOUR, 2, 1.0, 1500),
    ("assd-ngram", FOUR, 3, 0.6, 1000),
    ("assd-pipelined", SIX, 5, 1.0, 2000),
    ("assd-reuse", FOUR, 2, 1.0, 1500),
    ("assd-reuse", FOUR, 3, 1.6, 1500),
    ("assd-reuse", SIX, 3, 1.0, 2000),
    ("assd-reuse", SIX, 5, 1.0, 2000),
    ("assd-bonus", SIX, 5, 1.0, 2000),
    ("assd-ngram", SIX, 5, 1.0, 1500),
    ("assd-ngram@0.5", FOUR, 3, 1.0, 1500),
    ("assd-ngram@0.5", SIX, 5, 1.0, 1500),
    ("assd-ngram@0.8", SIX, 3, 0.6, 1500),
    ("assd-ngram@0.3+prior", FOUR, 3, 1.0, 1500),
    ("assd-ngram+prior", SIX, 5, 1.0, 1500),
]


def _id(case):
    name, fix, k, t, _ = case
    return f"{name}-{len(make_input(fix[1], fix[0]).masked)}masked-k{k}-T{t}"


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[_id(c) for c in SAMPLE_CASES])
def test_sampler_is_exact(case):
    name, (visible, length, symbols), k, temperature, n = case
    mi = make_input(length, visible)
    assert k < len(mi.masked) or name == "sequential"
    exact = exact_joint(mi, symbols, SCALE, SALT, temperature)
    counts: collections.Counter = collections.Counter()
    for seed in range(n):
        steps, oracle = run_sampler(name, mi, symbols, k, seed, temperature)
        check_trace(mi, steps, oracle, k)
        counts[outcome(mi, steps)] += 1
    p = g_test(counts, exact, n)
    assert p > PASS, f"{name} k={k} T={temperature}: G-test p = {p:.2e}"


def test_a_confident_ngram_drafter_drafts_rounds_of_every_length():
    """The confidence cases above are exact over rounds of every shape: no draft (a sequential
    step, recorded as SAMPLE), fewer drafts than k, and k drafts."""
    mi = make_input(SIX[1], SIX[0])
    shapes = collections.Counter()
    for seed in range(60):
        steps, _ = run_sampler("assd-ngram@0.5", mi, SIX[2], 5, seed)
        rounds = collections.defaultdict(list)
        for s in steps:
            rounds[s.round].append(s)
        for r in rounds.values():
            drafted = sum(len(s.positions) for s in r if s.kind == StepKind.DRAFT)
            left = len(mi.masked) - sum(len(s.positions) for s in steps if s.kind in DECIDING_KINDS and s.round < r[0].round)
            shape = "none" if drafted == 0 else "all" if drafted == min(5, left) else "some"
            shapes[shape] += 1
            if shape == "none":  # one exact row: a sequential step, its token's probability recorded
                assert [s.kind for s in r] == [StepKind.DENSITY_PASS, StepKind.SAMPLE]
                assert "not sure enough" in r[0].note and 0 < r[1].q[0] <= 1
            else:
                draft = next(s for s in r if s.kind == StepKind.DRAFT)
                density = next(s for s in r if s.kind == StepKind.DENSITY_PASS)
                assert density.note == f"verify {drafted} drafts"
                assert (f"({drafted} of 5: not sure enough of the next)" in draft.note) == (shape == "some"), draft.note
    assert shapes["none"] and shapes["some"] and shapes["all"], shapes


class PeekingNgram(NgramDrafter):
    """Wrong on purpose: drafts, then drops a draft (and the rest of the round) when the token it
    drew is unlikely under its own row: the decision reads draft j itself."""

    def propose(self, known, positions, gen, temperature=1.0):
        drafts, rows, spent = super().propose(known, positions, gen, temperature)
        keep = next((i for i, (d, r) in enumerate(zip(drafts, rows)) if float(r[d]) < 0.5), len(drafts))
        return drafts[:keep], rows[:keep], spent


def test_a_drafter_that_stops_because_of_its_own_draft_fails_the_exactness_test():
    """The contract's rule (engine/samplers/drafter_contract.py): whether position j is drafted may
    not depend on draft j. A drafter that drops its unlikely drafts samples a visibly wrong law."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    exact = exact_joint(mi, symbols, SCALE, SALT)
    counts: collections.Counter = collections.Counter()
    n = 1500
    for seed in range(n):
        oracle = TableOracle(mi, symbols, SCALE, SALT)
        steps = list(assd_drafted(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), 1.0, 3,
                                  PeekingNgram(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids), [0.0]))
        check_trace(mi, steps, oracle, 3)
        counts[outcome(mi, steps)] += 1
    assert g_test(counts, exact, n) < PASS


def test_fixtures_have_strong_dependence():
    for visible, length, symbols in (FOUR, SIX):
        mi = make_input(length, visible)
        assert dependence(mi, symbols, SCALE, SALT) >= 0.1
        assert max(exact_joint(mi, symbols, SCALE, SALT).values()) <= 0.5  # no dominant outcome


@pytest.mark.parametrize("mutant", ["pipelined: next first row exact after a last-draft rejection",
                                    "pipelined: next first row always exact"])
def test_pipelined_mutants_are_caught(monkeypatch, mutant):
    """The G-test above has the power to see the pipelined sampler's realistic bugs (issue 29)."""
    if mutant.endswith("rejection"):
        monkeypatch.setattr(assd_mod, "next_first_is_exact", lambda stopped, drafted: stopped >= drafted - 1)
    else:
        monkeypatch.setattr(assd_mod, "next_first_is_exact", lambda stopped, drafted: True)
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    exact = exact_joint(mi, symbols, SCALE, SALT)
    counts = collections.Counter(outcome(mi, run_sampler("assd-pipelined", mi, symbols, 2, s)[0]) for s in range(2000))
    assert g_test(counts, exact, 2000) < 1e-6


def test_next_first_is_exact_only_after_a_full_accept():
    assert next_first_is_exact(3, 3) is True
    for stopped, drafted in ((2, 3), (1, 3), (0, 1), (1, 2)):
        assert next_first_is_exact(stopped, drafted) is False


def test_pipelined_queries_layout():
    """Density rows for drafts start..m-1 (each sees the drafts before it), then for every stopping
    point j the next round's proposal rows, seeing the drafts before j; a rejection at j skips j."""
    order = [0, 2, 3, 5, 6, 8]
    queries, nxt = pipelined_queries(order, 0, [0, 2, 3], 1, 2)
    assert queries[:2] == [(2, 0), (3, 1)]
    assert nxt == {1: ([3, 5], 2), 2: ([5, 6], 4), 3: ([5, 6], 6)}
    assert queries[2:] == [(3, 0), (5, 0), (5, 1), (6, 1), (5, 2), (6, 2)]
    # from the start of a round (no exact first row) and near the end of the order
    queries, nxt = pipelined_queries(order, 3, [5, 6, 8], 0, 3)
    assert queries[:3] == [(5, 0), (6, 1), (8, 2)]
    assert nxt == {0: ([6, 8], 3), 1: ([8], 5), 2: ([], 6), 3: ([], 6)}
    assert queries[3:] == [(6, 0), (8, 0), (8, 1)]


@pytest.mark.parametrize("name", ["assd", "assd-bonus", "assd-pipelined", "assd-reuse", "assd-ngram"])
def test_round_shapes(name):
    """Per round: the drafts cover the next k undecided positions; calls per round as designed."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    for seed in range(40):
        for k in (1, 2, 5, 9):
            steps, oracle = run_sampler(name, mi, symbols, k, seed)
            check_trace(mi, steps, oracle, k)
            decided: list[int] = []
            rounds = collections.defaultdict(list)
            for s in steps:
                rounds[s.round].append(s)
            assert steps[0].round == 0 and sorted(rounds) == list(range(len(rounds)))  # rounds count 0, 1, 2, ...
            assert [s.round for s in steps] == sorted(s.round for s in steps)
            for r in sorted(rounds):
                group = rounds[r]
                drafts = [s for s in group if s.kind == StepKind.DRAFT]
                assert len(drafts) == 1
                m = len(drafts[0].positions)
                todo = [p for p in mi.masked if p not in decided]
                exact_first = r == 0 or not any(s.kind == StepKind.RESAMPLE for s in rounds.get(r - 1, []))
                for s in group:  # the notes the trace view shows say what each pass did
                    if s.kind == StepKind.DRAFT_PASS:
                        assert s.note == f"draft {m} positions in parallel"
                    elif s.kind == StepKind.DENSITY_PASS and name in ("assd", "assd-bonus"):
                        assert s.note == f"verify {m - 1} drafts"
                    elif s.kind == StepKind.DENSITY_PASS and name == "assd-ngram":
                        assert s.note == f"verify {m} drafts"
                    elif s.kind == StepKind.DENSITY_PASS and name == "assd-pipelined":
                        untested = sum(d.kind == StepKind.ACCEPT and not d.tested for d in group)
                        assert s.note == f"verify {m - untested} drafts, propose next round"
                    elif s.kind == StepKind.DENSITY_PASS and name == "assd-reuse":  # and the k positions after it
                        untested = sum(d.kind == StepKind.ACCEPT and not d.tested for d in group)
                        assert s.note == f"verify {m - untested} drafts, rows for {min(k, len(todo) - m)} beyond"
                    elif s.kind == StepKind.DRAFT and name == "assd-reuse":  # whose rows: stale after a rejection
                        assert s.note == "from the last call's rows" + ("" if exact_first else " (they saw a rejected draft)")
                    elif s.kind == StepKind.DRAFT and name == "assd-ngram":
                        assert s.note == "ngram drafts"  # whose drafts they are
                    elif s.kind == StepKind.ACCEPT and not s.tested:
                        assert s.note == ("first draft" if name in ("assd", "assd-bonus") else "exact row")
                assert drafts[0].positions == todo[: min(k, len(todo))]
                assert drafts[0].p == [pytest.approx(x) for x in drafts[0].p] and all(0 < x <= 1 for x in drafts[0].p)
                decided += [p for s in group if s.kind in DECIDING_KINDS for p in s.positions]
                kinds = [s.kind for s in group]
                if name in ("assd-pipelined", "assd-reuse"):
                    assert kinds.count(StepKind.DENSITY_PASS) <= 1 and kinds.count(StepKind.DRAFT_PASS) == (r == 0)
                elif name == "assd-ngram":
                    assert kinds.count(StepKind.DENSITY_PASS) == 1 and StepKind.DRAFT_PASS not in kinds
                else:
                    assert kinds.count(StepKind.DRAFT_PASS) == 1
                    assert kinds.count(StepKind.DENSITY_PASS) == (len(drafts[0].positions) > 1)
                # a round decides its accepted drafts, then at most one resampled or bonus token
                dec = [s for s in group if s.kind in DECIDING_KINDS]
                assert sum(s.kind in (StepKind.RESAMPLE, StepKind.BONUS) for s in dec) <= 1
                assert all(s.kind == StepKind.ACCEPT for s in dec[:-1])
                if any(s.kind == StepKind.RESAMPLE for s in dec):
                    assert [s.kind for s in group if s.kind in (StepKind.REJECT, StepKind.RESAMPLE)] == \
                        [StepKind.REJECT, StepKind.RESAMPLE]
                # the round's first token is committed untested (its proposal row is the exact target)
                # in plain ASSD always, in the pipelined one in round 0 and after a round that
                # accepted every draft; the n-gram drafter's rows are never exact
                first_exact = dec[0].kind == StepKind.ACCEPT and not dec[0].tested
                if name in ("assd", "assd-bonus"):
                    assert first_exact
                elif name in ("assd-pipelined", "assd-reuse"):
                    assert first_exact == exact_first, r
                else:
                    assert not first_exact
            # no pass after the last token is decided (a wasted call)
            assert steps[-1].kind in DECIDING_KINDS
            if k == 1 and name in ("assd", "assd-bonus"):
                assert oracle.calls == len(mi.masked)  # one draft per round: its pass is the only one
            if k >= len(mi.masked) and name in ("assd-pipelined", "assd-reuse"):
                assert oracle.calls <= len(mi.masked)


def test_accept_steps_carry_the_verdict():
    """ACCEPT/REJECT steps show p(draft), q(draft) and whether they were tested; the exact first
    row is recorded untested with p = q; a resample shows q of the kept token."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    kinds = collections.Counter()
    for seed in range(30):
        for name in ("assd", "assd-pipelined", "assd-reuse", "assd-bonus"):
            steps, _ = run_sampler(name, mi, symbols, 3, seed)
            for s in steps:
                kinds[(s.kind, s.tested, s.note.split(" ")[0] if s.note else "")] += 1
                if s.kind == StepKind.ACCEPT and not s.tested:
                    assert s.p == s.q and 0 < s.p[0] <= 1
                elif s.kind in (StepKind.ACCEPT, StepKind.REJECT):
                    assert s.tested and 0 < s.p[0] <= 1 and 0 <= s.q[0] <= 1
                    if s.kind == StepKind.ACCEPT:
                        assert s.q[0] > 0
                    else:
                        assert s.note.startswith("acceptance probability") and s.q[0] < s.p[0]
                elif s.kind in (StepKind.RESAMPLE, StepKind.BONUS, StepKind.SAMPLE):
                    assert s.p == [None] and 0 < s.q[0] <= 1
    assert kinds[(StepKind.RESAMPLE, True, "residual")] > 0
    assert kinds[(StepKind.BONUS, True, "free")] > 0
    assert any(k[0] == StepKind.ACCEPT and k[1] is False for k in kinds)
    assert any(k[0] == StepKind.ACCEPT and k[1] is True for k in kinds)


def test_drafted_extra_calls_and_bonus():
    """The n-gram drafter spends no network call; a fully accepted round takes the free row."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    bonus = 0
    for seed in range(30):
        oracle = TableOracle(mi, symbols, SCALE, SALT)
        extra = [0.0]
        steps = list(assd_drafted(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), 1.0, 2,
                                  NgramDrafter(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids), extra))
        assert extra == [0.0] and not any(s.kind == StepKind.MDM_PASS for s in steps)
        bonus += sum(s.kind == StepKind.BONUS for s in steps)
        # every density pass queries all drafts of its round plus (unless it is the last) the next position
        for qs in oracle.queries:
            assert [e for _, e in qs] == list(range(len(qs)))
    assert bonus > 0


class SpendingDrafter(NgramDrafter):
    name = "spender"

    def propose(self, known, positions, gen, temperature=1.0):
        drafts, rows, _ = super().propose(known, positions, gen, temperature)
        return drafts, rows, 0.25


def test_drafter_calls_are_added_and_shown():
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    oracle = TableOracle(mi, symbols, SCALE, SALT)
    extra = [1.0]
    steps = list(assd_drafted(oracle, mi, recorder(oracle), torch.Generator().manual_seed(0), 1.0, 2,
                              SpendingDrafter(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids), extra))
    rounds = {s.round for s in steps}
    passes = [s for s in steps if s.kind == StepKind.MDM_PASS]
    assert len(passes) == len(rounds) and extra == [1.0 + 0.25 * len(rounds)]
    assert all(s.note == "spender drafter: 0.25 calls" for s in passes)


class SlowDrafter(NgramDrafter):
    """Takes a known time per proposal, so the drafter's share of a round is measurable."""

    name = "slow"

    def propose(self, known, positions, gen, temperature=1.0):
        import time

        time.sleep(0.002)
        return super().propose(known, positions, gen, temperature)


def test_drafter_seconds_add_up_the_time_inside_propose_only():
    """bench assd's drafter ms per round: the time inside `propose`, added round by round to what
    the list held (a lower bound only: no test asserts how fast anything runs)."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    oracle = TableOracle(mi, symbols, SCALE, SALT)
    seconds = [1.0]
    t0 = time.perf_counter()
    steps = list(assd_drafted(oracle, mi, recorder(oracle), torch.Generator().manual_seed(0), 1.0, 2,
                              SlowDrafter(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids), [0.0], [0], seconds))
    wall = time.perf_counter() - t0
    rounds = len({s.round for s in steps})
    assert 1.0 + 0.002 * rounds <= seconds[0] <= 1.0 + wall  # added to what it held, never more than passed


@pytest.mark.parametrize("name", ["sequential", "assd", "assd-bonus", "assd-pipelined", "assd-ngram"])
def test_every_draw_comes_from_the_run_generator(name):
    """Same seed, same trace, whatever the global random state; another seed, another trace."""
    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    seen, kinds = set(), set()
    for seed in range(20):
        runs = []
        for glob in (1, 2):
            torch.manual_seed((12345, 987654321)[glob - 1])  # far apart: adjacent seeds start alike
            steps, _ = run_sampler(name, mi, symbols, 2, seed)
            runs.append([(s.kind, s.round, s.positions, s.tokens, s.p, s.q, s.calls) for s in steps])
        assert runs[0] == runs[1]
        seen.add(outcome(mi, steps))
        kinds |= {s.kind for s in steps}
    assert len(seen) > 2
    if name == "assd-bonus":
        assert StepKind.BONUS in kinds  # the free row's draw is covered too


def test_plain_assd_takes_no_bonus():
    """assd without `bonus` never samples the density pass's extra row (the catalogue's 'assd')."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    for seed in range(30):
        oracle = TableOracle(mi, symbols, SCALE, SALT)
        steps = list(assd(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), 1.0, 2))
        assert not any(s.kind == StepKind.BONUS for s in steps)
        assert all(len(q) == 1 for q in oracle.queries[1::2])  # k = 2: one density row, no extra row


def test_sequential_trace_is_one_round_per_token_with_the_exact_q():
    """Sequential decoding: round r queries one position (one call) and samples it; the q it shows is
    the model's conditional of the kept token, read here straight from the table."""
    import math

    from tests.support.rounds_model import table_logits

    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    known = frozenset((i, mi.tokens[i]) for i in mi.visible)
    for seed in range(10):
        steps, oracle = run_sampler("sequential", mi, symbols, 1, seed)
        assert [(s.kind, s.round) for s in steps] == [(k, r) for r in range(len(mi.masked))
                                                      for k in (StepKind.DENSITY_PASS, StepKind.SAMPLE)]
        ctx = known
        for r, pos in enumerate(mi.masked):
            passed, sample = steps[2 * r], steps[2 * r + 1]
            assert passed.note == "query 1 position" and passed.calls == r + 1
            assert sample.positions == [pos] and sample.p == [None]
            row = table_logits(pos, ctx, symbols, SCALE, SALT)
            z = sum(math.exp(x) for x in row if x > -math.inf)
            assert sample.q == [pytest.approx(math.exp(row[sample.tokens[0]]) / z, abs=1e-12)]
            ctx = ctx | {(pos, sample.tokens[0])}


def _ngram_rows_by_hand(known, positions, drafts):
    """The n-gram drafter's proposal rows written out from its definition: the context unigram
    (count + 0.1 for every non-special token, normalised) mixed 0.2 with the normalised bigram row
    of the previous token (0.8), where the previous token is the draft before it inside the round;
    position 0 and a previous token never seen before a non-special token take the unigram alone."""
    special = set(CODEC.special_ids)
    counts = collections.Counter(t for t in known if t is not None)
    uni = [0.0 if v in special else counts[v] + 0.1 for v in range(CODEC.vocab_size)]
    uni = [x / sum(uni) for x in uni]
    pairs = collections.Counter((known[i - 1], known[i]) for i in range(1, len(known))
                                if known[i - 1] is not None and known[i] is not None)
    work, rows = list(known), []
    for pos, tok in zip(positions, drafts):
        prev = work[pos - 1] if pos >= 1 else None
        big = [0.0 if v in special else pairs[(prev, v)] for v in range(CODEC.vocab_size)]
        if prev is None or sum(big) == 0:
            rows.append(uni)
        else:
            rows.append([0.8 * b / sum(big) + 0.2 * u for b, u in zip(big, uni)])
        work[pos] = tok
    return rows


def test_ngram_drafter_rows_by_hand():
    """The bigram drafter's proposal rows (see _ngram_rows_by_hand), each draft conditioning on the
    draft before it; rows in float64 to the last bits, no network call."""
    a, b, c = SYMBOLS
    s0 = CODEC.special_ids[0]
    cases = [  # (known, positions)
        ([a, b, a, b, None, None, c], [4, 5]),  # (a, b) twice, (b, a) once; c follows an unknown
        ([a, c, a, b, a, b, None, None], [6, 7]),  # a -> b twice and c once (counts, not presence); (a, c) at i = 1
        ([None, b, a, c, a, a, b, s0, c, a], [0]),  # position 0: no previous token, though the last one is known
        ([a, None, b, b, a, b], [1]),  # position 1 reads position 0
        ([b, s0, a, a, b, None], [5]),  # b was seen only before a special token: no bigram row
        ([c, a, b, None, None, None], [3, 4, 5]),  # a chain of three drafts
    ]
    for known, positions in cases:
        drafter = NgramDrafter(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids)
        for seed in range(12):
            drafts, rows, spent = drafter.propose(known, positions, torch.Generator().manual_seed(seed))
            assert spent == 0.0 and len(drafts) == len(rows) == len(positions)
            assert all(d not in CODEC.special_ids for d in drafts)
            for row, want in zip(rows, _ngram_rows_by_hand(known, positions, drafts)):
                assert row.dtype == torch.float64
                assert torch.allclose(row, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-15), \
                    (known, positions, drafts, row.tolist(), want)



class WatchingDrafter(NgramDrafter):
    """An n-gram drafter that writes down what the sampler hands it; with `counter`, its `passes`
    starts at 7 and moves by 2 a proposal, without, it has no `passes` attribute at all."""

    name = "watcher"

    def __init__(self, counter: bool):
        self.counter = counter
        super().__init__(vocab_size=CODEC.vocab_size, special_ids=CODEC.special_ids)
        self.seen: list[tuple[list[int | None], list[int], float]] = []
        if counter:
            self.passes = 7

    def __getattribute__(self, name):
        if name == "passes" and not object.__getattribute__(self, "counter"):
            raise AttributeError(name)  # hides NgramDrafter's class attribute
        return object.__getattribute__(self, name)

    def propose(self, known, positions, gen, temperature=1.0):
        self.seen.append((list(known), list(positions), temperature))
        if self.counter:
            self.passes += 2
        return super().propose(known, positions, gen, temperature)


@pytest.mark.parametrize("counter", [True, False])
def test_drafter_sees_every_decided_token_and_the_temperature(counter):
    """assd_drafted hands its drafter, each round, the visible tokens and every token decided so far
    (None elsewhere) and the run's temperature; drafter_passes adds what the drafter's own `passes`
    counter moved by (0 for a drafter without one)."""
    visible, length, symbols = SIX
    mi = make_input(length, visible)
    for seed in range(6):
        oracle = TableOracle(mi, symbols, SCALE, SALT)
        drafter = WatchingDrafter(counter)
        assert hasattr(drafter, "passes") == counter
        passes = [0]
        steps = list(assd_drafted(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), 0.6, 2,
                                  drafter, [0.0], passes))
        rounds = sorted({s.round for s in steps})
        assert len(drafter.seen) == len(rounds) > 1
        assert passes == [2 * len(rounds) if counter else 0]
        known: list[int | None] = [mi.tokens[i] if i in mi.visible else None for i in range(len(mi.tokens))]
        assert any(t is not None for t in known)
        for r, (seen, positions, temperature) in zip(rounds, drafter.seen):
            assert temperature == 0.6
            assert seen == known, (r, seen, known)
            assert positions == [p for p in mi.masked if known[p] is None][:2]
            for s in steps:
                if s.round == r and s.kind in DECIDING_KINDS:
                    for p, t in zip(s.positions, s.tokens):
                        known[p] = t


def test_assd_uses_the_accept_rule_it_is_given():
    """`accept` (the exactness check's deliberately wrong samplers) replaces the speculative test in
    every verification of plain ASSD: a rule that keeps every draft leaves no REJECT, while the
    default rule rejects some drafts on this fixture."""
    from engine.samplers.acceptance import Verdict

    def keep_all(draft, p_row, q_row, gen):
        return Verdict(accepted=True, token=draft, accept_prob=1.0, p_draft=float(p_row[draft]), q_draft=float(q_row[draft]),
                       q_token=float(q_row[draft]))

    visible, length, symbols = FOUR
    mi = make_input(length, visible)
    kinds = {True: collections.Counter(), False: collections.Counter()}
    for seed in range(30):
        for wrong in (True, False):
            oracle = TableOracle(mi, symbols, SCALE, SALT)
            steps = list(assd(oracle, mi, recorder(oracle), torch.Generator().manual_seed(seed), 1.0, 3,
                              accept=keep_all if wrong else None))
            kinds[wrong].update(s.kind for s in steps)
    assert kinds[True][StepKind.REJECT] == 0 and kinds[True][StepKind.ACCEPT] > 0
    assert kinds[False][StepKind.REJECT] > 0


@pytest.mark.parametrize("symbols_case,k", [(FOUR, 2), (FOUR, 3), (SIX, 5)])
def test_pipelined_rounds_run_the_output_head_only_where_needed(symbols_case, k):
    """Lean calls (docs/DESIGN.md §4): each pipelined call asks logits for exactly the drafts it
    verifies (one row per draft placed in it), and the next round's proposal rows reach the output
    head with that round's positions (the input's word-start rules are applied by position), as the
    trace's DRAFT steps of rounds 1, 2, ... show them."""
    visible, length, symbols = symbols_case
    mi = make_input(length, visible)
    for seed in range(40):
        steps, oracle = run_sampler("assd-pipelined", mi, symbols, k, seed)
        assert oracle.lean and all(rows == placed for placed, rows in oracle.lean), oracle.lean
        drafted_later = [s.positions for s in steps if s.kind == StepKind.DRAFT and s.round > 0]
        assert [p for p in oracle.head_positions if p] == drafted_later
        assert all(p is not None for p in oracle.head_positions)


# ------------------------------------------------------------ the catalogue's entries hand their knobs on
#: each AS-ARM entry this file drives, and the algorithm run_sampler calls for it
ENTRY_ALGORITHM = {"sequential": "sequential", "sequential-cache": "sequential", "assd": "assd",
                   "assd-bonus": "assd-bonus", "assd-cache": "assd", "assd-pipelined": "assd-pipelined",
                   "assd-reuse": "assd-reuse", "assd-ngram": "assd-ngram"}


@pytest.mark.parametrize("entry", list(ENTRY_ALGORITHM))
def test_each_catalogue_entry_runs_its_algorithm_with_the_knobs_it_is_given(entry):
    """An entry's run function (engine.samplers.SAMPLERS[name].run: the context plus the knobs as
    keyword arguments) hands the run's oracle, input, recorder, generator, k and temperature to its
    algorithm: its trace equals the algorithm's own on the table model, with a k and a temperature
    other than the table's defaults (so a dropped or swapped knob shows)."""
    import types

    from engine.params import KNOBS
    from engine.samplers import SAMPLERS

    visible, n, symbols = SIX
    mi = make_input(n, visible)
    k, temperature, seed = 2, 0.6, 11
    want, _ = run_sampler(ENTRY_ALGORITHM[entry], mi, symbols, k, seed, temperature)
    oracle = TableOracle(mi, symbols, SCALE, SALT)
    ctx = types.SimpleNamespace(oracle=oracle, mi=mi, rec=recorder(oracle), gen=torch.Generator().manual_seed(seed),
                                extra_calls=[0.0], drafter_passes=[0], drafter_seconds=[0.0],
                                lm=types.SimpleNamespace(codec=CODEC))
    spec = SAMPLERS[entry]
    knobs = {"k": k, "temperature": temperature, "confidence": 0.3}  # any other knob: the table's default
    if entry == "assd-ngram":
        want, _ = run_sampler("assd-ngram@0.3", mi, symbols, k, seed, temperature)
    got = list(spec.run(ctx, **{name: knobs.get(name, KNOBS[name].default) for name in spec.reads}))

    def shape(steps):
        return [(s.kind, tuple(s.positions), tuple(s.tokens)) for s in steps]

    assert shape(got) == shape(want)
    # bench assd's drafter share of a round: the entry hands the run's counter to its drafter
    assert (ctx.drafter_seconds[0] > 0) == (entry == "assd-ngram"), ctx.drafter_seconds
    confident = f"@{KNOBS['confidence'].default}" if entry == "assd-ngram" else ""
    defaults, _ = run_sampler(ENTRY_ALGORITHM[entry] + confident, mi, symbols, 5, seed, 1.0)
    assert shape(defaults) != shape(want)  # the table's defaults give another trace: the knobs are seen
