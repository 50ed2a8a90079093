"""The XLNet adapter's draft and verify rows equal the paper's conditioning (tests/support/xlnet_reference.py)
within 1e-5, uncached and cached, in the text setting and the code setting (the ASSD code spelling and a
one-line code mask), with the special-token rule on (the studio's default) and off (the authors' law:
only `<mask>` removed). Tiny random XLNets and a stand-in tokenizer with XLNet's special tokens."""

from __future__ import annotations

import pytest
import torch
from transformers import XLNetConfig, XLNetLMHeadModel

from engine.inputs.masking import parse_masked_text
from engine.inputs.tokenization import ASSD_CODE_MAP, Codec
from engine.samplers.oracle import XLNetOracle, banned_ids
from tests.engine.loading.test_hub_revisions import SPECIALS, xlnet_style_tokenizer
from tests.support.xlnet_reference import reference_rows

TEXT = "a b [MASK:4] c a [MASK:2] b"
CODE = "def f(x):\n\t[MASK]\n\treturn x"


def random_xlnet(vocab: int, seed: int, n_layer: int = 2, n_head: int = 2, d_head: int = 8) -> XLNetLMHeadModel:
    """A tiny random XLNetLMHeadModel with weights large enough that every conditioning matters."""
    torch.manual_seed(seed)
    cfg = XLNetConfig(vocab_size=vocab, d_model=n_head * d_head, n_layer=n_layer, n_head=n_head, d_head=d_head,
                      d_inner=32, dropout=0.0)
    model = XLNetLMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model


def setting(name: str):
    tok = xlnet_style_tokenizer()
    if name == "text":
        codec = Codec(tok)
        return codec, parse_masked_text(TEXT, codec, max_tokens=64)
    codec = Codec(tok, whitespace=ASSD_CODE_MAP)
    return codec, parse_masked_text(CODE, codec, max_tokens=64, default_span=3, line_masks=True)


def compare(model, codec, mi, exclude_special: bool, use_cache: bool) -> float:
    """Largest |adapter - reference| over a run of draft and verify calls with commits in between."""
    oracle = XLNetOracle(model=model, mi=mi, codec=codec, use_cache=use_cache, exclude_special=exclude_special)
    mapped = {SPECIALS.index(t) for t in ASSD_CODE_MAP.values()} if codec.whitespace else set()
    banned = ({SPECIALS.index(s) for s in SPECIALS} - mapped) if exclude_special else {SPECIALS.index("<mask>")}
    newline = {i for i in range(codec.vocab_size) if bool(codec.has_newline()[i])}
    gen = torch.Generator().manual_seed(3)
    order, worst, decided = list(mi.masked), 0.0, []
    while order:
        rows = [(p, 0) for p in order]  # draft rows: every open position given what is decided
        drafts = [(p, int(torch.randint(9, codec.vocab_size, (1,), generator=gen))) for p in order[:3]]
        verify = [(p, e) for e, (p, _) in enumerate(drafts)] + ([(order[3], 3)] if len(order) > 3 else [])
        for d, q in (([], rows), (drafts, verify)):
            got = torch.softmax(oracle.call(d, q), dim=-1)
            want = reference_rows(model, mi.tokens, mi.visible, codec.mask_id, codec.bos_id, decided, d, q, banned,
                                  set(mi.line_positions), newline)
            worst = max(worst, float((got - want).abs().max()))
        took = drafts[:2] if len(order) % 2 else [(order[0], drafts[0][1] + 1 if drafts[0][1] + 1 < codec.vocab_size else 9)]
        for p, t in took:  # accept two drafts, or decide one token other than its draft (a rollback)
            oracle.commit(p, t)
            decided.append((p, t))
            order.remove(p)
    return worst


@pytest.mark.parametrize("use_cache", [False, True])
@pytest.mark.parametrize("exclude_special", [True, False])
@pytest.mark.parametrize("name", ["text", "code"])
def test_draft_and_verify_rows_equal_the_papers_conditioning(name, exclude_special, use_cache):
    codec, mi = setting(name)
    model = random_xlnet(codec.vocab_size, seed=5)
    assert compare(model, codec, mi, exclude_special, use_cache) < 1e-5


def test_the_settings_exercise_what_they_claim():
    """The code input has a one-line mask and its spelling uses the mapped tokens; the rule off lets
    special tokens through (so the on/off cases differ), and nothing visible gets the one <s>."""
    codec, mi = setting("code")
    assert mi.line_positions and set(mi.line_positions) <= set(mi.masked)
    assert SPECIALS.index("<cls>") in mi.tokens and SPECIALS.index("<sep>") in mi.tokens
    text_codec, _ = setting("text")
    on, off = banned_ids(text_codec, 25, True), banned_ids(text_codec, 25, False)
    assert int(on.sum()) == len(SPECIALS) and off.tolist() == [i == SPECIALS.index("<mask>") for i in range(25)]
    model = random_xlnet(codec.vocab_size, seed=5)
    bare = parse_masked_text("[MASK:3]", text_codec, max_tokens=64)
    for use_cache in (False, True):
        assert compare(model, text_codec, bare, True, use_cache) < 1e-5


def test_feeding_s_would_change_the_rows():
    """The check has teeth: the same rows with a <s> fed before the window differ by far more than 1e-5."""
    codec, mi = setting("text")
    model = random_xlnet(codec.vocab_size, seed=5)
    q = [(p, 0) for p in mi.masked]
    banned = {SPECIALS.index("<mask>")}
    plain = reference_rows(model, mi.tokens, mi.visible, codec.mask_id, codec.bos_id, [], [], q, banned)
    lead = [codec.bos_id] + mi.tokens
    with_s = reference_rows(model, lead, [0] + [i + 1 for i in mi.visible], codec.mask_id, codec.bos_id, [], [],
                            [(p + 1, 0) for p in mi.masked], banned)
    assert float((plain - with_s).abs().max()) > 1e-2
