"""The value rules of engine.params, each at its edge: how a knob's text or number is read, which
range a served run gets, what a refusal says, the frozen KnobValues and the public signatures the
table writes. Fast and literal, so a mutated comparison or message in the module fails here
(tests/mutation/run.py runs this file against engine/params.py)."""

from __future__ import annotations

import copy
import inspect
import pickle

import pytest

from engine.errors import BadParameterError
from engine.params import (
    KNOBS,
    KnobValues,
    _short,
    read_knob,
    read_knobs,
    real_number,
    recorded,
    seed_number,
    settle,
    whole_number,
    with_knobs,
)

# -- whole numbers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("given, value", [("5", 5), (" 7 ", 7), ("5.0", 5), (200.0, 200), (2.0**53 - 1, 2**53 - 1),
                                          ("1234567890" * 2, 12345678901234567890), ("7" * 40, int("7" * 40))])
def test_whole_numbers_are_read_exactly(given, value):
    got = whole_number("k", given)
    assert got == value and type(got) is int


@pytest.mark.parametrize("given", ["", "abc", "5.5", "٣", 5.5, True, None, [5], float("nan"), float("inf")])
def test_what_is_not_a_whole_number_is_refused_by_name(given):
    with pytest.raises(BadParameterError, match=r"^k must be a whole number, got "):
        whole_number("k", given)


def test_a_whole_number_too_large_for_a_double_is_refused():
    with pytest.raises(BadParameterError, match=r"^k = 9007199254740992.0 is too large to be exact"):
        whole_number("k", 2.0**53)
    with pytest.raises(BadParameterError, match=r"^k = '9007199254740992.0' is too large"):
        whole_number("k", "9007199254740992.0")


def test_more_than_forty_digits_is_refused_before_it_is_read():
    with pytest.raises(BadParameterError, match=r"^seed has 41 digits: far beyond its range\.$"):
        whole_number("seed", "1" * 41)


def test_the_refusal_quotes_a_string_as_given():
    with pytest.raises(BadParameterError) as e:
        whole_number("steps", "abc")
    assert str(e.value) == "steps must be a whole number, got 'abc'."


# -- real numbers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("given, value", [("0.5", 0.5), (" 2 ", 2.0), (3, 3.0), (0.25, 0.25),
                                          ("0." + "0" * 61 + "1", 1e-62)])  # 64 characters: read
def test_real_numbers_are_read(given, value):
    assert real_number("temperature", given) == value


@pytest.mark.parametrize("given, says", [
    (True, "temperature must be a number, got bool True."),
    ([1], "temperature must be a number, got list [1]."),
    ("abc", "temperature must be a number, got 'abc'."),
    ("٣", "temperature must be a number, got '٣'."),  # float() reads it as 3; the rule is ASCII
    ("0." + "0" * 62 + "1", "temperature must be a number, got '0.0000000000000000000000000000000000000…."),  # 65
    (float("nan"), "temperature must be a number, got nan."),
])
def test_what_is_not_a_number_is_refused_by_name(given, says):
    with pytest.raises(BadParameterError) as e:
        real_number("temperature", given)
    assert str(e.value) == says


def test_read_knob_names_the_knob_it_reads():
    with pytest.raises(BadParameterError, match=r"^temperature must be a number"):
        read_knob("temperature", "warm")
    with pytest.raises(BadParameterError, match=r"^window must be 'cosine' or 'linear', got 'square'\.$"):
        read_knob("window", "square")


def test_a_long_value_is_cut_at_forty_characters():
    assert _short("a" * 38) == "'" + "a" * 38 + "'"  # repr: 40 characters, kept whole
    assert _short("a" * 39) == "'" + "a" * 39 + "…"  # 41: cut to 40 and marked
    assert _short(12) == "12"


# -- seeds -----------------------------------------------------------------------------------------

def test_a_seed_of_every_digit_is_read():
    assert seed_number("1234567890") == 1234567890
    assert seed_number(str(2**64 - 1)) == 2**64 - 1


# -- ranges and who is refused ---------------------------------------------------------------------

def test_the_engine_range_is_inclusive_and_a_served_run_gets_the_pages():
    assert read_knobs({"k": 64})["k"] == 64 and read_knobs({"k": 1})["k"] == 1
    assert read_knobs({"steps": 1000})["steps"] == 1000  # the engine's range (not served by default)
    assert settle({"steps": 1000})["steps"] == 1000
    with pytest.raises(BadParameterError) as e:
        read_knobs({"steps": 1000}, served=True)
    assert str(e.value) == (f"steps = 1000 is outside the allowed range 1 to 512; {KNOBS['steps'].ui_why}. "
                            f"({KNOBS['steps'].help})")


def test_the_pages_reason_is_given_only_to_a_served_run_of_a_narrowed_knob():
    with pytest.raises(BadParameterError) as e:
        read_knobs({"k": 65}, served=True)  # k: the page offers the engine's range, no reason to give
    assert str(e.value) == f"k = 65 is outside the allowed range 1 to 64. ({KNOBS['k'].help})"
    with pytest.raises(BadParameterError) as e:
        read_knobs({"steps": 5000})  # not served: the engine's range, and no word of the page's
    assert str(e.value) == f"steps = 5000 is outside the allowed range 1 to 4096. ({KNOBS['steps'].help})"


def test_settle_names_the_caller_and_every_unknown_name():
    with pytest.raises(BadParameterError) as e:
        settle({"bogus": 1, "also": 2})
    assert str(e.value).startswith("InfillRun got unknown argument(s) also, bogus; its sampler knobs are k, ")
    with pytest.raises(BadParameterError, match=r"^infill\(\) got unknown"):
        settle({"bogus": 1}, who="infill()")


def test_settle_fills_steps_from_the_sampler_only_where_none_was_given():
    assert settle({}, default_steps=24)["steps"] == 24
    assert settle({"steps": 3}, default_steps=24)["steps"] == 3
    assert settle({})["steps"] is None


# -- recorded knobs --------------------------------------------------------------------------------

def test_a_run_records_what_its_sampler_reads_widened_to_whole_groups():
    assert recorded(("seed", "k")) == ["k"]  # a name that is no knob of the table is passed over
    assert recorded({"temperature", "dtau"}) == ["temperature", "steps", "dtau", "window", "inner"]


# -- KnobValues ------------------------------------------------------------------------------------

def test_knob_values_hold_every_knob_and_no_other():
    full = read_knobs({})
    with pytest.raises(ValueError, match="every knob of the table and no other"):
        KnobValues({n: v for n, v in full.items() if n != "k"})  # one missing
    with pytest.raises(ValueError, match="every knob of the table and no other"):
        KnobValues({**full, "extra": 1})  # one too many
    kv = KnobValues(full)
    assert dict(kv) == full and len(kv) == len(KNOBS)


def test_knob_values_survive_copies_and_pickles_whole():
    kv = settle({"k": 3, "temperature": 0.5})
    for other in (copy.deepcopy(kv), copy.copy(kv), pickle.loads(pickle.dumps(kv))):
        assert isinstance(other, KnobValues) and dict(other) == dict(kv)
    with pytest.raises(AttributeError, match="frozen"):
        kv.k = 9


# -- the signatures the table writes ---------------------------------------------------------------

def test_with_knobs_places_every_knob_after_the_named_parameter_once():
    def fill(text: str, sampler: str = "x", *, seed: int = 0, **knobs):
        return knobs

    for _ in range(2):  # a second call starts again from the signature as written
        sig = inspect.signature(with_knobs(fill, "sampler"))
    params = list(sig.parameters.values())
    assert [p.name for p in params] == ["text", "sampler", *KNOBS, "seed"]
    for p in params[2:-1]:
        k = KNOBS[p.name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default == k.default
        assert p.annotation == (f"{k.type.__name__} | None" if k.default is None else k.type.__name__)
    assert sig.parameters["steps"].annotation == "int | None"
    assert sig.parameters["k"].annotation == "int" and sig.parameters["window"].annotation == "str"
    assert fill("t", k=2) == {"k": 2}  # the function itself is unchanged
