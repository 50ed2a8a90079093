"""How typed text is read before tokenizing, where a domain reads it its own way: anything shaped
like a span marker found loosely (so a malformed one can be named and kept as typed), and protein
sequences read the way protein tools read them. A leaf (only `re` and the leaf engine/wording.py), so
the domain registry (engine/inputs/domains.py) can name a domain's normaliser without an import cycle."""

from __future__ import annotations

import re

from engine.wording import plural

#: anything shaped like a span marker, well formed or not ([MASK], [MASK:abc], an unclosed [MASK:3)
ANY_MARKER_RE = re.compile(r"\[MASK(?::[^\]]*)?\]?")


def normalize_protein(text: str) -> tuple[str, str]:
    """A protein sequence as protein tools read it: FASTA header lines (> or ;) dropped, line breaks
    and spaces removed, letters upper-cased, a trailing stop '*' dropped; span markers kept as typed.
    Returns (sequence, a sentence saying what changed, '' when nothing did)."""
    lines = text.splitlines()
    kept = [ln for ln in lines if not ln.lstrip().startswith((">", ";"))]
    notes = []
    if len(kept) < len(lines):
        notes.append("dropped " + plural(len(lines) - len(kept), "FASTA header line"))
    body = "\n".join(kept)
    parts, pos, changed_case, spaces = [], 0, 0, 0
    for m in list(ANY_MARKER_RE.finditer(body)) + [None]:
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
        notes.append(f"removed {spaces} line breaks and spaces" if spaces != 1 else "removed 1 line break or space")
    if changed_case:
        notes.append("upper-cased " + plural(changed_case, "letter"))
    return out, ("Read as a protein sequence: " + ", ".join(notes) + ".") if notes else ""
