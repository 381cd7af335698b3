"""Acks, backup accounting, rank agreement, threshold and timeout (CTL, RANK families)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import (
    agree_hit_pages,
    compute_backup_progress,
    compute_prefetch_acks,
    compute_prefetch_timeout,
    is_prefetch_worth_it,
)

slice_plans = st.lists(st.integers(min_value=1, max_value=128), max_size=6).flatmap(
    lambda sizes: st.tuples(
        st.just(tuple(sizes)),
        st.integers(min_value=0, max_value=len(sizes)).flatmap(
            lambda read: st.tuples(*[st.integers(min_value=0, max_value=sizes[i]) for i in range(read)])
        ),
        st.integers(min_value=1, max_value=64),
    )
)


@pytest.mark.clause("CTL-4", "CTL-5", "RANK-3")
@given(slice_plans)
def test_prefetch_acks_one_per_slice_cumulative_frozen_after_failure(plan):
    sizes, loaded, page_size = plan
    acks = compute_prefetch_acks(sizes, loaded, page_size)
    assert len(acks) == len(sizes)  # RANK-3: every rank emits the same number
    expected, total, stopped = [], 0, False
    for index in range(len(sizes)):
        if not stopped and index < len(loaded):
            total += loaded[index] * page_size
            stopped = loaded[index] < sizes[index]
        else:
            stopped = True
        expected.append(total)
    assert list(acks) == expected
    assert all(a <= b for a, b in zip(acks, acks[1:]))


@pytest.mark.clause("CTL-5", "CTL-6")
def test_acks_freeze_after_a_short_slice_even_if_later_slices_report_pages():
    # A controller that kept reading after a short slice must not count those pages.
    assert compute_prefetch_acks((128, 128, 128), (128, 5, 128), 2) == (256, 266, 266)
    assert compute_prefetch_acks((128, 128), (), 4) == (0, 0)  # terminated before IO


@pytest.mark.clause("CTL-7")
@given(
    st.lists(st.tuples(st.integers(min_value=1, max_value=128), st.booleans()), max_size=6),
    st.integers(min_value=1, max_value=64),
)
def test_backup_counts_leading_successful_slices(slices, page_size):
    sizes = tuple(size for size, _ in slices)
    outcomes = tuple(ok for _, ok in slices)
    expected = 0
    for size, ok in slices:
        if not ok:
            break
        expected += size
    assert compute_backup_progress(sizes, outcomes, page_size) == expected * page_size


@pytest.mark.clause("RANK-1", "RANK-2")
@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8))
def test_agreement_is_the_minimum(hits):
    assert agree_hit_pages(tuple(hits)) == min(hits)


@pytest.mark.clause("CTL-3")
@pytest.mark.parametrize("tokens, ok", [(0, False), (255, False), (256, True), (257, True)])
def test_prefetch_threshold_boundaries(tokens, ok):
    assert is_prefetch_worth_it(tokens) is ok


@pytest.mark.clause("CTL-10")
@pytest.mark.parametrize(
    "tokens, expected",
    [(0, 2.0), (1024, 2.1), (10_240, 3.0), (286_720, 30.0), (1_000_000, 30.0)],
)
def test_prefetch_timeout_defaults_and_cap(tokens, expected):
    assert compute_prefetch_timeout(tokens) == pytest.approx(expected)


@pytest.mark.clause("CTL-10")
@given(st.integers(min_value=0, max_value=10**7), st.floats(0, 100), st.floats(0, 10), st.floats(0, 100))
def test_prefetch_timeout_formula(tokens, base, per_ki, maximum):
    assert compute_prefetch_timeout(tokens, base, per_ki, maximum) == min(maximum, base + per_ki * tokens / 1024)


@pytest.mark.clause("CTL-3")
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_prefetch_threshold_property(tokens, threshold):
    assert is_prefetch_worth_it(tokens, threshold) == (tokens > 0 and tokens >= threshold)
