"""No NaN path: user text never becomes special ids, and a broken row is refused, never accepted.

The bug this guards: "Zyq[PAD] Zyq[MASK:3]" typed into the app put the [PAD] id into the context;
the n-gram drafter's bigram row after it had zero sum, the proposal was NaN and min(1, q/NaN)
accepted the draft silently.
"""

from __future__ import annotations

import math

import pytest
import torch

from engine.errors import DistributionError, UnrepresentableTextError
from engine.inputs.masking import parse_masked_text
from engine.inputs.tokenization import Codec
from engine.samplers.acceptance import sample_categorical, speculative_accept
from engine.samplers.drafters import NgramDrafter
from lab.train import TOKENIZERS
from tests.support.tiny import tiny_codec

LOOKALIKES = ["[PAD]", "[BOS]", "[UNK]", "[MASK ]", "[mask]", "[MASK:x]", "[MASK:]", "<sep>", "</s>"]


@pytest.fixture(scope="module")
def bpe():
    return Codec.load(TOKENIZERS / "text")


@pytest.mark.parametrize("word", LOOKALIKES)
def test_special_token_strings_are_ordinary_text(bpe, word):
    text = f"Zyq{word} x"
    ids = bpe.encode(text)
    assert not set(ids) & set(bpe.special_ids), (word, ids)
    assert bpe.decode(ids) == text


def test_masked_text_with_special_strings_has_no_special_ids(bpe):
    mi = parse_masked_text("Zyq[PAD] [BOS]Zyq[UNK][MASK:3]", bpe, max_tokens=64)
    assert [i for i, t in enumerate(mi.tokens) if t in bpe.special_ids] == mi.masked  # only the mask ids
    text, _ = mi.fill(bpe, dict.fromkeys(mi.masked, bpe.encode("a")[0]))
    assert text == "Zyq[PAD] [BOS]Zyq[UNK]aaa"


@pytest.mark.parametrize("word", ["[UNK]", "[PAD]", "<sep>"])
def test_char_model_refuses_with_the_characters_named(word):
    codec = tiny_codec()  # alphabet 'abc'
    with pytest.raises(UnrepresentableTextError) as err:
        codec.encode(f"ab{word}")
    msg = str(err.value)
    assert msg.rstrip().endswith(")") and repr(word[0]) in msg, msg  # never "...characters: " and nothing


def test_zero_or_nan_proposal_is_refused():
    gen = torch.Generator().manual_seed(0)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    for p in ([0.0, 0.5, 0.5], [math.nan, 0.5, 0.5], [math.inf, 0.0, 0.0]):
        with pytest.raises(DistributionError):
            speculative_accept(0, torch.tensor(p, dtype=torch.float64), q, gen)
    with pytest.raises(DistributionError):
        speculative_accept(1, q, torch.tensor([math.nan, 0.5, 0.5], dtype=torch.float64), gen)
    assert speculative_accept(1, q, q, gen).accepted  # a proper pair still works


@pytest.mark.parametrize("row", [[0.0, 0.0, 0.0], [math.nan, 1.0, 0.0], [math.inf, 1.0, 0.0], [-0.5, 1.0, 0.5]])
def test_unsamplable_rows_are_refused(row):
    with pytest.raises(DistributionError):
        sample_categorical(torch.tensor(row, dtype=torch.float64), torch.Generator().manual_seed(0))


def test_ngram_rows_after_a_special_token_context_are_proper():
    """A context token seen only before special ids (zero-sum bigram row) falls back to the unigram."""
    drafter = NgramDrafter(vocab_size=7, special_ids=[0, 1, 2, 3])
    known = [5, 0, 5, 0, None, None]  # 5 is always followed by the PAD id 0
    drafts, rows, _ = drafter.propose(known, [4, 5], torch.Generator().manual_seed(0))
    for row, d in zip(rows, drafts):
        assert torch.isfinite(row).all() and abs(float(row.sum()) - 1) < 1e-12
        assert float(row[[0, 1, 2, 3]].sum()) == 0 and row[d] > 0


def test_reported_input_runs_with_proper_rows():
    """The reported reproduction: every proposal and target probability in the trace is finite and > 0."""
    import engine

    r = engine.infill("Zyq[PAD] Zyq[MASK:3]", sampler="assd-ngram", seed=0)
    assert r.text.startswith("Zyq[PAD] Zyq")
    for s in r.trace:
        for v in (*s.p, *s.q):
            assert v is None or (math.isfinite(v) and v > 0), s


XLNET_SPECIALS = ["<sep>", "<cls>", "<eod>", "<eop>", "</s>"]


@pytest.fixture(scope="module")
def xlnet_with_specials(tmp_path_factory):
    """A tiny XLNet whose tokenizer carries XLNet's own special tokens, with their logits boosted so
    that an unmasked row would pick them most of the time."""
    from transformers import XLNetConfig, XLNetLMHeadModel

    from engine.loading import registry

    hf = tiny_codec().hf
    hf.add_special_tokens({"sep_token": "<sep>", "cls_token": "<cls>", "eos_token": "</s>",
                           "additional_special_tokens": ["<eod>", "<eop>"]})
    torch.manual_seed(0)
    model = XLNetLMHeadModel(XLNetConfig(vocab_size=len(hf), d_model=16, n_layer=1, n_head=2, d_inner=32, dropout=0.0))
    with torch.no_grad():
        model.lm_loss.bias[[hf.convert_tokens_to_ids(t) for t in XLNET_SPECIALS]] = 50.0
    folder = tmp_path_factory.mktemp("xl") / "xlnet-specials"
    model.save_pretrained(folder)
    hf.save_pretrained(folder)
    return registry.load(str(folder))


def test_xlnet_special_tokens_are_never_sampled(xlnet_with_specials):
    from engine.api import InfillRun

    lm = xlnet_with_specials
    ids = {lm.codec.hf.convert_tokens_to_ids(t) for t in XLNET_SPECIALS}
    assert ids <= set(lm.codec.special_ids)
    for sampler in ("sequential", "assd"):
        for seed in range(5):
            run = InfillRun("ab[MASK:3]c", model=str(lm.path), sampler=sampler, seed=seed, k=3)
            steps = list(run.stream())
            assert not {t for s in steps for t in s.tokens} & ids
            assert run.result(with_log_prob=False).text[:2] == "ab"
