"""Masks chosen by token position keep the text outside the spans byte-identical (property test on
random Unicode text), and the app's token view builds its input with the same function."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.inputs.masking import from_token_positions, parse_masked_text
from engine.inputs.tokenization import Codec
from lab.train import TOKENIZERS

CODECS = {d: Codec.load(TOKENIZERS / d) for d in ("text", "code")}
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@st.composite
def text_and_mask(draw):
    text = draw(TEXT)
    codec = CODECS[draw(st.sampled_from(sorted(CODECS)))]
    ids = codec.encode(text)
    positions = draw(st.lists(st.integers(0, len(ids) - 1), min_size=1, max_size=len(ids)))
    return codec, text, ids, positions


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text_and_mask())
def test_token_masks_keep_text_byte_identical(case):
    codec, text, ids, positions = case
    mi = from_token_positions(ids, positions, codec, max_tokens=len(ids))
    assert set(positions) <= set(mi.masked)
    # filling the spans with their original ids gives the input back, byte for byte
    filled, spans = mi.fill(codec, {i: ids[i] for i in mi.masked})
    assert filled.encode("utf-8") == text.encode("utf-8")
    # the pieces are the input's own text between the spans, in order
    ends = [0] + [s.end for s in spans]
    starts = [s.start for s in spans] + [len(text)]
    assert mi.pieces == [text[a:b] for a, b in zip(ends, starts)]
    # whatever fills the spans (here: another token everywhere), the pieces outside them stay as typed
    other = next(i for i in range(codec.vocab_size) if i not in codec.special_ids and i != mi.mask_id)
    filled2, spans2 = mi.fill(codec, {i: other for i in mi.masked})
    assert [s.text for s in spans2] == [codec.decode([other] * (b - a)) for a, b in mi.span_ranges]
    assert filled2 == "".join(p + s.text for p, s in zip(mi.pieces, spans2)) + mi.pieces[-1]
    assert all(filled2[s.start : s.end] == s.text for s in spans2)
    assert all("\ufffd" not in p for p in mi.pieces) or "\ufffd" in text


def test_naive_with_one_token_masked():
    codec = CODECS["text"]
    ids = codec.encode("naïve")
    for k in range(len(ids)):
        mi = from_token_positions(ids, [k], codec, max_tokens=16)
        text, _ = mi.fill(codec, {i: ids[i] for i in mi.masked})
        assert text == "naïve" and "\ufffd" not in "".join(mi.pieces), (k, mi.pieces)


def test_app_token_view_uses_the_masking_function(monkeypatch):
    """toggle_tokens builds the input text with engine.inputs.masking.from_token_positions."""
    import app.tabs.editor as ui
    from engine.loading.registry import load

    lm = load("text-asarm")
    ids = lm.codec.encode("naïve cat")
    seen = []
    real = ui.from_token_positions

    def spy(*a, **kw):
        seen.append(a[1])
        return real(*a, **kw)

    monkeypatch.setattr(ui, "from_token_positions", spy)
    text = ui.toggle_tokens([1], {"model": lm.name, "ids": ids, "mask_id": lm.codec.mask_id})["text"]
    assert seen and "\ufffd" not in text
    mi = parse_masked_text(text, lm.codec, max_tokens=lm.max_tokens)
    assert mi.pieces == ["na", "ve cat"]


@pytest.mark.parametrize("sel", [[], [0]])
def test_app_token_view_plain_and_masked(sel):
    import app.tabs.editor as ui
    from engine.loading.registry import load

    lm = load("text-asarm")
    ids = lm.codec.encode("naïve")
    text = ui.toggle_tokens(sel, {"model": lm.name, "ids": ids, "mask_id": lm.codec.mask_id})["text"]
    assert text == ("naïve" if not sel else "[MASK:1]ïve")


def test_token_bytes_spell_the_text_from_one_byte_table():
    """The tokens' bytes joined are the text's UTF-8, multi-byte characters split across tokens
    included; the byte-level table behind them is built once (it was rebuilt on every call, 1.3 ms a
    token: half a second to group a 256-token window's characters)."""
    from engine.inputs import tokenization

    codec = CODECS["text"]
    text = "Zürich liegt am Zürichsee — naïve café"
    assert b"".join(codec.token_bytes(t) for t in codec.encode(text)) == text.encode("utf-8")
    assert tokenization._byte_level_table() is tokenization._byte_level_table()
