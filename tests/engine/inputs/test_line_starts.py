"""The mirror of "a mask owns the space before it" (engine/inputs/masking.py, starts_line): a span at
the very start of the text has no space to own, so its first token may not begin with one; in prose
(a domain that does not indent) the same holds right after a line break, while code keeps its
indentation there. One per-position ban in MaskedInput.constrain, beside the word-start rule, so every
sampler and the exactness check read the same law. And the engine's one reading of typed text
(engine.run_setup.parse_for): a domain's normaliser (protein) runs there, its note on the input."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.api import parse_for
from engine.inputs.masking import completed_from_ranges, from_char_ranges, parse_masked_text, starts_line
from engine.inputs.tokenization import PROTEIN_ALPHABET, Codec, char_tokenizer


@pytest.fixture(scope="module")
def text():
    return Codec.load("assets/tokenizers/text")


@pytest.fixture(scope="module")
def code():
    return Codec.load("assets/tokenizers/code")


def _lm(codec: Codec, domain: str) -> SimpleNamespace:
    """What parse_for reads of a model: its tokenizer, its length and its domain."""
    return SimpleNamespace(codec=codec, max_tokens=64, domain=domain)


def test_a_span_at_the_start_of_the_text_may_not_begin_with_a_space(text):
    mi = parse_masked_text("[MASK:2] is the capital of France.", text, max_tokens=64)
    assert mi.line_starts == [0] and mi.word_starts == [] and mi.pieces[0] == ""
    lead, plain = text.encode(" lords")[0], text.encode("Paris")[0]
    assert mi.space_led is not None and bool(mi.space_led[lead]) and not bool(mi.space_led[plain])
    out = mi.constrain(torch.zeros(2, text.vocab_size), [0, 1])
    assert out[0, lead] == float("-inf") and out[0, plain] == 0  # the first position: no space-led token
    assert torch.isfinite(out[1]).all()  # the span's second position is free
    # every id that begins with a space, and no other ordinary id, is banned there
    led = [i for i in range(text.vocab_size) if i not in text.special_ids and text.decode([i]).startswith(" ")]
    assert led and sorted(int(i) for i in torch.nonzero(~torch.isfinite(out[0])).flatten()
                          if int(i) not in text.special_ids) == led


@pytest.mark.parametrize("typed", ["The [MASK:2] sat.", "The[MASK:2] sat.", "a\n[MASK:2]", "a\t[MASK:1]"])
def test_a_span_inside_the_text_is_not_a_line_start(text, typed):
    """Mid-text (owning its space, glued to a word, or after a line break when not asked for) no ban."""
    mi = parse_masked_text(typed, text, max_tokens=64)
    assert mi.line_starts == [] and mi.space_led is None


def test_after_a_line_break_only_where_the_domain_does_not_indent(text, code):
    prose = parse_for("First line.\n[MASK:2] second line.", _lm(text, "text"))
    assert prose.line_starts == [len(text.encode("First line.\n"))] and prose.space_led is not None
    src = "def f(x):\n[MASK:4]\n"
    indented = parse_for(src, _lm(code, "code"))
    assert indented.line_starts == [] and indented.space_led is None  # "    return x" stays possible
    assert parse_for("[MASK:4]\n    return x\n", _lm(code, "code")).line_starts == [0]  # a file starts at column 0
    assert parse_for(src, _lm(code, "nope")).line_starts == []  # a domain the registry does not know: text start only


def test_the_rule_follows_the_owning_rules_conditions(text):
    chars = Codec(char_tokenizer(" abc"))
    assert not starts_line(chars, None)  # a character-level tokenizer carries no word-initial space
    assert parse_masked_text("[MASK:2]b", chars, max_tokens=16).line_starts == []
    assert starts_line(text, None) and not starts_line(text, None, word_boundary=False)
    assert parse_masked_text("[MASK:2] x", text, max_tokens=64, word_boundary=False).line_starts == []
    assert starts_line(text, "a\n", after_newline=True) and not starts_line(text, "a\n")
    assert not starts_line(text, "a\n ", after_newline=True)  # after typed indentation: owns_space's case


def test_a_scored_range_at_the_start_follows_the_same_law(text):
    """engine.score's character ranges get the rule a typed mask gets: the law infill samples."""
    mi, tokens = completed_from_ranges("Paris is big.", [(0, 5)], text, max_tokens=64)
    assert mi.line_starts == [0] and not bool(mi.space_led[tokens[0]])



def test_ranges_after_a_line_break_are_banned_only_when_asked(text):
    """from_char_ranges takes after_newline as parse_masked_text does, and passes it on: off by default
    (the benchmarks' ranges), on for a domain that does not indent."""
    prose = "First line.\nSecond line."
    at = prose.index("Second")
    assert from_char_ranges(prose, [(at, at + 6)], text, max_tokens=64).line_starts == []
    asked = from_char_ranges(prose, [(at, at + 6)], text, max_tokens=64, after_newline=True)
    assert asked.line_starts == [len(text.encode("First line.\n"))] and asked.space_led is not None


def test_parse_for_reads_protein_text_as_protein_tools_do():
    """The engine's input path runs the domain's normaliser (the page, the API and the CLI alike) and
    keeps its note; text the normaliser leaves alone has no note."""
    lm = _lm(Codec(char_tokenizer(PROTEIN_ALPHABET)), "protein")
    mi = parse_for(">sp|P69905|HBA_HUMAN\nmvlspadktn vkaa\nGKVG[MASK:3]ahag", lm)
    assert mi.source == "MVLSPADKTNVKAAGKVG[MASK:3]AHAG" and len(mi.masked) == 3
    assert mi.note == ("Read as a protein sequence: dropped 1 FASTA header line, removed 2 line breaks and spaces, "
                       "upper-cased 18 letters.")
    assert parse_for("MKTA[MASK:2]", lm).note == ""
    one = parse_for("mkt a[MASK:2]", lm)
    assert one.note == "Read as a protein sequence: removed 1 line break or space, upper-cased 4 letters."


@pytest.mark.parametrize("prose, at", [(" Paris is big.", 0), ("First line.\n Paris is big.", 12)])
def test_a_range_that_begins_with_a_space_at_a_line_start_owns_it(text, prose, at):
    """A typed " [MASK]" at a line start owns its space, so its fill begins with one (" Paris"); scoring that
    fill by its range must read the same law: the space is the span's owned space (a word start), not a
    line start that would give the fill probability 0."""
    mi = from_char_ranges(prose, [(at, at + 6)], text, max_tokens=64, after_newline=True)
    assert mi.line_starts == [] and mi.word_starts == [len(text.encode(prose[:at]))], (mi.line_starts, mi.word_starts)


def test_scoring_a_fill_at_the_start_gives_its_runs_log_probability():
    import engine

    r = engine.infill(" [MASK:2] is the capital of France.", sampler="sequential-cache", seed=0)
    span = r.spans[0]
    assert r.text.startswith(" ") and engine.score(r.text, [(span.start, span.end)]) == pytest.approx(r.log_prob)


def test_a_range_right_after_another_is_no_line_start_whatever_it_begins_with(text):
    """Two adjacent ranges: the second, " is", follows a span, not the start of a line: no literal space is
    made up between them, and only the first range is a line start."""
    mi = from_char_ranges("Paris is big.", [(0, 5), (5, 8)], text, max_tokens=64, after_newline=True)
    assert mi.line_starts == [0] and mi.word_starts == [], (mi.line_starts, mi.word_starts)
