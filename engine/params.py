"""How a sampler knob's value is read, the one rule for the Python API, the CLI and the app.

Whole-number knobs (k, steps, inner, seed) take ints, strings of ASCII digits (a 64-bit seed does
not fit a JSON double, so the HTTP API sends it as digits) and floats that are exactly whole and
below 2**53; everything else (5.5, "abc", True, None, NaN, a list) is refused with the knob's
name. Real-valued knobs (temperature, dtau) take numbers and numeric strings, never NaN or a bool.
Refusing here, before a model loads, is what keeps `steps=2.5` from failing mid-run.
"""

from __future__ import annotations

import math

from .errors import BadParameterError

_DIGITS = frozenset("0123456789")


def whole_number(name: str, v: object) -> int:
    """A whole number, exactly: ints and ASCII-digit strings as they are (a seed may need all 64
    bits), floats only where a double holds the value exactly (below 2**53)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip()
        if s and set(s) <= _DIGITS:
            if len(s) > 40:  # far beyond any knob's range (a seed has at most 20 digits)
                raise BadParameterError(f"{name} has {len(s):,} digits: far beyond its range.")
            return int(s)
        try:
            f = _ascii_float(s)
        except ValueError:
            raise BadParameterError(f"{name} must be a whole number, got {v[:40]!r}.") from None
    elif isinstance(v, float):
        f = v
    else:
        raise BadParameterError(f"{name} must be a whole number, got {type(v).__name__} {_short(v)}.")
    if not math.isfinite(f) or f != int(f):
        raise BadParameterError(f"{name} must be a whole number, got {_short(v)}.")
    if abs(f) >= 2**53:
        raise BadParameterError(f"{name} = {_short(v)} is too large to be exact as a decimal number; send it as a "
                                "whole number (an integer, or a string of digits).")
    return int(f)


def real_number(name: str, v: object) -> float:
    """A finite-or-infinite number that is not NaN (a range check then refuses the infinities)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise BadParameterError(f"{name} must be a number, got {type(v).__name__} {_short(v)}.")
    try:
        f = _ascii_float(v.strip()) if isinstance(v, str) else float(v)
    except (ValueError, OverflowError):
        raise BadParameterError(f"{name} must be a number, got {_short(v)}.") from None
    if math.isnan(f):
        raise BadParameterError(f"{name} must be a number, got {_short(v)}.")
    return f


def _ascii_float(s: str) -> float:
    """float() of a string written in ASCII (Python's float() also reads '٣' as 3; the studio's
    rule is ASCII digits only, as for span lengths in [MASK:n])."""
    if not s.isascii() or len(s) > 64:
        raise ValueError(s)
    return float(s)


def _short(v: object) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:40] + "…"
