"""From what a person typed to what a sampler works on.

`MaskedInput` holds the token ids with masked positions, plus the unmasked text pieces *as typed*,
so the completed text is byte-identical to the input around the filled spans.

Whitespace belongs to the word. Byte-level BPE attaches the space before a word to the word
(' fire' is one token), so a mask typed after a space owns that space: the literal piece before it
loses its trailing ' ', and the model fills the span with tokens that carry their own space. Left
with the space, the model would be asked to continue a lone ' ' token, which it has rarely seen
before a word, and answers with fragments. Everything outside the (space-owning) spans comes back
byte-identical. The mirror rule: a span at the very start of the text (and, where the domain does
not indent, right after a line break) has no space to own, so its first token may not begin with
one ("[MASK] is the capital" filled " lords is the capital").

Lengths: `[MASK:n]` is n tokens; `[MASK:nw]` is n words, converted with the tokenizer's own
average tokens per word (`engine.inputs.word_lengths.tokens_per_word`). A bare `[MASK]` is one word in text and a fixed
number of tokens in code and proteins (the domain registry's `span`, engine/inputs/domains.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.errors import BadSpanLengthError, EmptyTextError, InputTooLongError, NoMaskError
from engine.inputs.tokenization import Codec
from engine.inputs.word_lengths import words_to_tokens

#: a span marker: [MASK], [MASK:n] or [MASK:nw], n in ASCII digits only (\d would also take '٣' while
#: refusing '³'; one plain rule instead, said in MARKER_HELP when a marker breaks it)
MASK_RE = re.compile(r"\[MASK(?::(-?[0-9]+)(w)?)?\]")
#: anything written as a marker with a length, well formed or not: [MASK:abc], [MASK:٣], [MASK:3.5]
LENGTH_MARKER_RE = re.compile(r"\[MASK:[^\]\[]{0,64}\]")
MARKER_HELP = "write [MASK], [MASK:n] for n tokens or [MASK:nw] for n words, n in the digits 0-9"


def marker_error(bad: str) -> str:
    """The message for a malformed span marker (the engine and the app say the same)."""
    return f"{bad[:24]!r} is not a span marker: {MARKER_HELP}."


@dataclass
class Span:
    """One filled span of the completed text, by character offsets, for the API and the app."""

    start: int  # character offsets in the completed text
    end: int
    text: str

    def to_dict(self) -> dict:
        """The span as JSON."""
        return {"start": self.start, "end": self.end, "text": self.text}


@dataclass(kw_only=True)
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
    # positions that start a span owning the space before it: their token must begin with a space
    word_starts: list[int] = field(default_factory=list)
    not_word_start: torch.Tensor | None = field(default=None, repr=False)  # [V] bool: ids that may not
    # positions of one-line code spans (a bare [MASK] alone on its line): no token with a line break
    line_positions: list[int] = field(default_factory=list)
    has_newline: torch.Tensor | None = field(default=None, repr=False)  # [V] bool: ids holding a line break
    # positions that start a span at the start of the text (or of a line, see starts_line): their token
    # may not begin with a space, there being none to own
    line_starts: list[int] = field(default_factory=list)
    space_led: torch.Tensor | None = field(default=None, repr=False)  # [V] bool: ids that begin with a space
    note: str = ""  # what the domain's normaliser changed in the typed text (engine.run_setup.parse_for)

    def constrain(self, logits: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
        """Logits [len(positions), V] with -inf where a word-start position would take a token that
        does not begin with a space, a line-start position one that does, or a one-line span would
        take a line break. Every distribution a sampler reads (draft and target alike) goes through
        this, so the constrained model is still one exact joint distribution."""
        for where, ban in ((self.word_starts, self.not_word_start), (self.line_positions, self.has_newline),
                           (self.line_starts, self.space_led)):
            if not where or ban is None:
                continue
            at = set(where)
            rows = [r for r, p in enumerate(positions) if p in at]
            if rows:
                ban = ban.to(logits.device)[: logits.shape[-1]]
                logits = logits.clone()
                logits[rows] = logits[rows].masked_fill(ban, float("-inf"))
        return logits

    @property
    def visible(self) -> list[int]:
        """Positions that are not masked: the context every sampler conditions on."""
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


def _check_chars(text: str, codec: Codec, max_tokens: int) -> None:
    """Refuse, before tokenizing, a text longer than any `max_tokens` tokens can be (Codec.max_chars)."""
    bound = codec.max_chars(max_tokens)
    if bound is not None and len(text) > bound:
        raise InputTooLongError(
            f"The input is {len(text):,} characters long: more than this model's {max_tokens} tokens can hold "
            f"(at most {bound:,} characters). Shorten the text or the masked spans."
        )


def owns_space(codec: Codec, before: str, word_boundary: bool = True) -> bool:
    """Does a span that follows the literal text `before` take over its trailing space?

    Only for byte-level tokenizers, and only one ' ' (the one BPE attaches to a word; tabs, newlines
    and further spaces stay literal, as the pre-tokenizer splits them)."""
    return word_boundary and codec.byte_level and before.endswith(" ")


def starts_line(codec: Codec, before: str | None, word_boundary: bool = True, after_newline: bool = False) -> bool:
    """Must a span that follows the literal text `before` (None: it is the first thing in the text)
    begin with a token that does not start with a space? The mirror of owns_space, under the same
    conditions: at the very start of the text there is no space to own, so a space-led first token
    would put a stray space before everything; with `after_newline` (a domain whose lines are not
    indented: engine.inputs.domains.Domain.indented) the same holds right after a line break."""
    if not (word_boundary and codec.byte_level):
        return False
    return before is None or (after_newline and before.endswith("\n"))


def _build(
    codec: Codec, parts: list[str | int], max_tokens: int, source: str, word_boundary: bool = True,
    line_spans: frozenset[int] = frozenset(), *, after_newline: bool,
) -> MaskedInput:
    """parts alternate literal text and span lengths (in tokens). A span after a space owns it; a span
    at the start of the text (after_newline: or of a line) may not begin with a space (starts_line).
    line_spans: ordinals of spans that fill one line (no token with a line break)."""
    parts = list(parts)
    owning: set[int] = set()  # indices (into parts) of spans that own the space before them
    leading: set[int] = set()  # indices (into parts) of spans whose first token may not be space-led
    for j, part in enumerate(parts):
        if not isinstance(part, int):
            continue
        before = parts[j - 1] if j > 0 else None
        if isinstance(before, str) and owns_space(codec, before, word_boundary):
            parts[j - 1] = before[:-1]
            owning.add(j)
        elif not isinstance(before, int) and starts_line(codec, before, word_boundary, after_newline):
            leading.add(j)
    starts: list[int] = []
    line_starts: list[int] = []
    n_tok = 0
    for j, part in enumerate(parts):
        if isinstance(part, str):
            n_tok += len(codec.encode(part))
        else:
            if j in owning:
                starts.append(n_tok)
            if j in leading:
                line_starts.append(n_tok)
            n_tok += part
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
    lines = [i for j, (a, b) in enumerate(ranges) if j in line_spans for i in range(a, b)]
    return MaskedInput(
        tokens=tokens,
        masked=masked,
        pieces=pieces,
        span_ranges=ranges,
        mask_id=codec.mask_id,
        source=source,
        word_starts=starts,
        not_word_start=codec.not_space_led() if starts else None,
        line_positions=lines,
        has_newline=codec.has_newline() if lines else None,
        line_starts=line_starts,
        space_led=codec.space_led() if line_starts else None,
    )


def alone_on_line(text: str, start: int, end: int) -> bool:
    """Is text[start:end] the only thing on its line, apart from indentation and trailing blanks?"""
    before = text[text.rfind("\n", 0, start) + 1: start]
    nxt = text.find("\n", end)
    after = text[end: len(text) if nxt < 0 else nxt]
    return not before.strip(" \t") and not after.strip(" \t\r")


def parse_masked_text(
    text: str,
    codec: Codec,
    *,
    max_tokens: int,
    default_span: int | tuple[int, str] = 8,
    word_boundary: bool = True,
    line_masks: bool = False,
    after_newline: bool = False,
) -> MaskedInput:
    """Text with [MASK] (default_span: tokens, or (count, "w") for words), [MASK:n] (tokens) and
    [MASK:nw] (words) sentinels. word_boundary=False keeps a space before a mask literal (the
    behaviour before masks owned their space; benchmarks use it as the 'before') and lets a span at
    the start of the text begin with a space. line_masks (code): a bare [MASK] alone on its line fills
    that one line, after its indentation: none of its tokens may hold a line break, so the line break
    after it stays the line's end. after_newline (a domain whose lines are not indented): a span right
    after a line break may not begin with a space either (starts_line)."""
    if not text or not text.strip():
        raise EmptyTextError("The input is empty: type some text with [MASK] where to fill in.")
    _check_chars(text, codec, max_tokens)  # first: 10 MB of text or markers is refused in milliseconds
    for m in LENGTH_MARKER_RE.finditer(text):
        if not MASK_RE.fullmatch(m.group(0)):
            raise BadSpanLengthError(marker_error(m.group(0)))
    parts: list[str | int] = []
    line_spans: set[int] = set()
    pos = 0
    for j, m in enumerate(MASK_RE.finditer(text)):
        if line_masks and m.group(1) is None and alone_on_line(text, m.start(), m.end()):
            line_spans.add(j)
        if m.start() > pos:
            parts.append(text[pos : m.start()])
        if m.group(1) is not None and len(m.group(1).lstrip("-")) > 9:  # int() of thousands of digits fails
            raise BadSpanLengthError(f"[MASK:{m.group(1)[:12]}…]: a span cannot be longer than the model's {max_tokens} tokens.")
        if m.group(1) is None:
            n, unit = default_span if isinstance(default_span, tuple) else (default_span, "")
        else:
            n, unit = int(m.group(1)), m.group(2) or ""
        if n <= 0:
            raise BadSpanLengthError(f"{m.group(0)}: a masked span must be at least 1 {'word' if unit else 'token'} long.")
        if unit:
            n = words_to_tokens(n, codec)
        if n > max_tokens:
            raise BadSpanLengthError(
                f"{m.group(0)}: a span cannot be longer than the model's {max_tokens} tokens."
            )
        parts.append(n)
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return _build(codec, parts, max_tokens, source=text, word_boundary=word_boundary,
                  line_spans=frozenset(line_spans), after_newline=after_newline)


def from_char_ranges(
    text: str, ranges: list[tuple[int, int]], codec: Codec, *, max_tokens: int, after_newline: bool = False
) -> MaskedInput:
    """Mask character ranges of a complete text; each span keeps its original token count. The spans
    follow the rules typed masks do (owns_space, starts_line; after_newline as in parse_masked_text),
    so a range at the start of the text that begins with a space has probability 0 there."""
    if not text:
        raise EmptyTextError("The input is empty.")
    if not ranges:
        raise NoMaskError("No character range was given to mask.")
    _check_chars(text, codec, max_tokens)
    parts: list[str | int] = []
    pos = 0
    for (a, b), (wa, _) in zip(sorted(ranges), _owning_ranges(text, ranges, codec)):
        before = text[pos:a] if a > pos else (None if a == 0 else "")
        if text[a:b].startswith(" ") and starts_line(codec, before, after_newline=after_newline):
            # a fill of a typed " [MASK]" at a line start begins with the space its span owns: that space is
            # the literal before the span here too, so the span owns it (word start) and is no line start
            before = (before or "") + " "
        if before:
            parts.append(before)  # _build moves an owned space into the span
        parts.append(len(codec.encode(text[wa:b])))  # the span's tokens, its own space included
        pos = b
    if pos < len(text):
        parts.append(text[pos:])
    source = "".join(p if isinstance(p, str) else f"[MASK:{p}]" for p in parts)
    return _build(codec, parts, max_tokens, source=source, after_newline=after_newline)


def _owning_ranges(text: str, ranges: list[tuple[int, int]], codec: Codec) -> list[tuple[int, int]]:
    """Sorted, checked character ranges, each widened to own the space before it (see owns_space).
    The same test as `_build`'s, on the literal text alone: a range that itself starts with
    whitespace owns the space before it too, else `_build` would drop that space from the literal
    piece while the span's tokens left it out ("ab  cd" with " cd" masked came back "ab cd")."""
    out: list[tuple[int, int]] = []
    pos = 0
    for a, b in sorted(ranges):
        if not (0 <= a < b <= len(text)) or a < pos:
            raise BadSpanLengthError(f"Character range {a}..{b} is empty, out of the text or overlapping.")
        if a > pos and owns_space(codec, text[pos:a]):
            a -= 1
        out.append((a, b))
        pos = b
    return out


def completed_from_ranges(
    text: str, ranges: list[tuple[int, int]], codec: Codec, *, max_tokens: int, after_newline: bool = False
) -> tuple[MaskedInput, list[int]]:
    """A completed text with the character ranges that were filled: the MaskedInput and the full
    token ids with each span re-tokenized (what `score` evaluates)."""
    mi = from_char_ranges(text, ranges, codec, max_tokens=max_tokens, after_newline=after_newline)
    tokens = list(mi.tokens)
    for (a, b), (ta, tb) in zip(_owning_ranges(text, ranges, codec), mi.span_ranges):
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
    return MaskedInput(tokens=ids, masked=pos_set, pieces=pieces, span_ranges=ranges, mask_id=codec.mask_id, source=source)
