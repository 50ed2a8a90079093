"""Masking keeps every character typed outside the spans: a span after a space owns exactly that
one space (byte-level BPE attaches it to the word) and nothing else; tabs, newlines and further
spaces stay literal. Expected pieces are written out by hand."""

from __future__ import annotations

import pytest

from engine.masking import from_char_ranges, owns_space, parse_masked_text
from engine.tokenization import Codec, char_tokenizer


@pytest.fixture(scope="module")
def code():
    return Codec.load("assets/tokenizers/code")


@pytest.mark.parametrize(
    "text,pieces,owning",
    [
        ("x = 1;\t [MASK:2] end", ["x = 1;\t", " end"], [True]),
        ("x = 1;\t[MASK:2] end", ["x = 1;\t", " end"], [False]),
        ("a  [MASK:2] end\n[MASK:1]x", ["a ", " end\n", "x"], [True, False]),
        ("a \n [MASK:1]", ["a \n", ""], [True]),
        ("[MASK:1] b", ["", " b"], [False]),
        ("a\u00a0[MASK:1]", ["a\u00a0", ""], [False]),
    ],
)
def test_only_one_space_is_owned(code, text, pieces, owning):
    mi = parse_masked_text(text, code, max_tokens=64)
    assert mi.pieces == pieces
    starts = [a for (a, _), own in zip(mi.span_ranges, owning) if own]
    assert mi.word_starts == starts
    # filling with space-led tokens where owned gives back every typed character outside the spans
    sp = code.encode(" y")
    decided = {}
    for (a, b), own in zip(mi.span_ranges, owning):
        for i in range(a, b):
            decided[i] = sp[0] if own and i == a else code.encode("y")[0]
    filled, spans = mi.fill(code, decided)
    rebuilt = "".join(p + (s.text if j < len(spans) else "") for j, (p, s) in enumerate(zip(pieces, spans + [None])))
    assert filled == rebuilt
    outside = text
    for own in owning:
        outside = outside.replace(" [MASK" if own else "[MASK", "\0", 1)
    literal = [part.split("]", 1)[-1] if k else part for k, part in enumerate(outside.split("\0"))]
    assert literal == pieces


def test_word_boundary_off_and_non_byte_level_keep_the_space(code):
    assert parse_masked_text("a [MASK:1] b", code, max_tokens=64, word_boundary=False).pieces == ["a ", " b"]
    chars = Codec(char_tokenizer("ab "))
    mi = parse_masked_text("a [MASK:1] b", chars, max_tokens=64)
    assert mi.pieces == ["a ", " b"] and mi.word_starts == []
    assert owns_space(code, "a ") and not owns_space(code, "a\t") and not owns_space(code, "a")
    assert not owns_space(code, "a ", word_boundary=False) and not owns_space(chars, "a ")


def test_char_ranges_own_one_space(code):
    text = "if x:\t  return y"
    mi = from_char_ranges(text, [(text.index("return"), len(text))], code, max_tokens=64)
    assert mi.pieces == ["if x:\t ", ""]
    assert len(mi.word_starts) == 1
