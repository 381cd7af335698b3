"""Acks, backup accounting, rank agreement, threshold and timeout (CTL, RANK families)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import (
    DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    LEGACY_PREFETCH_TIMEOUT_BASE,
    LEGACY_PREFETCH_TIMEOUT_MAX,
    LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    agree_hit_pages,
    agree_restorable_hit_pages,
    compute_effective_threshold,
    compute_restorable_flags,
    is_prefetch_span_long_enough,
    compute_backup_progress,
    compute_prefetch_acks,
    compute_prefetch_timeout,
    is_prefetch_worth_it,
)
from hicache_spec.progress import agree_pool_boundaries
from tests.spec import planted_spec
from tests.spec.test_planted import is_refuted

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


rank_hit_lists = st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8)


def check_agree_hit_pages(impl, hits) -> None:
    """The agreed hit is a rank's hit that no rank's hit is below (not ``min``, which the spec itself uses)."""
    lowest = [hit for hit in hits if not any(other < hit for other in hits)]
    assert impl(tuple(hits)) == lowest[0]


@pytest.mark.clause("RANK-1", "RANK-2", "RANK-5")
@given(rank_hit_lists)
def test_agreement_is_the_minimum(hits):
    check_agree_hit_pages(agree_hit_pages, hits)


def packed_agreement(ranks: tuple) -> tuple:
    """RANK-5 as SGLang computes it: each rank packs its boundaries in the first rank's pool order, -1 for a pool
    it gave none; the packed vectors meet in one elementwise MIN, and a -1 means no verdict."""
    order = [name for name, _ in ranks[0]]
    packed = [[dict(rank).get(name, -1) for name in order] for rank in ranks]
    reduced = [min(column) for column in zip(*packed)]
    return tuple((name, value) for name, value in zip(order, reduced) if value != -1)


rank_pool_boundaries = st.lists(
    st.dictionaries(st.sampled_from(("swa", "indexer", "mamba")), st.integers(0, 8)).map(
        lambda pools: tuple(pools.items())
    ),
    min_size=1,
    max_size=4,
).map(tuple)


@pytest.mark.clause("RANK-5")
@given(rank_pool_boundaries)
def test_pool_boundaries_agree_as_the_packed_minimum(ranks):
    assert agree_pool_boundaries(ranks) == packed_agreement(ranks)


@pytest.mark.clause("RANK-5")
def test_a_pool_one_rank_left_out_has_no_agreed_boundary():
    ranks = ((("swa", 3), ("indexer", 5)), (("indexer", 2), ("swa", 4)), (("indexer", 7),))
    assert agree_pool_boundaries(ranks) == (("indexer", 2),)
    assert agree_pool_boundaries(ranks[:2]) == (("swa", 3), ("indexer", 2))  # the first rank's order
    assert agree_pool_boundaries(((("swa", 0),),)) == (("swa", 0),)


@pytest.mark.clause("RANK-1")
def test_agreement_oracle_refutes_the_maximum():
    assert is_refuted(lambda hits: check_agree_hit_pages(planted_spec.agree_hit_pages_maximum, hits), rank_hit_lists)


@pytest.mark.clause("CTL-3")
@pytest.mark.parametrize("tokens, ok", [(0, False), (255, False), (256, True), (257, True)])
def test_prefetch_threshold_boundaries(tokens, ok):
    assert is_prefetch_worth_it(tokens) is ok


@pytest.mark.clause("CTL-10")
@pytest.mark.parametrize(
    "tokens, expected",
    [(0, 2.0), (1024, 2.1), (10_240, 3.0), (286_720, 30.0), (1_000_000, 30.0)],
)
def test_legacy_prefetch_timeout_defaults_and_cap(tokens, expected):
    """SGLang 0.5.20: min(30, 2.0 + 0.1 per Ki token)."""
    timeout = compute_prefetch_timeout(
        tokens, LEGACY_PREFETCH_TIMEOUT_BASE, LEGACY_PREFETCH_TIMEOUT_PER_KI_TOKEN, LEGACY_PREFETCH_TIMEOUT_MAX
    )
    assert timeout == pytest.approx(expected)


@pytest.mark.clause("CTL-14")
@pytest.mark.parametrize(
    "tokens, expected",
    [(0, 1.0), (1024, 1.25), (10_240, 3.5), (286_720, 71.0), (4_194_304, 1025.0)],
)
def test_prefetch_timeout_defaults_have_no_cap(tokens, expected):
    """SGLang 0.5.21+: 1.0 s + 0.25 s per Ki token of the requested span, no maximum."""
    assert compute_prefetch_timeout(tokens) == pytest.approx(expected)


@pytest.mark.clause("CTL-14")
@given(st.integers(min_value=0, max_value=10_000), st.sampled_from([1, 16, 64, 128]))
def test_prefetch_timeout_per_page_form(pages, page_size):
    """base + pages * (per_ki_token * page_size / 1024), as 0.5.21+ computes it per page."""
    per_page = DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN * page_size / 1024
    assert compute_prefetch_timeout(pages * page_size) == pytest.approx(1.0 + pages * per_page)


@pytest.mark.clause("CTL-16")
@given(st.integers(min_value=0, max_value=4096), st.integers(min_value=0, max_value=4096), st.sampled_from([1, 16, 64]))
def test_unified_cache_timeout_follows_the_key_list_when_checked(requested_pages, agreed_pages, page_size):
    """0.5.20-0.5.22: the budget is over the pages of the key list when checked (the agreed hit), not the span asked."""
    agreed_pages = min(agreed_pages, requested_pages)
    budget = compute_prefetch_timeout(agreed_pages * page_size)
    assert budget == pytest.approx(1.0 + agreed_pages * page_size / 1024 * 0.25)
    if agreed_pages < requested_pages:
        assert budget < compute_prefetch_timeout(requested_pages * page_size)


@pytest.mark.clause("CTL-10", "CTL-14")
@given(
    st.integers(min_value=0, max_value=10**7),
    st.floats(0, 100),
    st.floats(0, 10),
    st.one_of(st.none(), st.floats(0, 100)),
)
def test_prefetch_timeout_formula(tokens, base, per_ki, maximum):
    check_prefetch_timeout(compute_prefetch_timeout, (tokens, base, per_ki, maximum))


def check_prefetch_timeout(impl, case) -> None:
    """Exact arithmetic, whole Ki tokens and the rest apart, the cap as a branch: not the spec's expression."""
    tokens, base, per_ki, maximum = case
    whole, rest = divmod(tokens, 1024)
    exact = Fraction(base) + Fraction(per_ki) * whole + Fraction(per_ki) * Fraction(rest, 1024)
    if maximum is not None and Fraction(maximum) < exact:
        exact = Fraction(maximum)
    assert impl(tokens, base, per_ki, maximum) == pytest.approx(float(exact), rel=1e-12, abs=1e-12)


@pytest.mark.clause("CTL-10")
def test_timeout_oracle_refutes_a_cap_on_the_base_only():
    cases = st.tuples(st.integers(0, 10**7), st.floats(0, 100), st.floats(0, 10), st.floats(0, 100))
    assert is_refuted(
        lambda case: check_prefetch_timeout(planted_spec.compute_prefetch_timeout_caps_base_only, case), cases
    )


SPAN_CASES = [
    # span, threshold, page_size, whether the span is long enough, the effective threshold
    (255, 256, 1, False, 256),
    (256, 256, 1, True, 256),
    (300, 256, 64, True, 256),
    (255, 256, 64, False, 256),
    (63, 0, 64, False, 64),
    (64, 0, 64, True, 64),
    (0, 0, 1, False, 1),
    (129, 128, 128, True, 128),
    (100, 32, 64, True, 64),  # a threshold inside the first page is raised to it
    (300, 300, 64, False, 300),  # 256 whole-page tokens; the partial page does not count
]


@pytest.mark.clause("CTL-3")
@pytest.mark.parametrize("span, threshold, page_size, ok, effective", SPAN_CASES)
def test_span_below_the_effective_threshold_is_declined_before_query(span, threshold, page_size, ok, effective):
    assert is_prefetch_span_long_enough(span, threshold, page_size) is ok
    assert compute_effective_threshold(threshold, page_size) == effective


@pytest.mark.clause("CTL-3")
def test_span_table_refutes_planted_thresholds():
    assert any(
        planted_spec.compute_effective_threshold_zero_only(threshold, page) != effective
        for _, threshold, page, _, effective in SPAN_CASES
    )
    assert any(
        planted_spec.is_prefetch_span_long_enough_unaligned(span, threshold, page) is not ok
        for span, threshold, page, ok, _ in SPAN_CASES
    )


@pytest.mark.clause("RANK-6")
@pytest.mark.parametrize(
    "hit, restorable, span, expected",
    [
        (0, None, 3, (True, False, False, False)),
        (2, None, 3, (True, True, True, False)),
        (3, (1, 3), 4, (True, True, False, True, False)),
        (2, (1, 3), 4, (True, True, False, False, False)),  # 3 is past the (capped) hit
        (2, (), 2, (True, False, False)),
        (0, (1, 2), 2, (True, False, False)),  # no hit: nothing but 0
    ],
)
def test_restorable_flags(hit, restorable, span, expected):
    assert compute_restorable_flags(hit, restorable, span) == expected


@pytest.mark.clause("RANK-6")
def test_agreed_hit_is_the_largest_length_every_rank_restores():
    rank0 = compute_restorable_flags(4, (1, 3, 4), 5)
    rank1 = compute_restorable_flags(4, (2, 4), 5)
    assert agree_restorable_hit_pages((rank0, rank1)) == 4
    # Rank 1 restores only 2; MIN of the maxima would pick 2, which rank 0 cannot restore.
    rank1 = compute_restorable_flags(3, (2,), 5)
    assert agree_restorable_hit_pages((rank0, rank1)) == 0
    assert not rank0[min(4, 2)]


@pytest.mark.clause("RANK-6")
@given(
    st.lists(
        st.tuples(st.integers(0, 8), st.one_of(st.none(), st.lists(st.integers(-1, 10), max_size=6).map(tuple))),
        min_size=1,
        max_size=4,
    )
)
def test_agreement_matches_intersection_of_sets(ranks):
    span = 8
    flags = tuple(compute_restorable_flags(hit, restorable, span) for hit, restorable in ranks)
    sets = []
    for hit, restorable in ranks:
        lengths = set(range(1, hit + 1)) if restorable is None else {n for n in restorable if 0 < n <= hit}
        sets.append(lengths if hit else set())
    common = set.intersection(*sets) | {0}
    assert agree_restorable_hit_pages(flags) == max(common)


@pytest.mark.clause("CTL-3")
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_prefetch_threshold_property(tokens, threshold):
    check_prefetch_worth_it(is_prefetch_worth_it, (tokens, threshold))


def check_prefetch_worth_it(impl, case) -> None:
    """Worth it: some hit, and not below the threshold, as branches (not the spec's expression)."""
    tokens, threshold = case
    if tokens == 0:
        expected = False
    elif tokens < threshold:
        expected = False
    else:
        expected = True
    assert impl(tokens, threshold) is expected


@pytest.mark.clause("CTL-3")
def test_threshold_oracle_refutes_a_strict_comparison():
    at_or_near = st.integers(0, 10**6).flatmap(lambda t: st.tuples(st.just(t), st.sampled_from([t, t + 1, 0])))
    assert is_refuted(lambda case: check_prefetch_worth_it(planted_spec.is_prefetch_worth_it_strict, case), at_or_near)
