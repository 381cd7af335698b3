"""Pool-hit folding against an independent brute-force definition (HYB-6, HYB-7, HYB-8, BE-21, HYB-3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import (
    ALL_PAGES,
    BLOCK_GROUPS,
    compute_restorable_lengths,
    fold_pool_query,
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
                st.sampled_from(["indexer", "swa", "mamba", "deepseek_v4_c4"]),
                st.sampled_from([ALL_PAGES, TRAILING_PAGES, TRAILING_PAGES, BLOCK_GROUPS]),
                st.integers(min_value=0, max_value=4),
                st.lists(st.booleans(), min_size=length, max_size=length).map(tuple),
            ),
            max_size=3,
            unique_by=lambda q: q[0],
        ).map(tuple),
    )
)


def brute_force_restorable(policy, window, present, kv_hit) -> set[int]:
    """Every length in 1..kv_hit whose pages the policy needs are present, tried one by one."""
    size = max(1, window)
    if policy == ALL_PAGES:
        return {n for n in range(1, kv_hit + 1) if all(present[:n])}
    return {n for n in range(1, kv_hit + 1) if all(present[i] for i in range(max(0, n - size), n))}


def brute_force_fold(kv_present, pools):
    """HiCacheFile's fold (0.5.23) restated: intersect restorable sets, stop once empty."""
    kv_hit = brute_force_pool_hit(ALL_PAGES, 0, kv_present, len(kv_present))
    common = set(range(1, kv_hit + 1))
    entries = [("kv", kv_hit)] if kv_hit else []
    for name, policy, window, present in pools:
        if not common:
            break
        if policy == BLOCK_GROUPS:
            run = brute_force_pool_hit(ALL_PAGES, 0, present, kv_hit)
            own = run - run % max(1, window)
        else:
            own = max(brute_force_restorable(policy, window, present, kv_hit), default=0)
            common &= brute_force_restorable(policy, window, present, kv_hit)
        if own:
            entries.append((name, own))
    return max(common, default=0), entries, sorted(common)


def check_fold(impl, case) -> None:
    kv_present, pools = case
    hit, entries, restorable = impl(kv_present, pools)
    expected_hit, expected_entries, expected_restorable = brute_force_fold(kv_present, pools)
    assert hit == expected_hit
    assert list(entries) == expected_entries
    assert list(restorable) == expected_restorable


@pytest.mark.clause("BE-21", "BE-26", "HYB-6", "HYB-7", "HYB-9")
@given(fold_cases)
def test_fold_is_the_largest_length_every_gating_pool_restores(case):
    check_fold(fold_pool_query, case)
    hit, entries = fold_pool_hits(*case)
    expected_hit, expected_entries, _ = brute_force_fold(*case)  # not fold_pool_query, which fold_pool_hits wraps
    assert (hit, list(entries)) == (expected_hit, expected_entries)


@pytest.mark.clause("BE-21", "HYB-7")
def test_fold_is_not_the_minimum_of_maxima():
    """SGLang #39147: KV and an ALL_PAGES pool reach 4; a trailing pool (N=2) restores 2 and 5 but not 3 or 4."""
    kv = (True,) * 5
    pools = (
        ("indexer", ALL_PAGES, 0, (True, True, True, True, False)),
        ("swa", TRAILING_PAGES, 2, (True, True, False, True, True)),
    )
    hit, entries, restorable = fold_pool_query(kv, pools)
    assert restorable == (1, 2)
    assert hit == 2  # min of maxima would say min(5, 4, 5) = 4, which swa cannot restore
    assert entries == (("kv", 5), ("indexer", 4), ("swa", 5))


@pytest.mark.clause("BE-21")
def test_pools_after_an_empty_intersection_get_no_entry():
    kv = (True,) * 3
    pools = (("swa", TRAILING_PAGES, 1, (False, False, False)), ("mamba", TRAILING_PAGES, 1, (True, True, True)))
    assert fold_pool_query(kv, pools) == (0, (("kv", 3),), ())


@pytest.mark.clause("HYB-9")
@pytest.mark.parametrize(
    "present, group, expected",
    [((True,) * 5, 2, 4), ((True, True, True, False, True), 3, 3), ((False,) * 5, 2, 0), ((True,) * 5, 0, 5)],
)
def test_block_groups_report_whole_groups_and_never_gate(present, group, expected):
    kv = (True,) * 5
    hit, entries, restorable = fold_pool_query(kv, (("deepseek_v4_c4", BLOCK_GROUPS, group, present),))
    assert hit == 5 and restorable == (1, 2, 3, 4, 5)
    assert dict(entries).get("deepseek_v4_c4", 0) == expected


@pytest.mark.clause("HYB-7")
@pytest.mark.parametrize(
    "present, window, kv_hit, expected",
    [((True, True, False, True, True), 2, 5, (1, 2, 5)), ((False, True), 1, 2, (2,)), ((True,) * 3, 0, 0, ())],
)
def test_trailing_restorable_lengths_have_gaps(present, window, kv_hit, expected):
    assert compute_restorable_lengths(TRAILING_PAGES, window, present, kv_hit) == expected


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
@given(
    st.lists(
        st.tuples(st.sampled_from(["kv", "indexer", "swa"]), st.lists(st.booleans(), max_size=8).map(tuple)), max_size=4
    ).map(tuple)
)
def test_count_pool_hits_matches_brute_force(results):
    expected = tuple((name, brute_force_pool_hit(ALL_PAGES, 0, flags, len(flags))) for name, flags in results)
    assert count_pool_hits(results) == expected
