"""How the studio reads what a person types, before any model work: whole numbers exactly, the
input's length, malformed span markers named, protein text read the way protein tools read it,
and what the span markers mean for a domain's tokenizer. Every problem is an InfillError message."""

from __future__ import annotations

import re

from engine.errors import BadParameterError, InputTooLongError
from engine.inputs.domains import default_span
from engine.inputs.domains import normalise as domain_normalise
from engine.inputs.masking import MASK_RE, marker_error
from engine.inputs.normalise import ANY_MARKER_RE, normalize_protein  # noqa: F401  (protein reading: engine/inputs/normalise.py)
from engine.inputs.word_lengths import tokens_per_word, words_to_tokens
from engine.params import real_number, whole_number

#: longest input a visitor may send (checked before tokenizing; every model takes far fewer tokens)
MAX_INPUT_CHARS = 20_000


def as_int(name: str, v) -> int:
    """A whole number, exactly (the engine's one rule: engine.params.whole_number)."""
    return whole_number(name, v)


def as_float(name: str, v) -> float:
    """A number that is not NaN (the engine's one rule: engine.params.real_number)."""
    return real_number(name, v)


#: what the page sends in place of an input longer than MAX_INPUT_CHARS (app.tabs.long_input): the
#: text itself can be larger than the request bound (app.serving.limits), which would refuse the
#: request before any handler could say what is wrong. It starts with a NUL, which no typed input
#: the studio runs contains, and says how many characters the box holds.
TOO_LONG_RE = re.compile(r"\x00too long: ([0-9]{1,12}) characters")


def typed_length(text: str) -> int:
    """How many characters the person's input has: the stand-in's count (TOO_LONG_RE) when the page
    sent one, else the text's own length."""
    m = TOO_LONG_RE.fullmatch(text)
    if m is not None and int(m.group(1)) > MAX_INPUT_CHARS:
        return int(m.group(1))
    return len(text)


def check_text(text: object) -> str:
    """The input box's value, refused before any work when it is not text or far too long."""
    if not isinstance(text, str):
        raise BadParameterError("The input must be text.")
    n = typed_length(text)
    if n > MAX_INPUT_CHARS:
        raise InputTooLongError(
            f"The input is {n:,} characters long; the studio takes at most {MAX_INPUT_CHARS:,}."
        )
    return text


#: a well-formed span sentinel: [MASK], [MASK:n] (tokens) or [MASK:nw] (words), as the engine reads it
SENTINEL_RE = MASK_RE
ANY_SENTINEL_RE = ANY_MARKER_RE


def check_sentinels(text: str) -> None:
    """Refuse a malformed sentinel such as [MASK:abc] with a message that names it (instead of
    reading it as plain text and then saying nothing is masked)."""
    for m in ANY_SENTINEL_RE.finditer(text):
        if not SENTINEL_RE.fullmatch(m.group(0)):
            raise BadParameterError(marker_error(m.group(0)))


def mask_units(domain: str, codec) -> str:
    """What the span markers mean for this domain and tokenizer, in one line for the input box."""
    n, unit = default_span(domain)
    bare = f"{n} word" + ("s" if n != 1 else "") if unit == "w" else f"{n} tokens"
    tpw = tokens_per_word(codec)
    words = (f"[MASK:nw] = n times {tpw:.1f} tokens (this tokenizer's average per word), so about n words: the "
             "fill has that many tokens, not always exactly n words"
             if tpw != 1.0 else "[MASK:nw] = n letters (one token each)")
    return f"[MASK] = {bare}; [MASK:n] = n tokens; {words}."


def word_masks(text: str, codec) -> str:
    """What each [MASK:nw] in `text` becomes, in tokens ("" when there is none): the run fills
    that many tokens, which need not read as n whole words."""
    found = [int(m.group(1)) for m in re.finditer(r"\[MASK:([0-9]+)w\]", text)]
    if not found:
        return ""
    said = ", ".join(f"[MASK:{n}w] becomes {_tokens(words_to_tokens(n, codec))}" for n in found)
    words = f"{found[0]} word" + ("s" if found[0] != 1 else "") if len(found) == 1 else "that many words"
    return f"Here {said}: the run fills exactly that many tokens, which read as about, not exactly, {words}."


def _tokens(n: int) -> str:
    return f"{n} token" + ("s" if n != 1 else "")


def normalize(domain: str, text: str) -> tuple[str, str]:
    """The input as the domain's model reads it (its registry normaliser, engine/inputs/domains.py), and a
    note about what changed ('' if nothing)."""
    return domain_normalise(domain, text)
