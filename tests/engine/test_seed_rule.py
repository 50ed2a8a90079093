"""The seed is read by one rule (engine.params.seed_number) everywhere: the API, the exactness
check and the page refuse the same texts with the same message."""

from __future__ import annotations

import pytest

from engine.errors import BadParameterError
from engine.params import SEED_MAX, seed_number


@pytest.mark.parametrize("bad", ["1e3", "-0", " 7 ", "7 ", "+7", "7.0", "0x10", "", "٣", str(SEED_MAX + 1), -1, 1.5,
                                 2.0**53, True, None])
def test_seed_texts_that_read_two_ways_are_refused(bad):
    with pytest.raises(BadParameterError, match="seed"):
        seed_number(bad)


def test_the_documented_seeds_are_read_exactly():
    assert seed_number("0") == 0
    assert seed_number("007") == 7
    assert seed_number(str(SEED_MAX)) == SEED_MAX
    assert seed_number(SEED_MAX) == SEED_MAX
    assert seed_number(12.0) == 12  # the browser's number box: exact below 2**53


def test_the_message_says_what_a_seed_is():
    with pytest.raises(BadParameterError) as e:
        seed_number(" 7 ")
    assert "digits only" in str(e.value) and "' 7 '" in str(e.value)


def test_the_engine_and_the_exactness_check_use_the_rule():
    from engine.api import InfillRun

    with pytest.raises(BadParameterError, match="digits only"):
        InfillRun("a [MASK] b", seed="1e3")
