"""The sampler knobs, once: the table every reader takes them from, and how a knob's value is read.

`KNOBS` is the one home of a sampler parameter: its type, default, the range the engine accepts,
one plain sentence, and the narrower range the web page offers where it deliberately offers less.
The engine's checks (api.LIMITS), the CLI's flags, the app's controls and help lines, the stored
sessions' defaults and the Statistics labels all read it; which samplers read a knob is said once,
by the sampler, as the keyword arguments of its catalogue entry's run function (read as
engine.samplers.SamplerSpec.reads; `readers` lists them), which the run fills by name.
Adding a knob is one row here plus the sampler that reads it (docs/EXTENDING.md).

The rule for values, one for the Python API, the CLI and the app:

Whole-number knobs (k, steps, inner, seed) take ints, strings of ASCII digits (a 64-bit seed does
not fit a JSON double, so the HTTP API sends it as digits) and floats that are exactly whole and
below 2**53; everything else (5.5, "abc", True, None, NaN, a list) is refused with the knob's
name. Real-valued knobs (temperature, confidence, dtau) take numbers and numeric strings, never NaN or a bool.
Refusing here, before a model loads, is what keeps `steps=2.5` from failing mid-run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .errors import BadParameterError


@dataclass(frozen=True, kw_only=True)
class Knob:
    """One sampler parameter: what it is, what it defaults to and the range the engine accepts
    (`ui` and `ui_why`: a narrower range the page's slider offers on purpose, and why)."""

    name: str
    type: type  # int, float or str
    default: object  # None: the sampler's own (steps: SamplerSpec.default_steps)
    range: tuple[float, float] | None  # the engine refuses values outside; None for a choice
    help: str  # one plain sentence, shown at the control and in the CLI's --help
    ui: tuple[float, float] | None = None  # the page's narrower range (None: the page offers `range`)
    ui_why: str = ""  # why the page offers less
    ui_step: float = 1  # the slider's step
    ui_default: object = None  # the slider's start value when `default` is None
    choices: tuple[str, ...] = ()  # a choice knob's values
    group: str = ""  # knobs of one group are recorded together when a sampler reads any of them

    @property
    def page_range(self) -> tuple[float, float] | None:
        """The range the web page offers (and a served run takes, read_knobs): `ui` where set, else `range`."""
        return self.ui or self.range

    @property
    def page_default(self) -> object:
        """The control's start value on the page."""
        return self.default if self.default is not None else self.ui_default


#: every sampler parameter, in the order the page shows them (seed is not a sampler knob: SEED)
KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob(name="k", type=int, default=5, range=(1, 64),
         help="How many tokens are guessed (drafted) per round before one network call checks them all."),
    Knob(name="temperature", type=float, default=1.0, range=(0.05, 10.0),
         help="Below 1 the model picks its likeliest tokens more often; above 1 it picks more freely.",
         ui_step=0.05),
    Knob(name="steps", type=int, default=None, range=(1, 4096),
         help="How many denoising steps the diffusion model takes (more steps, more network calls).",
         ui=(1, 512), ui_why="every step is a full network pass: the public page caps a run's cost",
         ui_default=32, group="diffusion"),
    Knob(name="dtau", type=float, default=0.05, range=(1e-4, 1.0),
         help="How far the drafting window grows each outer step: larger drafts more tokens at once.",
         ui=(0.001, 1.0), ui_why="the slider moves in steps of 0.001, and a tinier window only adds passes",
         ui_step=0.001, group="diffusion"),
    Knob(name="window", type=str, default="cosine", range=None,
         help="How the drafting window grows over the run: along a cosine curve or in equal steps.",
         choices=("cosine", "linear"), group="diffusion"),
    Knob(name="inner", type=int, default=1, range=(1, 64),
         help="How many times each outer step drafts and checks again before the window grows.",
         group="diffusion"),
    Knob(name="confidence", type=float, default=0.2, range=(0.0, 1.0),
         help="How sure the n-gram drafter must stay to keep drafting a round (the product of its rows' top "
         "probabilities), below which the model samples the next token itself; 0 drafts k every round.",
         ui_step=0.05),
]}

#: the run's seed: every sampler reads it (its range is engine.seeding.SEED_MAX)
SEED = Knob(name="seed", type=int, default=0, range=None,
            help="The random numbers: the same seed, input and settings give the same run again")

#: the numeric knobs' accepted ranges (what engine.api refuses outside)
LIMITS: dict[str, tuple[float, float]] = {n: k.range for n, k in KNOBS.items() if k.range is not None}


def read_knobs(given: dict[str, object], served: bool = False) -> dict[str, object]:
    """Every knob's value for a run: each given one read by its type and checked against its range,
    each other one the table's default (None stays None where the default is None: steps, the
    sampler's own). The one place knobs are read and their ranges checked, for the Python API, the
    CLI, the exactness check and the page (whose form passes the values on unchecked and shows this
    message). `served`: a run a server admits under its budget (the page's, the HTTP API's) takes the
    page's range (`Knob.page_range`: narrower where the table says why); otherwise the engine's."""
    out: dict[str, object] = {}
    for name, k in KNOBS.items():
        v = given.get(name, k.default)
        if v is None and k.default is None:
            out[name] = None
            continue
        v = read_knob(name, v)
        if k.range is not None:
            lo, hi = k.page_range if served else k.range
            if not lo <= v <= hi:
                why = f"; {k.ui_why}" if served and k.ui else ""
                raise BadParameterError(f"{name} = {v} is outside the allowed range {lo:g} to {hi:g}{why}. "
                                        f"({k.help})")
        out[name] = v
    return out


class KnobValues(Mapping):
    """Every knob's value for one run, settled once where the request enters (`settle`) and read,
    never filled again, by everything after it: the sampler's keyword arguments (RunContext), what
    the run records and stores (`recorded`), the speed-up rerun and the exactness check and its law.
    Frozen, so no reader can change a value another reader sees. Why one value: with defaults filled
    at each reader, a knob added to the table needed a line in each, and two readers could disagree
    on a value the caller left out."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, object]):
        missing = [n for n in KNOBS if n not in values]
        if missing or set(values) - set(KNOBS):
            raise ValueError(f"KnobValues holds every knob of the table and no other: {sorted(values)}")
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __setattr__(self, name, value):
        raise AttributeError("KnobValues is frozen: settle() builds a new one")

    def __getitem__(self, name: str) -> object:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"KnobValues({dict(self._values)!r})"

    def __reduce__(self):  # copies and pickles (a page's state may be copied) rebuild it whole
        return (KnobValues, (dict(self._values),))


def refuse_unknown(given: Mapping[str, object], who: str) -> None:
    """BadParameterError naming every given name that is not a knob of the table (`who`: what was called)."""
    unknown = sorted(set(given) - set(KNOBS))
    if unknown:
        raise BadParameterError(f"{who} got unknown argument(s) {', '.join(unknown)}; its sampler knobs "
                                f"are {', '.join(KNOBS)}.")


def settle(given: Mapping[str, object], *, default_steps: int | None = None, served: bool = False,
           who: str = "InfillRun") -> KnobValues:
    """The one place a request's knobs become values: unknown names refused (`refuse_unknown`), each
    given value read by its type and checked against its range, every other one the table's default
    (`read_knobs`), and steps, whose default is the sampler's own, `default_steps` (None: left None,
    for a caller that runs several samplers, each with its own)."""
    refuse_unknown(given, who)
    values = read_knobs(given, served)
    if values["steps"] is None and default_steps is not None:
        values["steps"] = default_steps
    return KnobValues(values)


def recorded(reads: set[str] | tuple[str, ...]) -> list[str]:
    """The knobs a run records, in the table's order: the ones its sampler(s) read, widened to whole
    groups (a sampler that reads dtau records steps, window and inner too: the run's full setting)."""
    groups = {KNOBS[n].group for n in reads if n in KNOBS and KNOBS[n].group}
    return [n for n, k in KNOBS.items() if n in reads or (k.group and k.group in groups)]


def with_knobs(fn, after: str):
    """`fn`'s signature with every knob of the table as a keyword argument (its default), placed after
    the parameter `after`: what help(), inspect and the infill() argument check read, so a new knob
    row shows up in every public signature without editing it. `fn` takes the knobs as **knobs."""
    import inspect

    if not hasattr(fn, "own_signature"):  # fn's signature as written (a second call starts from it again)
        fn.own_signature = inspect.signature(fn)
    sig = fn.own_signature
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    at = [p.name for p in params].index(after) + 1
    knobs = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=k.default,
                               annotation=f"{k.type.__name__} | None" if k.default is None else k.type.__name__)
             for n, k in KNOBS.items()]
    fn.__signature__ = sig.replace(parameters=params[:at] + knobs + params[at:])
    return fn


def read_knob(name: str, v: object) -> object:
    """A knob's value by its table type (the rule below for numbers; a choice must be one of its
    values); the range check is the caller's (engine.api)."""
    k = KNOBS[name]
    if k.type is int:
        return whole_number(name, v)
    if k.type is float:
        return real_number(name, v)
    if v not in k.choices:
        raise BadParameterError(f"{name} must be {' or '.join(repr(c) for c in k.choices)}, got {str(v)[:40]!r}.")
    return v

_DIGITS = frozenset("0123456789")

#: the largest seed (the whole 64-bit range: engine.seeding fills mt19937's state from it)
SEED_MAX = 2**64 - 1
SEED_RULE = "a whole number from 0 to 18446744073709551615 (2^64 - 1), digits only"


def seed_number(v: object) -> int:
    """The seed, read exactly as documented, in one place for the engine, the app and the API: an
    int, a float only where the browser's number box holds it exactly (a whole number below 2**53),
    or a string of ASCII digits and nothing else. "1e3", "-0", " 7 ", "+7" and "7.0" are refused:
    a seed names one random stream, and text that reads two ways would make a share link lie about
    which run it reproduces."""
    if isinstance(v, str) and not (v and set(v) <= _DIGITS):
        raise BadParameterError(f"seed must be {SEED_RULE}; got {v[:40]!r}.")
    seed = whole_number("seed", v)
    if not 0 <= seed <= SEED_MAX:
        raise BadParameterError(f"seed = {seed} is outside the range: it must be {SEED_RULE}.")
    return seed


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
