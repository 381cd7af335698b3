"""``hicache_spec.confirmation``: what a backend result confirms (CTL-11), at every boundary.

Scenario: v1 results of each shape (exact list of True, a False or a truthy
non-True entry inside, wrong lengths, tuples, non-sequences) and hit-query
results (ints at and beyond the bounds, bools, floats, None).
Expected: the leading run of entries that are a true flag (``True``, numpy's
included), only for a list of exactly ``count`` entries (a tuple too with
``snapshot=True``); a hit is a count in ``[0, count]`` as SGLang reads one (an
int, a bool, numpy's integers), else 0.
"""

from __future__ import annotations

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec.confirmation import confirmed_hit, confirmed_pages

PAGES = [
    ([True, True, True], 3, 3),
    ([True, False, True], 3, 1),
    ([False, True, True], 3, 0),
    ([], 0, 0),
    ([True, 1, True], 3, 1),
    ([numpy.True_, numpy.True_, numpy.False_], 3, 2),
    ([True, numpy.int64(1), True], 3, 1),
    ([True, True, None], 3, 2),
    ([True, True], 3, 0),
    ([True] * 4, 3, 0),
    ((True, True, True), 3, 0),
    (None, 3, 0),
    (True, 1, 0),
    ("TTT", 3, 0),
    ({0: True}, 1, 0),
]


@pytest.mark.clause("CTL-11", "BE-14")
@pytest.mark.parametrize("result,count,expected", PAGES, ids=repr)
def test_confirmed_pages(result, count, expected):
    assert confirmed_pages(result, count) == expected


@pytest.mark.clause("CTL-11")
def test_a_snapshot_tuple_counts_as_the_list_it_copies():
    assert confirmed_pages((True, True, False), 3, snapshot=True) == 2
    assert confirmed_pages((True, True), 3, snapshot=True) == 0
    assert confirmed_pages([True, True, True], 3, snapshot=True) == 3
    assert confirmed_pages("TTT", 3, snapshot=True) == 0


@pytest.mark.clause("CTL-11", "BE-2")
@pytest.mark.parametrize(
    "result,expected",
    [
        (0, 0),
        (1, 1),
        (4, 4),
        (5, 0),
        (-1, 0),
        (True, 1),
        (False, 0),
        (numpy.int64(3), 3),
        (numpy.int64(5), 0),
        (numpy.True_, 0),
        (2.0, 0),
        (None, 0),
        ("2", 0),
    ],
    ids=repr,
)
def test_confirmed_hit(result, expected):
    got = confirmed_hit(result, 4)
    assert got == expected and type(got) is int


@pytest.mark.clause("CTL-11")
@given(st.lists(st.sampled_from([True, False, 1, 0, None, numpy.True_, numpy.False_])), st.integers(0, 8))
def test_confirmed_pages_is_a_leading_run_of_true(flags, count):
    got = confirmed_pages(flags, count)
    assert 0 <= got <= count
    if len(flags) != count:
        assert got == 0
    else:
        true_flags = (True, numpy.True_)
        assert all(any(flag is true for true in true_flags) for flag in flags[:got])
        assert got == count or not any(flags[got] is true for true in true_flags)
