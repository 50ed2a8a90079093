"""Characters, not tokens: a byte-level BPE token can hold part of a multi-byte character ("ü" is two
tokens in the bundled text tokenizer), so decoding a token alone prints "�". Every view therefore
decodes a run of neighbouring tokens together and gives each character to the token where its
first byte lies; the tokens that only continue a character show nothing of their own. The
concatenation of the pieces is exactly the decoded text: "Zürich" stays "Zürich"."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence


def bytes_fn(codec) -> Callable[[int], bytes]:
    """token id -> its exact bytes (`Codec.token_bytes`; a special token shows its own text)."""
    special = set(codec.special_ids)

    @functools.lru_cache(maxsize=8192)
    def of(tid: int) -> bytes:
        tid = int(tid)
        return codec.token_text(tid).encode("utf-8") if tid in special else codec.token_bytes(tid)

    return of


def _char_len(lead: int) -> int:
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # a continuation byte or an invalid lead


def byte_label(b: bytes) -> str:
    """A single token shown on its own (a rejected draft, a table row): its text when it is whole
    characters, else its bytes written as <C3> so nothing prints as "�"."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"<{x:02X}>" for x in b)


def split_run(pieces: Sequence[bytes]) -> list[str]:
    """Texts for a run of adjacent tokens: each character goes to the token holding its first byte;
    bytes that form no whole character inside the run are written as <XX>."""
    data = b"".join(pieces)
    owner: list[int] = []
    for i, p in enumerate(pieces):
        owner.extend([i] * len(p))
    out = [""] * len(pieces)
    j = 0
    while j < len(data):
        n = _char_len(data[j])
        chunk = data[j:j + n] if n else b""
        try:
            ch = chunk.decode("utf-8") if n and len(chunk) == n else None
        except UnicodeDecodeError:
            ch = None
        if ch is None:
            out[owner[j]] += f"<{data[j]:02X}>"
            j += 1
        else:
            out[owner[j]] += ch
            j += n
    return out


def char_pieces(ids: Sequence[int | None], of: Callable[[int], bytes]) -> list[str | None]:
    """Per position: its characters (None where the id is None: a gap such as a masked position,
    which also ends a run). ''.join of a gap-free run equals decoding the run."""
    out: list[str | None] = [None] * len(ids)
    i = 0
    while i < len(ids):
        if ids[i] is None:
            i += 1
            continue
        j = i
        while j < len(ids) and ids[j] is not None:
            j += 1
        for k, t in enumerate(split_run([of(t) for t in ids[i:j]])):
            out[i + k] = t
        i = j
    return out
