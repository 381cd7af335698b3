"""``is_count``: the one strict-int rule (an int itself, within bounds)."""

from __future__ import annotations

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec.values import is_count


class Small(enum.IntEnum):
    ONE = 1


def _planted_isinstance(value, minimum=0, maximum=None):  # the loose check: bools and IntEnums pass
    return isinstance(value, int) and value >= minimum and (maximum is None or value <= maximum)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, Small.ONE])
def test_what_is_not_an_int_itself_is_refused(value) -> None:
    assert not is_count(value)


def test_the_loose_check_lets_a_bool_and_an_int_enum_through() -> None:
    assert _planted_isinstance(True) and _planted_isinstance(Small.ONE)


@given(st.integers(-5, 50), st.integers(-5, 5), st.one_of(st.none(), st.integers(5, 60)))
def test_an_int_counts_exactly_within_its_bounds(value: int, minimum: int, maximum) -> None:
    assert is_count(value, minimum, maximum) == (value >= minimum and (maximum is None or value <= maximum))
