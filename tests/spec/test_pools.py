"""Pool-hit folding against an independent brute-force definition (HYB-6, HYB-7, HYB-8, BE-21, HYB-3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import (
    ALL_PAGES,
    TRAILING_PAGES,
    compute_pool_hit,
    compute_trailing_window,
    count_pool_hits,
    fold_pool_hits,
)


def brute_force_pool_hit(policy, window, present, kv_hit) -> int:
    """The largest n <= kv_hit the policy accepts, found by trying every n."""
    size = max(1, window)

    def accepts(n: int) -> bool:
        if policy == ALL_PAGES:
            return all(present[i] for i in range(n))
        return n > 0 and all(present[i] for i in range(n - size, n) if i >= 0)

    return max([n for n in range(kv_hit + 1) if accepts(n)], default=0)


pool_cases = st.integers(min_value=0, max_value=14).flatmap(
    lambda length: st.tuples(
        st.sampled_from([ALL_PAGES, TRAILING_PAGES]),
        st.integers(min_value=0, max_value=5),
        st.lists(st.booleans(), min_size=length, max_size=length).map(tuple),
        st.integers(min_value=0, max_value=length),
    )
)


def check_compute_pool_hit(impl, case) -> None:
    policy, window, present, kv_hit = case
    assert impl(policy, window, present, kv_hit) == brute_force_pool_hit(policy, window, present, kv_hit)


@pytest.mark.clause("HYB-6", "HYB-7")
@given(pool_cases)
def test_pool_hit_matches_brute_force(case):
    check_compute_pool_hit(compute_pool_hit, case)


@pytest.mark.clause("HYB-7")
@pytest.mark.parametrize(
    "present, window, kv_hit, expected",
    [
        ((False, False, True, True), 2, 4, 4),  # only the window ending at the hit matters
        ((True, True, False, True), 2, 4, 2),  # window ending at 4 has a hole; at 2 it does not
        ((True, False, False, False), 0, 4, 1),  # window 0 means 1 page
        ((False,) * 4, 3, 4, 0),
        ((True,) * 4, 9, 4, 4),  # a window longer than the hit needs every page
    ],
)
def test_trailing_pages_windows(present, window, kv_hit, expected):
    assert compute_pool_hit(TRAILING_PAGES, window, present, kv_hit) == expected


fold_cases = st.integers(min_value=0, max_value=10).flatmap(
    lambda length: st.tuples(
        st.lists(st.booleans(), min_size=length, max_size=length).map(tuple),
        st.lists(
            st.tuples(
                st.sampled_from(["indexer", "swa", "mamba"]),
                st.sampled_from([ALL_PAGES, TRAILING_PAGES]),
                st.integers(min_value=0, max_value=4),
                st.lists(st.booleans(), min_size=length, max_size=length).map(tuple),
            ),
            max_size=3,
            unique_by=lambda q: q[0],
        ).map(tuple),
    )
)


@pytest.mark.clause("BE-21", "HYB-6", "HYB-7")
@given(fold_cases)
def test_fold_is_minimum_over_pools_and_omits_zero_hits(case):
    kv_present, pools = case
    folded, entries = fold_pool_hits(kv_present, pools)
    kv_hit = brute_force_pool_hit(ALL_PAGES, 0, kv_present, len(kv_present))
    hits = {name: brute_force_pool_hit(policy, window, present, kv_hit) for name, policy, window, present in pools}
    assert folded == min([kv_hit, *hits.values()])
    expected = ([("kv", kv_hit)] if kv_hit else []) + [(name, hits[name]) for name, *_ in pools if hits[name]]
    assert list(entries) == expected


@pytest.mark.clause("HYB-8")
def test_count_pool_hits_leading_runs():
    results = (("kv", (True, True, False, True)), ("indexer", ()), ("swa", (False, True)))
    assert count_pool_hits(results) == (("kv", 2), ("indexer", 0), ("swa", 0))


@pytest.mark.clause("HYB-3")
@given(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=50))
def test_trailing_window_ends_at_the_hit(hit, window):
    start, end = compute_trailing_window(hit, window)
    assert end == hit
    assert start == max(0, hit - max(1, window))


@pytest.mark.clause("HYB-8")
@given(st.lists(st.tuples(st.sampled_from(["kv", "indexer", "swa"]), st.lists(st.booleans(), max_size=8).map(tuple)), max_size=4).map(tuple))
def test_count_pool_hits_matches_brute_force(results):
    expected = tuple((name, brute_force_pool_hit(ALL_PAGES, 0, flags, len(flags))) for name, flags in results)
    assert count_pool_hits(results) == expected
