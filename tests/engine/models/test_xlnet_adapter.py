"""A local Hugging Face XLNet checkpoint drives the sequential and ASSD samplers exactly."""

from __future__ import annotations

import pytest
import torch
from transformers import XLNetConfig, XLNetLMHeadModel

from engine.api import InfillRun
from engine.errors import IncompatibleModelsError
from engine.loading import registry
from tests.engine.samplers.test_assd_exactness import histogram
from tests.support.tiny import exact_distribution, g_test, masked_input, tiny_codec


def save_tiny_xlnet(folder):
    """A tiny random Hugging Face XLNet (alphabet 'abc') saved with save_pretrained, as from the Hub."""
    torch.manual_seed(1)
    codec = tiny_codec()
    cfg = XLNetConfig(vocab_size=codec.vocab_size, d_model=16, n_layer=2, n_head=2, d_inner=32, dropout=0.0)
    model = XLNetLMHeadModel(cfg)  # float32: HF XLNet builds its positional tables in float32
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.25)
    model.save_pretrained(folder)
    codec.hf.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_xlnet(tmp_path_factory):
    return registry.load(str(save_tiny_xlnet(tmp_path_factory.mktemp("xl") / "tiny-xlnet")))


@pytest.mark.parametrize("sampler,kw", [("sequential", {}), ("assd", {"k": 3}), ("assd-bonus", {"k": 2}),
                                        ("sequential-cache", {}), ("assd-cache", {"k": 3}),
                                        ("assd-pipelined", {"k": 2})])
def test_xlnet_samplers_exact(tiny_xlnet, sampler, kw):
    mi = masked_input(tiny_xlnet.codec, {0: "a", 3: "c"}, 5)
    exact = exact_distribution(tiny_xlnet, mi)
    assert abs(sum(exact.values()) - 1) < 1e-9
    assert max(exact.values()) < 0.6, "the random XLNet should not be near-deterministic"
    counts = histogram(tiny_xlnet, mi, sampler, 1000, **kw)
    assert g_test(counts, exact, 1000) > 1e-3


def test_xlnet_factors_do_not_leak_the_token(tiny_xlnet):
    """The density factor of a drafted token must not depend on that token (query stream, not content)."""
    from engine.samplers.context import make_oracle

    mi = masked_input(tiny_xlnet.codec, {0: "a"}, 4)
    rows = []
    for tok in tiny_xlnet.codec.encode("abc"):
        o = make_oracle(tiny_xlnet, mi, use_cache=False)
        rows.append(o.call([(1, tok), (2, tok)], [(1, 0), (2, 1)])[0])
    assert torch.allclose(rows[0], rows[1]) and torch.allclose(rows[1], rows[2])


def test_uncached_xlnet_refuses_two_questions_of_one_position(tiny_xlnet):
    """Uncached, one position has one mask row: a second question of it is refused in words (the
    cached forward answers it: pipelined ASSD runs there, test_xlnet_samplers_exact)."""
    from engine.api import make_oracle

    mi = masked_input(tiny_xlnet.codec, {0: "a"}, 5)
    b = tiny_xlnet.codec.encode("b")[0]
    with pytest.raises(IncompatibleModelsError, match="one question per position"):
        make_oracle(tiny_xlnet, mi, use_cache=False).call([(1, b)], [(1, 0), (1, 1)])
    rows = make_oracle(tiny_xlnet, mi, use_cache=True).call([(1, b)], [(1, 0), (2, 1), (2, 0)])
    assert rows.shape[0] == 3 and not torch.allclose(rows[1], rows[2]), "(2 | draft at 1) vs (2 | prompt)"


def test_a_run_says_which_oracle_it_used(tiny_xlnet):
    """sequential-cache on XLNet is cached (fewer content rows per call), not silently uncached."""
    mi = masked_input(tiny_xlnet.codec, {0: "a"}, 5)
    shapes = {}
    for name in ("sequential", "sequential-cache"):
        run = InfillRun(masked_input=mi, model=tiny_xlnet, sampler=name, seed=0)
        list(run.stream())
        shapes[name] = run.call_shapes
    assert [c for c, _ in shapes["sequential"]] == [5] * 4
    assert [c for c, _ in shapes["sequential-cache"]] == [1, 1, 1, 1], "the prompt, then one decided token a call"
