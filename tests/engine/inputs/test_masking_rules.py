"""Masking keeps every character typed outside the spans: a span after a space owns exactly that
one space (byte-level BPE attaches it to the word) and nothing else; tabs, newlines and further
spaces stay literal. Expected pieces are written out by hand.

The other rules of engine/inputs/masking.py, each against a reference written out by hand (token ids of a
character-level codec, character offsets, exact messages): [MASK:n] parsing and its length limits,
line masks (alone_on_line), fill's span offsets, character ranges, token positions and the
character groups of byte-level tokens. These are the module's mutation-testing selection
(tests/mutation/run.py): fast, no model."""

from __future__ import annotations

import pytest
import torch

from engine.errors import BadSpanLengthError, EmptyTextError, InputTooLongError, NoMaskError
from engine.inputs.masking import (
    MARKER_HELP,
    MaskedInput,
    Span,
    alone_on_line,
    char_groups,
    completed_from_ranges,
    from_char_ranges,
    from_token_positions,
    owns_space,
    parse_masked_text,
    snap_to_characters,
)
from engine.inputs.tokenization import Codec, char_tokenizer
from engine.inputs.word_lengths import _WORD_SAMPLE, tokens_per_word


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


# ---------------------------------------------------------------------------------------------------
# Rules checked with hand-computed references. A character-level codec over the alphabet "abx= \n\t"
# gives every id by hand: the specials [PAD] [BOS] [MASK] [UNK] are 0..3, then a=4 b=5 x=6 '='=7
# ' '=8 '\n'=9 '\t'=10; one character is one token, so token offsets are character counts.
# ---------------------------------------------------------------------------------------------------

A, B, X, EQ, SP, NL, TAB, MASK = 4, 5, 6, 7, 8, 9, 10, 2


@pytest.fixture(scope="module")
def chars():
    return Codec(char_tokenizer("abx= \n\t"))


def test_hand_ids_of_the_character_codec(chars):
    assert chars.encode("abx= \n\t") == [A, B, X, EQ, SP, NL, TAB] and chars.mask_id == MASK


def test_parse_gives_tokens_pieces_and_ranges(chars):
    text = "ab[MASK:2]b\n[MASK:1]"
    mi = parse_masked_text(text, chars, max_tokens=64)
    assert mi.tokens == [A, B, MASK, MASK, B, NL, MASK]
    assert mi.masked == [2, 3, 6] and mi.span_ranges == [(2, 4), (6, 7)]
    assert mi.pieces == ["ab", "b\n", ""] and mi.mask_id == MASK and mi.source == text
    assert mi.visible == [0, 1, 4, 5]
    # not byte-level: no span owns a space, no ban tensor is built; no line masks unless asked
    assert mi.word_starts == [] and mi.not_word_start is None
    assert mi.line_positions == [] and mi.has_newline is None


def test_a_bare_mask_is_eight_tokens_unless_told(chars):
    assert parse_masked_text("a[MASK]b", chars, max_tokens=64).span_ranges == [(1, 9)]
    assert parse_masked_text("a[MASK]b", chars, max_tokens=64, default_span=3).span_ranges == [(1, 4)]


def test_fill_places_spans_at_their_character_offsets(chars):
    mi = parse_masked_text("ab[MASK:2]b\n[MASK:1]", chars, max_tokens=64)
    text, spans = mi.fill(chars, {2: X, 3: X, 6: A})
    assert text == "abxxb\na"
    assert spans == [Span(2, 4, "xx"), Span(6, 7, "a")]
    assert [s.to_dict() for s in spans] == [{"start": 2, "end": 4, "text": "xx"}, {"start": 6, "end": 7, "text": "a"}]
    # an undecided position is left out of its span's text (not decoded as [MASK])
    text, spans = mi.fill(chars, {3: B})
    assert text == "abbb\n" and spans == [Span(2, 3, "b"), Span(5, 5, "")]


def test_a_span_may_be_as_long_as_the_model(chars):
    assert parse_masked_text("[MASK:4]", chars, max_tokens=4).masked == [0, 1, 2, 3]
    with pytest.raises(BadSpanLengthError) as e:
        parse_masked_text("[MASK:5]", chars, max_tokens=4)
    assert str(e.value) == "[MASK:5]: a span cannot be longer than the model's 4 tokens."


@pytest.mark.parametrize(
    "text,max_tokens,message",
    [
        ("a[MASK:0]", 64, "[MASK:0]: a masked span must be at least 1 token long."),
        ("a[MASK:-3]", 64, "[MASK:-3]: a masked span must be at least 1 token long."),
        ("a[MASK:0w]", 64, "[MASK:0w]: a masked span must be at least 1 word long."),
        ("a[MASK:100000000]", 64, "[MASK:100000000]: a span cannot be longer than the model's 64 tokens."),
        ("a[MASK:1234567890]", 64, "[MASK:1234567890…]: a span cannot be longer than the model's 64 tokens."),
        # thousands of digits: int() would refuse them with a ValueError; the length rule says it first
        ("a[MASK:" + "9" * 5000 + "]", 1000, "[MASK:999999999999…]: a span cannot be longer than the model's 1000 tokens."),
        ("a[MASK:abc]", 64, f"'[MASK:abc]' is not a span marker: {MARKER_HELP}."),
        ("a[MASK:3.5]", 64, f"'[MASK:3.5]' is not a span marker: {MARKER_HELP}."),
        ("a[MASK:\u0663]", 64, f"'[MASK:\u0663]' is not a span marker: {MARKER_HELP}."),
        ("a[MASK:" + "x" * 40 + "]", 64, f"'[MASK:xxxxxxxxxxxxxxxxxx' is not a span marker: {MARKER_HELP}."),
    ],
)
def test_span_length_messages(chars, text, max_tokens, message):
    with pytest.raises(BadSpanLengthError) as e:
        parse_masked_text(text, chars, max_tokens=max_tokens)
    assert str(e.value) == message


def test_marker_help_names_every_form():
    assert MARKER_HELP == "write [MASK], [MASK:n] for n tokens or [MASK:nw] for n words, n in the digits 0-9"


def test_too_many_characters_are_refused_before_tokenizing(chars):
    # one character per token and markers up to 10 characters a token: 4 tokens hold at most 40 characters
    assert chars.max_chars(4) == 40
    with pytest.raises(InputTooLongError) as e:
        parse_masked_text("a" * 33 + "[MASK:1]", chars, max_tokens=4)  # 41 characters
    assert str(e.value) == ("The input is 41 characters long: more than this model's 4 tokens can hold "
                            "(at most 40 characters). Shorten the text or the masked spans.")
    with pytest.raises(InputTooLongError) as e:
        parse_masked_text("a" * 32 + "[MASK:1]", chars, max_tokens=4)  # 40 characters: counted in tokens
    assert str(e.value) == "The input is 33 tokens long; this model takes at most 4. Shorten the text or the masked spans."
    with pytest.raises(InputTooLongError, match="41 characters long"):
        from_char_ranges("a" * 41, [(0, 1)], chars, max_tokens=4)


def test_empty_and_maskless_messages(chars):
    for text in ("", " \n\t"):
        with pytest.raises(EmptyTextError) as e:
            parse_masked_text(text, chars, max_tokens=64)
        assert str(e.value) == "The input is empty: type some text with [MASK] where to fill in."
    with pytest.raises(NoMaskError) as e:
        parse_masked_text("ab", chars, max_tokens=64)
    assert str(e.value) == "Nothing is masked: add [MASK] or [MASK:n] where the model should fill in."


def test_a_leading_span_owns_no_space_of_the_text_after_it(code):
    # a span at the very start has no literal text before it: the trailing ' ' of the text after it stays
    mi = parse_masked_text("[MASK:1] end ", code, max_tokens=64)
    assert mi.pieces == ["", " end "] and mi.word_starts == [] and mi.not_word_start is None
    owning = parse_masked_text("a [MASK:1]", code, max_tokens=64)
    assert owning.word_starts == [len(code.encode("a"))]
    assert owning.not_word_start is not None and bool(owning.not_word_start[code.encode("a")[0]])


# --- line masks: a bare [MASK] alone on its line fills that one line ---------------------------------

@pytest.mark.parametrize(
    "text,start,end,alone",
    [
        ("[MASK]", 0, 6, True),  # the whole text
        ("x\n  [MASK]\t \ny", 4, 10, True),  # indentation before, blanks after
        ("a\nb\n[MASK]", 4, 10, True),  # the last line break before it counts, not the first
        ("\n[MASK]", 1, 7, True),  # a line break at offset 0
        ("a\n[MASK]\r\nb", 2, 8, True),  # a CRLF line end
        ("[MASK]\nfoo\n", 0, 6, True),  # the first line break after it ends its line
        ("a\nx[MASK]", 3, 9, False),  # code before it on its line
        ("x = [MASK]\ny", 4, 10, False),
        ("XX [MASK]", 3, 9, False),
        ("a\n[MASK] b", 2, 8, False),  # text after it on its line
        ("[MASK] x", 0, 6, False),
        ("[MASK] X\n", 0, 6, False),
        ("\u3000[MASK]\n", 1, 7, False),  # indentation is spaces and tabs only
        ("[MASK]\u00a0\n", 0, 6, False),  # so are trailing blanks (and \r)
    ],
)
def test_alone_on_line(text, start, end, alone):
    assert text[start:end] == "[MASK]"
    assert alone_on_line(text, start, end) is alone


def test_line_masks_ban_line_breaks_in_bare_masks_alone_on_their_line(chars):
    text = "ab\n[MASK]\n\t[MASK] \nx = [MASK]\n[MASK:2]"
    mi = parse_masked_text(text, chars, max_tokens=64, default_span=2, line_masks=True)
    # ab\n = 0..2, span 0 = 3..4, \n\t = 5..6, span 1 = 7..8, ' \nx = ' = 9..14, span 2 = 15..16, \n = 17,
    # span 3 = 18..19; spans 2 (code before it) and 3 (a length given) are not line masks
    assert mi.span_ranges == [(3, 5), (7, 9), (15, 17), (18, 20)]
    assert mi.line_positions == [3, 4, 7, 8]
    assert mi.has_newline is not None and mi.has_newline.nonzero().flatten().tolist() == [NL]
    positions = [3, 4, 7, 8, 15, 18]
    out = mi.constrain(torch.zeros(len(positions), chars.vocab_size, dtype=torch.float64), positions)
    banned = [(r, v) for r, v in zip(*torch.isinf(out).nonzero(as_tuple=True))]
    assert [(int(r), int(v)) for r, v in banned] == [(0, NL), (1, NL), (2, NL), (3, NL)]
    # off by default: the same text has no line positions and no ban tensor
    plain = parse_masked_text(text, chars, max_tokens=64, default_span=2)
    assert plain.line_positions == [] and plain.has_newline is None
    assert torch.equal(plain.constrain(torch.zeros(2, chars.vocab_size), [3, 7]), torch.zeros(2, chars.vocab_size))


def test_explicit_lengths_alone_on_a_line_are_not_line_masks(chars):
    mi = parse_masked_text("ab\n[MASK:2]\n", chars, max_tokens=64, line_masks=True)
    assert mi.line_positions == [] and mi.has_newline is None


def test_the_ban_follows_the_logits_device(code):
    mi = parse_masked_text("x [MASK:2]", code, max_tokens=64)
    out = mi.constrain(torch.zeros(2, code.vocab_size, device="meta"), mi.masked)
    assert out.device.type == "meta" and out.shape == (2, code.vocab_size)


# --- character ranges ------------------------------------------------------------------------------

def test_char_ranges_by_hand(chars):
    mi = from_char_ranges("abxab", [(3, 5), (0, 1)], chars, max_tokens=64)  # given out of order
    assert mi.tokens == [MASK, B, X, MASK, MASK] and mi.span_ranges == [(0, 1), (3, 5)]
    assert mi.pieces == ["", "bx", ""] and mi.source == "[MASK:1]bx[MASK:2]"
    adjacent = from_char_ranges("abxab", [(1, 3), (3, 4)], chars, max_tokens=64)
    assert adjacent.span_ranges == [(1, 3), (3, 4)] and adjacent.pieces == ["a", "", "b"]
    assert adjacent.source == "a[MASK:2][MASK:1]b"


@pytest.mark.parametrize("ranges", [[(3, 3)], [(-1, 2)], [(2, 6)], [(0, 3), (2, 4)], [(4, 2)]])
def test_bad_char_ranges(chars, ranges):
    with pytest.raises(BadSpanLengthError) as e:
        from_char_ranges("abxab", ranges, chars, max_tokens=64)
    a, b = sorted(ranges)[-1] if len(ranges) > 1 else ranges[0]
    assert str(e.value) == f"Character range {a}..{b} is empty, out of the text or overlapping."


def test_char_range_messages(chars):
    with pytest.raises(EmptyTextError) as e:
        from_char_ranges("", [(0, 1)], chars, max_tokens=64)
    assert str(e.value) == "The input is empty."
    with pytest.raises(NoMaskError) as e:
        from_char_ranges("ab", [], chars, max_tokens=64)
    assert str(e.value) == "No character range was given to mask."


@pytest.mark.parametrize(
    "text,ranges,literal,spans",
    [
        ("ab cd", [(3, 5)], ["ab", ""], [" cd"]),
        # a range that starts with whitespace owns the space before it too: no character is lost
        ("ab  cd", [(3, 6)], ["ab", ""], ["  cd"]),
        ("ab \ncd", [(3, 6)], ["ab", ""], [" \ncd"]),
        ("ab\tcd", [(3, 5)], ["ab\t", ""], ["cd"]),
        ("a b c", [(2, 3), (4, 5)], ["a", "", ""], [" b", " c"]),
    ],
)
def test_completed_ranges_give_back_the_text(code, text, ranges, literal, spans):
    mi, tokens = completed_from_ranges(text, ranges, code, max_tokens=64)
    assert mi.pieces == literal
    want: list[int] = []
    for piece, span in zip(literal, spans + [""]):
        want += code.encode(piece) + code.encode(span)
    assert tokens == want and code.decode(tokens) == text
    assert [code.decode(tokens[a:b]) for a, b in mi.span_ranges] == spans
    filled, got = mi.fill(code, dict(enumerate(tokens)))
    assert filled == text and [s.text for s in got] == spans


# --- token positions -------------------------------------------------------------------------------

def test_token_positions_by_hand(chars):
    ids = [A, B, X, A]
    mi = from_token_positions(ids, [1, 2], chars, max_tokens=64)
    assert mi.tokens == [A, MASK, MASK, A] and mi.masked == [1, 2] and mi.span_ranges == [(1, 3)]
    assert mi.pieces == ["a", "a"] and mi.source == "a[MASK:2]a"
    two = from_token_positions(ids, [3, 0], chars, max_tokens=64)  # position 0 is a position
    assert two.tokens == [MASK, B, X, MASK] and two.pieces == ["", "bx", ""]
    assert two.source == "[MASK:1]bx[MASK:1]"
    assert two.fill(chars, {0: X, 3: B}) == ("xbxb", [Span(0, 1, "x"), Span(3, 4, "b")])


def test_token_position_messages(chars):
    for bad in ([-1], [4], [0, 4]):
        with pytest.raises(BadSpanLengthError) as e:
            from_token_positions([A, B, X, A], bad, chars, max_tokens=64)
        assert str(e.value) == "A masked token position lies outside the text."
    with pytest.raises(NoMaskError) as e:
        from_token_positions([A], [], chars, max_tokens=64)
    assert str(e.value) == "No token is masked: click tokens to mask them."
    with pytest.raises(EmptyTextError) as e:
        from_token_positions([], [0], chars, max_tokens=64)
    assert str(e.value) == "The input is empty."


def _byte_ids(codec: Codec) -> dict[int, int]:
    """byte value -> the id of the byte-level token that is that one byte"""
    return {codec.token_bytes(i)[0]: i for i in range(codec.vocab_size) if len(codec.token_bytes(i)) == 1}


def test_char_groups_join_the_bytes_of_one_character(code):
    byte = _byte_ids(code)
    a, b = code.encode("a") + code.encode("b")
    # a, é = C3 A9 in two tokens, b, € = E2 82 AC in three tokens, then a special token (no bytes)
    tokens = [a, byte[0xC3], byte[0xA9], b, byte[0xE2], byte[0x82], byte[0xAC], code.mask_id]
    assert code.decode(tokens[:7]) == "a\u00e9b\u20ac"
    assert char_groups(tokens, code) == [0, 1, 1, 2, 3, 3, 3, 4]
    # a stray continuation byte first is a group of its own
    assert char_groups([byte[0xBC], a], code) == [0, 1]
    assert snap_to_characters(tokens, [2], code) == [1, 2]
    assert snap_to_characters(tokens, [1, 5], code) == [1, 2, 4, 5, 6]
    assert snap_to_characters(tokens[1:], [0], code) == [0, 1]  # position 0 is snapped too
    assert snap_to_characters(tokens, [0, 3], code) == [0, 3]
    # positions outside the tokens are passed through, never looked up
    assert snap_to_characters(tokens, [len(tokens), -1], code) == [-1, len(tokens)]
    mi = from_token_positions(tokens[:7], [5], code, max_tokens=64)
    assert mi.masked == [4, 5, 6] and mi.pieces == ["a\u00e9b", ""]


def test_tokens_per_word_is_each_tokenizers_own():
    text, code_ = Codec.load("assets/tokenizers/text"), Codec.load("assets/tokenizers/code")
    words = len(_WORD_SAMPLE.split())
    for codec in (text, code_, text):
        assert tokens_per_word(codec) == len(codec.encode(_WORD_SAMPLE)) / words
    assert tokens_per_word(text) != tokens_per_word(code_)


def test_positions_without_a_ban_tensor_constrain_nothing(chars):
    """A MaskedInput built by hand (tests/support/tiny.py, the lab's benchmarks) may name word-start or line
    positions without the [V] ban tensors: nothing is banned then, and the line rule still applies
    when only the word-start ban is missing."""
    ban_nl = torch.zeros(chars.vocab_size, dtype=torch.bool)
    ban_nl[NL] = True
    mi = MaskedInput(
        tokens=[A, MASK, MASK],
        masked=[1, 2],
        pieces=["a", ""],
        span_ranges=[(1, 3)],
        mask_id=MASK,
        word_starts=[1],
        line_positions=[2],
        has_newline=ban_nl,
    )
    out = mi.constrain(torch.zeros(2, chars.vocab_size), [1, 2])
    assert torch.isinf(out).nonzero().tolist() == [[1, NL]]
    bare = MaskedInput(tokens=[A, MASK], masked=[1], pieces=["a", ""], span_ranges=[(1, 2)], mask_id=MASK, word_starts=[1],
                       line_positions=[1])
    assert torch.equal(bare.constrain(torch.zeros(1, chars.vocab_size), [1]), torch.zeros(1, chars.vocab_size))


def test_oracle_rows_bans_the_special_ids_and_applies_the_inputs_rules_at_the_positions_asked(chars):
    """What every density oracle (AS-ARM and XLNet alike) hands the samplers: banned ids at -inf on
    every row, then the input's one-line rule at the rows whose position it covers."""
    from engine.samplers.oracle import oracle_rows

    mi = parse_masked_text("ab\n[MASK]\nx", chars, max_tokens=64, default_span=2, line_masks=True)
    assert mi.line_positions == [3, 4]
    banned = torch.zeros(chars.vocab_size, dtype=torch.bool)
    banned[0] = True
    positions = [4, 6]  # a line-mask position, then one outside any line mask
    out = oracle_rows(mi, torch.zeros(2, chars.vocab_size, dtype=torch.float64), banned, positions)
    got = sorted((int(r), int(v)) for r, v in zip(*torch.isinf(out).nonzero(as_tuple=True)))
    assert got == sorted([(0, 0), (1, 0), (0, NL)])
