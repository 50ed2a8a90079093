"""From what a person typed to what a sampler works on.

`MaskedInput` holds the token ids with masked positions, plus the unmasked text pieces *as typed*,
so the completed text is byte-identical to the input around the filled spans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import BadSpanLengthError, EmptyTextError, InputTooLongError, NoMaskError
from .tokenization import Codec

MASK_RE = re.compile(r"\[MASK(?::(-?\d+))?\]")

#: tokens a bare [MASK] stands for, per domain
DEFAULT_SPAN = {"text": 8, "code": 8, "protein": 10}


@dataclass
class Span:
    start: int  # character offsets in the completed text
    end: int
    text: str

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "text": self.text}


@dataclass
class MaskedInput:
    """tokens[i] is the id at position i (mask id where masked); masked is sorted ascending.

    pieces[j] is the literal text before span j (pieces has len(spans) + 1 entries) and
    span_ranges[j] is the token range [a, b) span j occupies.
    """

    tokens: list[int]
    masked: list[int]
    pieces: list[str]
    span_ranges: list[tuple[int, int]]
    mask_id: int
    source: str = ""  # the input as typed (with sentinels), for storage and display
    meta: dict = field(default_factory=dict)

    @property
    def visible(self) -> list[int]:
        m = set(self.masked)
        return [i for i in range(len(self.tokens)) if i not in m]

    def fill(self, codec: Codec, decided: dict[int, int]) -> tuple[str, list[Span]]:
        """Completed text and the filled spans, from position -> token decisions."""
        out, spans, cursor = [], [], 0
        for j, (a, b) in enumerate(self.span_ranges):
            out.append(self.pieces[j])
            cursor += len(self.pieces[j])
            ids = [decided.get(i, self.tokens[i]) for i in range(a, b)]
            text = codec.decode([t for t in ids if t != self.mask_id]) if ids else ""
            spans.append(Span(cursor, cursor + len(text), text))
            out.append(text)
            cursor += len(text)
        out.append(self.pieces[-1])
        return "".join(out), spans


def _check_length(n_tokens: int, max_tokens: int) -> None:
    if n_tokens > max_tokens:
        raise InputTooLongError(
            f"The input is {n_tokens} tokens long; this model takes at most {max_tokens}. "
            "Shorten the text or the masked spans."
        )


def _build(codec: Codec, parts: list[str | int], max_tokens: int, source: str) -> MaskedInput:
    """parts alternate literal text and span lengths (in tokens)."""
    tokens: list[int] = []
    pieces: list[str] = [""]
    ranges: list[tuple[int, int]] = []
    for part in parts:
        if isinstance(part, str):
            pieces[-1] += part
            tokens.extend(codec.encode(part))
        else:
            ranges.append((len(tokens), len(tokens) + part))
            tokens.extend([codec.mask_id] * part)
            pieces.append("")
    if not ranges:
        raise NoMaskError("Nothing is masked: add [MASK] or [MASK:n] where the model should fill in.")
    _check_length(len(tokens), max_tokens)
    masked = [i for a, b in ranges for i in range(a, b)]
    return MaskedInput(tokens, masked, pieces, ranges, codec.mask_id, source=source)


def parse_masked_text(
    text: str, codec: Codec, *, max_tokens: int, default_span: int = 8
) -> MaskedInput:
    """Text with [MASK] (default_span tokens) and [MASK:n] sentinels."""
    if not text or not text.strip():
        raise EmptyTextError("The input is empty: type some text with [MASK] where to fill in.")
    parts: list[str | int] = []
    pos = 0
    for m in MASK_RE.finditer(text):
        if m.start() > pos:
            parts.append(text[pos : m.start()])
        if m.group(1) is not None and len(m.group(1).lstrip("-")) > 9:  # int() of thousands of digits fails
            raise BadSpanLengthError(f"[MASK:{m.group(1)[:12]}…]: a span cannot be longer than the model's {max_tokens} tokens.")
        n = default_span if m.group(1) is None else int(m.group(1))
        if n <= 0:
            raise BadSpanLengthError(f"{m.group(0)}: a masked span must be at least 1 token long.")
        if n > max_tokens:
            raise BadSpanLengthError(
                f"{m.group(0)}: a span cannot be longer than the model's {max_tokens} tokens."
            )
        parts.append(n)
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return _build(codec, parts, max_tokens, source=text)


def from_char_ranges(
    text: str, ranges: list[tuple[int, int]], codec: Codec, *, max_tokens: int
) -> MaskedInput:
    """Mask character ranges of a complete text; each span keeps its original token count."""
    if not text:
        raise EmptyTextError("The input is empty.")
    if not ranges:
        raise NoMaskError("No character range was given to mask.")
    parts: list[str | int] = []
    pos = 0
    for a, b in sorted(ranges):
        if not (0 <= a < b <= len(text)) or a < pos:
            raise BadSpanLengthError(f"Character range {a}..{b} is empty, out of the text or overlapping.")
        if a > pos:
            parts.append(text[pos:a])
        parts.append(len(codec.encode(text[a:b])))
        pos = b
    if pos < len(text):
        parts.append(text[pos:])
    source = "".join(p if isinstance(p, str) else f"[MASK:{p}]" for p in parts)
    return _build(codec, parts, max_tokens, source=source)


def completed_from_ranges(
    text: str, ranges: list[tuple[int, int]], codec: Codec, *, max_tokens: int
) -> tuple[MaskedInput, list[int]]:
    """A completed text with the character ranges that were filled: the MaskedInput and the full
    token ids with each span re-tokenized (what `score` evaluates)."""
    mi = from_char_ranges(text, ranges, codec, max_tokens=max_tokens)
    tokens = list(mi.tokens)
    for (a, b), (ta, tb) in zip(sorted(ranges), mi.span_ranges):
        tokens[ta:tb] = codec.encode(text[a:b])
    return mi, tokens


def char_groups(tokens: list[int], codec: Codec) -> list[int]:
    """Group id of every token: a group is the shortest run of tokens that starts and ends on a
    character boundary (one token, unless a byte-level token holds only part of a character)."""
    groups, g, data = [], -1, b"".join(codec.token_bytes(t) for t in tokens)
    offset = 0
    for t in tokens:
        if offset == 0 or offset >= len(data) or (data[offset] & 0xC0) != 0x80:  # not a UTF-8 continuation byte
            g += 1
        groups.append(g)
        offset += len(codec.token_bytes(t))
    return groups


def snap_to_characters(tokens: list[int], positions: list[int], codec: Codec) -> list[int]:
    """Masked positions widened to whole characters: masking half of a two-byte character would
    leave the other half as undecodable text outside the span (and "naïve" would not come back)."""
    groups = char_groups(tokens, codec)
    hit = {groups[i] for i in positions if 0 <= i < len(tokens)}
    return sorted({*(i for i, g in enumerate(groups) if g in hit), *positions})


def from_token_positions(
    tokens: list[int], positions: list[int], codec: Codec, *, max_tokens: int
) -> MaskedInput:
    """Mask given token positions of an already tokenized text (the app's click-to-mask view, the
    benchmark workloads). Positions are widened to whole characters (`snap_to_characters`), so the
    text outside the spans decodes, and comes back, byte-identical."""
    if not tokens:
        raise EmptyTextError("The input is empty.")
    if not positions:
        raise NoMaskError("No token is masked: click tokens to mask them.")
    if min(positions) < 0 or max(positions) >= len(tokens):
        raise BadSpanLengthError("A masked token position lies outside the text.")
    pos_set = snap_to_characters(tokens, positions, codec)
    lookup = set(pos_set)
    _check_length(len(tokens), max_tokens)
    # The ids are kept exactly as given: decoding a run and encoding it again may tokenize it
    # differently (and change its length), so only the literal pieces are decoded.
    pieces: list[str] = [""]
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        j = i
        masked_run = i in lookup
        while j < len(tokens) and (j in lookup) == masked_run:
            j += 1
        if masked_run:
            ranges.append((i, j))
            pieces.append("")
        else:
            pieces[-1] += codec.decode(tokens[i:j])
        i = j
    source = pieces[0] + "".join(f"[MASK:{b - a}]{piece}" for (a, b), piece in zip(ranges, pieces[1:]))
    ids = [codec.mask_id if i in lookup else t for i, t in enumerate(tokens)]
    return MaskedInput(ids, pos_set, pieces, ranges, codec.mask_id, source=source)
