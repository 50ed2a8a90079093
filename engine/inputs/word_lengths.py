"""How many tokens `[MASK:nw]` (n words) is for a tokenizer: its average tokens per word on a fixed
English sample. Its own module (engine/inputs/masking.py reads it and re-exports both functions, the
app's input line too), as the yardstick is a question of the tokenizer, not of where spans go."""

from __future__ import annotations

import re

from engine.inputs.tokenization import Codec

# Plain modern English, written for this purpose (not from any corpus): the yardstick that turns a
# word count into a token count for a byte-level tokenizer.
_WORD_SAMPLE = (
    "After dinner we sat by the fire and talked about the long winter ahead. My sister said the "
    "river had frozen early this year, and the children were already skating on it every morning "
    "before school. Her husband works at the hospital in town, so he leaves the house before dawn "
    "and comes back late. We made plans to visit the old mill on Sunday if the weather stays clear. "
    "The road there is narrow and steep, but the view from the top of the hill is worth the climb. "
    "Later, when the others had gone to bed, I read a few chapters of a book about ships and the "
    "people who built them. It was quiet except for the wind against the windows and the clock in "
    "the kitchen. I fell asleep in the chair and woke up cold, with the lamp still burning."
)
_TPW_CACHE: dict[int, float] = {}


def tokens_per_word(codec: Codec) -> float:
    """Average tokens per word of this tokenizer on a fixed English sample (1.0 for character-level
    vocabularies, where a 'word' is meaningless and one unit is one token)."""
    if not codec.byte_level:
        return 1.0
    key = id(codec.hf)
    if key not in _TPW_CACHE:
        words = re.findall(r"\S+", _WORD_SAMPLE)
        _TPW_CACHE[key] = len(codec.encode(_WORD_SAMPLE)) / len(words)
    return _TPW_CACHE[key]


def words_to_tokens(n_words: int, codec: Codec) -> int:
    """Span length in tokens for n words (at least n; rounding the tokenizer's average)."""
    return max(n_words, round(n_words * tokens_per_word(codec)))
