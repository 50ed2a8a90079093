"""A user's inputs file (--inputs FILE.jsonl): one JSON object a line with a "text" string. The
benchmarks (lab/) and the exactness check read it by this one rule, so a bad line is
reported the same way everywhere: by its number, and the other lines still run."""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import BadParameterError


def text_objects(path: str | Path) -> tuple[list[tuple[int, dict]], list[str]]:
    """(line number, object) for every line holding an object with a "text" string, and
    "FILE:LINE: why" for every other non-blank line. An unreadable file raises BadParameterError."""
    try:
        raw = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise BadParameterError(f"cannot read --inputs {path}: {e}") from None
    objects: list[tuple[int, dict]] = []
    errors: list[str] = []
    for n, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{path}:{n}: not JSON ({e.msg})")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            errors.append(f'{path}:{n}: expected an object with a "text" string')
            continue
        objects.append((n, obj))
    return objects, errors
