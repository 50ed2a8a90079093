"""The density oracle (engine/samplers/oracle.py) on tiny random models, against an independent
restatement of what it must answer: which oracle a model gets, every answer of the AS-ARM oracle
equal to the original forward (tests/support/reference_forward.py) given the decided tokens and the
drafts before each query, the cached oracles equal to the uncached ones through kept and rolled-back
drafts (and only new rows computed), the banned ids and the input's word-start rule on every row,
the lean call, and the counters bench assd reads. Seconds per test, so mutation testing runs it."""

from __future__ import annotations

import dataclasses
import itertools
import random
from types import SimpleNamespace

import pytest
import torch

import engine.samplers.oracle as oracle_mod
from engine.errors import IncompatibleModelsError
from engine.loading.registry import load
from engine.samplers.oracle import AsArmOracle, XLNetOracle, banned_ids, make_oracle
from tests.engine.models.test_xlnet_reference import random_xlnet
from tests.support.reference_forward import reference_forward
from tests.support.tiny import masked_input, save_tiny_asarm, tiny_codec

LENGTH = 7


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load(str(save_tiny_asarm(tmp_path_factory.mktemp("oracle") / "m", seed=3, length=LENGTH)))


def word_start_input(codec, visible: dict[int, str]):
    """A masked input whose position 2 must not take 'b' (the word-start rule's shape, on the tiny alphabet)."""
    mi = masked_input(codec, visible, LENGTH)
    ban = torch.zeros(codec.vocab_size, dtype=torch.bool)
    ban[codec.encode("b")[0]] = True
    return dataclasses.replace(mi, word_starts=[2], not_word_start=ban)


def reference(lm, mi, committed, drafts, queries) -> torch.Tensor:
    """What an AS-ARM oracle must answer, written out: BOS, the visible tokens (rank 0), the decided
    tokens (ranks 1..n), the drafts (n+1..); query (p, e) sees ranks up to n + e; special ids banned."""
    model, vis, n = lm.model, mi.visible, len(committed)
    ids = [model.config.bos_token_id] + [mi.tokens[i] for i in vis] + [t for _, t in committed + drafts]
    pos = [0] + [i + 1 for i in vis] + [p + 1 for p, _ in committed + drafts]
    rank = [0] * (1 + len(vis)) + list(range(1, n + len(drafts) + 1))

    def row(xs):
        return torch.tensor([xs], dtype=torch.long)

    with torch.no_grad():
        out = reference_forward(model, row(ids), row(pos), row(rank), row([p + 1 for p, _ in queries]),
                                row([n + 1 + e for _, e in queries]))[0].to(torch.float64)
    return mi.constrain(out.masked_fill(model.special_mask().cpu(), float("-inf")), [p for p, _ in queries])


def drive(codec, mi, k: int, seed: int, oracles, check):
    """ASSD-like rounds on every oracle alike: parallel rows, k drafts verified, an accepted prefix
    decided as drafted, then a rejection resampled and sometimes one more token decided without a
    call (so several decided tokens wait for the next call). `check(committed, drafts, queries, answers)`."""
    rnd = random.Random(seed)
    syms = codec.encode("abc")
    order, committed = list(mi.masked), []
    while order:
        drafts = [(p, rnd.choice(syms)) for p in order[:k]]
        for d, q in (([], [(p, 0) for p in order]), (drafts, [(p, e) for e, (p, _) in enumerate(drafts)])):
            check(list(committed), d, q, [o.call(d, q) for o in oracles])
        accept = rnd.randint(0, len(drafts))
        decided = drafts[:accept]
        if accept < len(drafts):
            p, t = drafts[accept]
            decided.append((p, syms[(syms.index(t) + 1) % 3]))
            rest = [x for x in order if x not in {q for q, _ in decided}]
            if rest and rnd.random() < 0.5:
                decided.append((rest[0], rnd.choice(syms)))
        for p, t in decided:
            for o in oracles:
                o.commit(p, t)
            committed.append((p, t))
            order.remove(p)


# -- which oracle a model gets ---------------------------------------------------------------------

def test_a_model_that_is_no_as_arm_is_refused_by_name():
    with pytest.raises(IncompatibleModelsError) as e:
        make_oracle(SimpleNamespace(kind="hybrid", name="text-hybrid"), None, False)
    assert str(e.value) == "text-hybrid is a hybrid model; this sampler needs an AS-ARM."


@pytest.mark.parametrize("use_cache", [False, True])
def test_a_native_as_arm_gets_its_oracle_with_the_cache_asked_for(lm, use_cache):
    mi = masked_input(lm.codec, {0: "a"}, LENGTH)
    o = make_oracle(lm, mi, use_cache)
    assert type(o) is AsArmOracle and o.model is lm.model and o.mi is mi and o.use_cache is use_cache
    assert (o.cache is not None) is use_cache
    assert o.calls == 0 and o.shapes == [] and o.seconds == 0.0 and o.committed == [] and o.tentative == []
    assert o.prompt == [(-1, lm.model.config.bos_token_id), (0, mi.tokens[0])]
    assert o.dtype == torch.float64 and torch.equal(o.special, lm.model.special_mask().cpu())


@pytest.mark.parametrize("use_cache, exclude", [(False, True), (True, False)])
def test_an_xlnet_gets_the_adapter_with_its_codec_cache_and_banned_ids(use_cache, exclude):
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=1)
    mi = masked_input(codec, {}, LENGTH)  # nothing visible: the adapter puts <s> first
    fake = SimpleNamespace(kind="asarm", model_type="xlnet", model=model, codec=codec, exclude_special=exclude,
                           name="x")
    o = make_oracle(fake, mi, use_cache)
    assert type(o) is XLNetOracle and o.model is model and o.mi is mi and o.codec is codec
    assert (o.cache is not None) is use_cache
    assert o.offset == 1 and o.prompt == [(-1, codec.bos_id)]
    assert torch.equal(o.banned, banned_ids(codec, model.config.vocab_size, exclude))


def test_banned_ids_are_every_special_token_or_the_mask_alone():
    codec = tiny_codec()
    every = banned_ids(codec, codec.vocab_size, True)
    assert every.nonzero().flatten().tolist() == [i for i in codec.special_ids if i < codec.vocab_size]
    assert banned_ids(codec, codec.vocab_size, False).nonzero().flatten().tolist() == [codec.mask_id]
    top = max(codec.special_ids)  # an id at or past the model's vocabulary is left out, not an IndexError
    small = banned_ids(codec, top, True)
    assert small.shape == (top,) and small.nonzero().flatten().tolist() == [i for i in codec.special_ids if i < top]


# -- the AS-ARM oracle ------------------------------------------------------------------------------

@pytest.mark.parametrize("visible, k, seed", [({0: "a", 6: "c"}, 2, 0), ({3: "b"}, 3, 1), ({}, 1, 2), ({}, 4, 3)])
def test_every_answer_is_the_original_forward_cached_or_not(lm, visible, k, seed):
    mi = word_start_input(lm.codec, visible)
    plain, cached = AsArmOracle(lm.model, mi), AsArmOracle(lm.model, mi, use_cache=True)
    b = lm.codec.encode("b")[0]

    def check(committed, drafts, queries, answers):
        want = reference(lm, mi, committed, drafts, queries)
        for got in answers:
            torch.testing.assert_close(got, want, rtol=0, atol=1e-9)
            assert got.dtype == torch.float64 and got.shape == (len(queries), lm.codec.vocab_size)
            assert torch.isinf(got[:, cached.special]).all()
            for r, (p, _) in enumerate(queries):
                assert torch.isinf(got[r, b]) == (p == 2)

    drive(lm.codec, mi, k, seed, [plain, cached], check)
    assert plain.calls == cached.calls == len(plain.shapes) == len(cached.shapes) > 0


def test_the_cache_computes_only_rows_it_has_not_kept(lm):
    mi = masked_input(lm.codec, {0: "a"}, LENGTH)  # masked 1..6; prompt: BOS and one visible token
    o = AsArmOracle(lm.model, mi, use_cache=True)
    a, b, c = lm.codec.encode("abc")
    o.call([], [(1, 0)])  # prompt only
    o.call([(1, a), (2, b)], [(1, 0), (2, 1)])
    o.commit(1, a)
    o.commit(2, b)  # both as drafted: their rows stay
    o.call([(3, c)], [(3, 0)])
    o.commit(3, a)  # not the draft: rolled back to the decided prefix
    o.commit(4, b)  # a second decided token waits for the next call
    o.call([], [(5, 0)])
    assert o.shapes == [(2, 1), (2, 2), (1, 1), (2, 1)]
    assert o.valid == 4 and o.tentative == [] and len(o.cache) == 2 + 4


def test_an_oracle_is_uncached_unless_asked_and_takes_a_decision_before_its_first_call(lm):
    mi = masked_input(lm.codec, {0: "a"}, LENGTH)
    a = lm.codec.encode("a")[0]
    plain, cached = AsArmOracle(lm.model, mi), AsArmOracle(lm.model, mi, use_cache=True)
    assert plain.cache is None and plain.use_cache is False
    for o in (plain, cached):
        o.commit(1, a)  # decided before any call (nothing cached yet)
        torch.testing.assert_close(o.call([], [(2, 0)]), reference(lm, mi, [(1, a)], [], [(2, 0)]), rtol=0, atol=1e-9)


def test_the_lean_call_leaves_rows_to_head_logits_and_all_is_counted(lm, monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(oracle_mod, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    mi = masked_input(lm.codec, {0: "a"}, LENGTH)
    o = AsArmOracle(lm.model, mi, use_cache=True)
    queries = [(p, 0) for p in mi.masked]
    full, states = o.call([], queries, states=True)
    lean, states2 = o.call([], queries, states=True, logit_rows=2)
    assert lean.shape[0] == 2
    torch.testing.assert_close(states2, states, rtol=0, atol=1e-9)
    torch.testing.assert_close(lean, full[:2], rtol=0, atol=1e-9)
    torch.testing.assert_close(o.head_logits(states2[2:], mi.masked[2:]), full[2:], rtol=0, atol=1e-9)
    assert o.calls == 2 and o.seconds == 3.0  # one tick per call and per late head


# -- the XLNet adapter ------------------------------------------------------------------------------

@pytest.mark.parametrize("visible, k, seed", [({0: "a", 6: "c"}, 2, 0), ({}, 3, 1)])
def test_the_xlnet_adapter_cached_equals_uncached_with_the_inputs_rules(visible, k, seed):
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=5)
    mi = word_start_input(codec, visible)
    plain, cached = XLNetOracle(model=model, mi=mi, codec=codec), XLNetOracle(model=model, mi=mi, codec=codec, use_cache=True)
    b = codec.encode("b")[0]

    def check(committed, drafts, queries, answers):
        if len({p for p, _ in queries}) < len(queries):
            return
        for got in answers:
            assert got.dtype == torch.float64 and torch.isinf(got[:, plain.banned]).all()
            assert [bool(torch.isinf(got[r, b])) for r in range(len(queries))] == [p == 2 for p, _ in queries]
        torch.testing.assert_close(torch.softmax(answers[1], -1), torch.softmax(answers[0], -1), rtol=0, atol=1e-5)

    drive(codec, mi, k, seed, [plain, cached], check)


def test_the_xlnet_adapter_states_lean_rows_and_counters(monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(oracle_mod, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=6)
    mi = masked_input(codec, {0: "a"}, LENGTH)
    o = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=True)
    queries = [(p, 0) for p in mi.masked]
    full, g = o.call([], queries, states=True)
    lean, g2 = o.call([], queries, states=True, logit_rows=2)
    assert lean.shape[0] == 2 and g.shape[0] == g2.shape[0] == len(queries)
    torch.testing.assert_close(lean, full[:2], rtol=0, atol=1e-6)
    torch.testing.assert_close(o.head_logits(g2[2:], mi.masked[2:]), full[2:], rtol=0, atol=1e-6)
    assert o.call([], queries, logit_rows=2).shape[0] == len(queries)  # logit_rows without states: every row
    assert o.calls == 3 and o.seconds == 4.0  # one tick per call and per late head
    with pytest.raises(IncompatibleModelsError, match="query states"):
        XLNetOracle(model=model, mi=mi, codec=codec).call([], queries, states=True)


def test_an_xlnet_without_bos_needs_a_visible_token():
    codec = tiny_codec()
    model = random_xlnet(codec.vocab_size, seed=7)
    nobos = SimpleNamespace(**{**vars(codec), "bos_id": None})
    with pytest.raises(IncompatibleModelsError) as e:
        XLNetOracle(model=model, mi=masked_input(codec, {}, LENGTH), codec=nobos)
    assert str(e.value) == "This XLNet tokenizer has no <s> token: leave at least one token visible."
    assert XLNetOracle(model=model, mi=masked_input(codec, {1: "b"}, LENGTH), codec=nobos).offset == 0
