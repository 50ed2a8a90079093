"""How the studio reads what a person types, before any model work: whole numbers exactly, the
input's length, malformed span markers named, protein text read the way protein tools read it,
and what the span markers mean for a domain's tokenizer. Every problem is an InfillError message."""

from __future__ import annotations

import re

from engine.errors import BadParameterError, InputTooLongError
from engine.masking import DEFAULT_SPAN, MASK_RE, marker_error, tokens_per_word
from engine.params import real_number, whole_number

#: longest input a visitor may send (checked before tokenizing; every model takes far fewer tokens)
MAX_INPUT_CHARS = 20_000


def as_int(name: str, v) -> int:
    """A whole number, exactly (the engine's one rule: engine.params.whole_number)."""
    return whole_number(name, v)


def as_float(name: str, v) -> float:
    """A number that is not NaN (the engine's one rule: engine.params.real_number)."""
    return real_number(name, v)


def check_text(text: object) -> str:
    """The input box's value, refused before any work when it is not text or far too long."""
    if not isinstance(text, str):
        raise BadParameterError("The input must be text.")
    if len(text) > MAX_INPUT_CHARS:
        raise InputTooLongError(
            f"The input is {len(text):,} characters long; the studio takes at most {MAX_INPUT_CHARS:,}."
        )
    return text


#: a well-formed span sentinel: [MASK], [MASK:n] (tokens) or [MASK:nw] (words), as the engine reads it
SENTINEL_RE = MASK_RE
ANY_SENTINEL_RE = re.compile(r"\[MASK(?::[^\]]*)?\]?")


def check_sentinels(text: str) -> None:
    """Refuse a malformed sentinel such as [MASK:abc] with a message that names it (instead of
    reading it as plain text and then saying nothing is masked)."""
    for m in ANY_SENTINEL_RE.finditer(text):
        if not SENTINEL_RE.fullmatch(m.group(0)):
            raise BadParameterError(marker_error(m.group(0)))


def normalize_protein(text: str) -> tuple[str, str]:
    """A protein sequence as protein tools read it: FASTA header lines (> or ;) dropped, line breaks
    and spaces removed, letters upper-cased, a trailing stop '*' dropped; span markers kept as typed.
    Returns (sequence, a sentence saying what changed, '' when nothing did)."""
    lines = text.splitlines()
    kept = [ln for ln in lines if not ln.lstrip().startswith((">", ";"))]
    notes = []
    if len(kept) < len(lines):
        notes.append(f"dropped {len(lines) - len(kept)} FASTA header line" + ("s" if len(lines) - len(kept) > 1 else ""))
    body = "\n".join(kept)
    parts, pos, changed_case, spaces = [], 0, 0, 0
    for m in list(ANY_SENTINEL_RE.finditer(body)) + [None]:
        seg = body[pos: m.start() if m else len(body)]
        spaces += sum(1 for ch in seg if ch.isspace())
        seg = "".join(ch for ch in seg if not ch.isspace())
        changed_case += sum(1 for ch in seg if ch.islower())
        parts.append(seg.upper())
        if m:
            parts.append(m.group(0))
            pos = m.end()
    out = "".join(parts)
    if out.endswith("*"):
        out = out[:-1]
        notes.append("dropped the stop '*'")
    if spaces:
        notes.append(f"removed {spaces} line breaks and spaces")
    if changed_case:
        notes.append(f"upper-cased {changed_case} letters")
    return out, ("Read as a protein sequence: " + ", ".join(notes) + ".") if notes else ""


def mask_units(domain: str, codec) -> str:
    """What the span markers mean for this domain and tokenizer, in one line for the input box."""
    n, unit = DEFAULT_SPAN.get(domain, (8, ""))
    bare = f"{n} word" + ("s" if n != 1 else "") if unit == "w" else f"{n} tokens"
    tpw = tokens_per_word(codec)
    words = (f"[MASK:nw] = n words (about {tpw:.1f} tokens per word for this tokenizer)" if tpw != 1.0
             else "[MASK:nw] = n letters (one token each)")
    return f"[MASK] = {bare}; [MASK:n] = n tokens; {words}."


def normalize(domain: str, text: str) -> tuple[str, str]:
    """The input as the domain's model reads it, and a note about what changed ('' if nothing)."""
    if domain == "protein" and isinstance(text, str):
        return normalize_protein(text)
    return text, ""
