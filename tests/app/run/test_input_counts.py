"""The editor's line says what [MASK:nw] is (n times the tokenizer's average tokens per word) and
how many tokens each one in the input becomes, the count the run decides."""

from __future__ import annotations

from app.run import inputs


class WordyCodec:
    """A byte-level tokenizer stand-in: three tokens for every two words."""

    byte_level = True
    hf = object()

    def encode(self, s: str) -> list[int]:
        return list(range(len(s.split()) * 3 // 2))


def test_word_masks_say_the_tokens_they_become():
    codec = WordyCodec()
    assert inputs.word_masks("a [MASK:4w] b [MASK:3] c [MASK:2w]", codec) == (
        "Here [MASK:4w] becomes 6 tokens, [MASK:2w] becomes 3 tokens: the run fills exactly that many tokens, "
        "which read as about, not exactly, that many words.")
    assert inputs.word_masks("a [MASK:3w] b", codec) == (  # one mask: its own number, not a literal "n"
        "Here [MASK:3w] becomes 4 tokens: the run fills exactly that many tokens, which read as about, not exactly, "
        "3 words.")
    assert inputs.word_masks("a [MASK:1w] b", codec).endswith("not exactly, 1 word.")
    assert inputs.word_masks("no word masks [MASK:3]", codec) == ""
    assert "n times 1.5 tokens (this tokenizer's average per word)" in inputs.mask_units("text", codec)
    assert "not always exactly n words" in inputs.mask_units("text", codec)
