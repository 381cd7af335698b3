"""``is_count``: the one count rule (an int itself, or with ``exact=False`` an int of any kind or an index at least 32
bits wide, within bounds)."""

from __future__ import annotations

import enum
import operator

import numpy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec.values import is_count, is_flag, is_numpy_scalar, is_true_flag


class Small(enum.IntEnum):
    ONE = 1


def _planted_isinstance(value, minimum=0, maximum=None):  # the loose check: bools and IntEnums pass
    return isinstance(value, int) and value >= minimum and (maximum is None or value <= maximum)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, Small.ONE])
def test_what_is_not_an_int_itself_is_refused(value) -> None:
    assert not is_count(value)


@pytest.mark.parametrize("value", [1.0, "1", numpy.True_, numpy.float64(1.0)])
def test_a_returned_count_is_refused_when_a_slice_would_refuse_it(value) -> None:
    assert not is_count(value, exact=False)
    with pytest.raises(TypeError):
        ["a", "b"][:value]  # SGLang cuts the key list with the count


def _planted_any_index(value) -> bool:  # the loose reading: whatever a slice takes passes, narrow integers too
    try:
        return operator.index(value) >= 0
    except TypeError:
        return False


class OnlyAnIndex:
    def __index__(self) -> int:
        return 3


@pytest.mark.parametrize("value", [numpy.int8(3), numpy.int16(600), numpy.uint8(5), OnlyAnIndex()])
def test_a_returned_count_is_refused_when_the_page_product_would_go_wrong(value) -> None:
    assert not is_count(value, exact=False)
    assert _planted_any_index(value)  # the loose reading lets it through
    try:
        with numpy.errstate(over="ignore"):
            product = value * 64  # SGLang's tokens: the count times the page size, in the count's own type
    except TypeError:
        return  # no product at all
    assert product != operator.index(value) * 64


@pytest.mark.parametrize("value", [numpy.int32(3), numpy.uint32(3), numpy.int64(3), numpy.uint64(3)])
def test_a_returned_count_of_32_bits_or_more_multiplies_exactly(value) -> None:
    assert is_count(value, exact=False) and value * 64 == 192


def test_no_count_is_not_a_count() -> None:
    assert not is_count(None, exact=False)


@pytest.mark.parametrize("value", [True, Small.ONE, numpy.int64(1), numpy.int32(1)])
def test_a_returned_count_is_read_as_the_index_a_slice_takes(value) -> None:
    assert is_count(value, exact=False) and is_count(value, 1, 1, exact=False)
    assert not is_count(value, 2, exact=False) and not is_count(value, 0, 0, exact=False)
    assert ["a", "b"][:value] == ["a"]


def test_the_loose_check_lets_a_bool_and_an_int_enum_through() -> None:
    assert _planted_isinstance(True) and _planted_isinstance(Small.ONE)


bounded_ints = st.tuples(st.integers(-5, 50), st.integers(-5, 5), st.one_of(st.none(), st.integers(5, 60)))


def check_bounds(impl, case) -> None:
    """An int counts iff it is one of the values from minimum up to maximum, listed (not the spec's comparisons)."""
    value, minimum, maximum = case
    allowed = range(minimum, (maximum if maximum is not None else max(value, minimum)) + 1)
    assert impl(value, minimum, maximum) == (value in list(allowed))


@given(bounded_ints, st.booleans())
def test_an_int_counts_exactly_within_its_bounds(case, exact) -> None:
    check_bounds(lambda *bounds: is_count(*bounds, exact=exact), case)


def test_the_bounds_oracle_refutes_an_exclusive_maximum() -> None:
    from tests.spec.test_planted import is_refuted

    def exclusive(value, minimum=0, maximum=None):  # planted: the maximum itself refused
        return type(value) is int and value >= minimum and (maximum is None or value < maximum)

    assert is_refuted(lambda case: check_bounds(exclusive, case), bounded_ints)


@pytest.mark.parametrize("value", [True, False, numpy.True_, numpy.False_])
def test_a_flag_is_a_bool_or_numpys(value) -> None:
    assert is_flag(value)


@pytest.mark.parametrize("value", [1, 0, None, "True", numpy.int64(1), 1.0, [True]])
def test_a_truthy_value_that_is_no_bool_is_no_flag(value) -> None:
    assert not is_flag(value)


@pytest.mark.parametrize(
    "value, expected", [(True, True), (numpy.True_, True), (False, False), (numpy.False_, False), (1, False)]
)
def test_a_true_flag_is_a_flag_that_says_yes(value, expected) -> None:
    assert is_true_flag(value) is expected


@pytest.mark.parametrize(
    "value, expected", [(numpy.int64(1), True), (numpy.True_, True), (numpy.zeros(1), False), (1, False)]
)
def test_numpys_scalars_are_told_by_type(value, expected) -> None:
    assert is_numpy_scalar(value) is expected
