"""Every planted buggy variant of a spec function is refuted by the spec's own properties.

A property that a known bug passes checks nothing. These tests run the same
checks used for the real functions against ``planted_spec`` and expect them to
fail; CrossHair refutes the same variants in ``.ci/crosshair_check.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spec import planted_spec
from tests.spec.strategies import flags, key_tuples, prefixes
from tests.spec.test_batching import check_count_leading_run
from tests.spec.test_pools import check_compute_pool_hit, check_fold, fold_cases, pool_cases
from tests.spec.test_prefix import check_extend_prefix, check_sidecar_groups, sidecar_cases

gating_fold_cases = st.integers(min_value=3, max_value=8).flatmap(
    lambda length: st.tuples(
        st.just((True,) * length),
        st.tuples(
            st.integers(0, length).map(
                lambda run: ("indexer", "all_pages", 0, (True,) * run + (False,) * (length - run))
            ),
            st.lists(st.booleans(), min_size=length, max_size=length).map(
                lambda flags: ("swa", "trailing_pages", 2, tuple(flags))
            ),
        ),
    )
)
"""KV fully present, an ALL_PAGES pool with a shorter run, a trailing pool with gaps: where the two folds part."""


def is_refuted(check, strategy) -> bool:
    """Return whether hypothesis finds an input on which ``check`` fails."""

    @settings(
        max_examples=300,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def property_under_test(value):
        check(value)

    try:
        property_under_test()
    except AssertionError:
        return True
    return False


as_lists = st.tuples(
    st.one_of(st.none(), st.lists(st.sampled_from(["a", "b"]))), st.lists(st.just("c"), min_size=1, max_size=3)
)


@pytest.mark.clause("PFX-5")
def test_in_place_extension_is_refuted():
    assert is_refuted(lambda case: check_extend_prefix(planted_spec.extend_prefix_in_place, *case), as_lists)


@pytest.mark.clause("PFX-4")
def test_extend_only_when_non_empty_is_refuted():
    assert is_refuted(
        lambda case: check_extend_prefix(planted_spec.extend_prefix_only_when_non_empty, *case),
        st.tuples(prefixes, key_tuples),
    )


@pytest.mark.clause("PFX-1", "PFX-4")
def test_empty_collapsed_to_none_is_refuted():
    assert is_refuted(
        lambda case: check_extend_prefix(planted_spec.extend_prefix_collapsing_empty, *case),
        st.tuples(prefixes, key_tuples),
    )


@pytest.mark.clause("BE-2")
def test_off_by_one_leading_run_is_refuted():
    assert is_refuted(lambda values: check_count_leading_run(planted_spec.count_leading_run_off_by_one, values), flags)


@pytest.mark.clause("HYB-7")
def test_misplaced_trailing_window_is_refuted():
    assert is_refuted(
        lambda case: check_compute_pool_hit(planted_spec.compute_pool_hit_window_misplaced, case), pool_cases
    )


@pytest.mark.clause("BE-21", "HYB-7")
def test_min_of_maxima_fold_is_refuted():
    assert is_refuted(lambda case: check_fold(planted_spec.fold_pool_query_min_of_maxima, case), gating_fold_cases)


@pytest.mark.clause("PFX-9")
def test_operation_level_sidecar_prefix_is_refuted():
    assert is_refuted(
        lambda case: check_sidecar_groups(planted_spec.plan_sidecar_groups_operation_prefix, *case), sidecar_cases
    )


def test_the_real_functions_pass_the_same_checks():
    from hicache_spec import compute_pool_hit, count_leading_run, extend_prefix, fold_pool_query, plan_sidecar_groups

    assert not is_refuted(lambda case: check_fold(fold_pool_query, case), fold_cases)
    assert not is_refuted(lambda case: check_fold(fold_pool_query, case), gating_fold_cases)
    assert not is_refuted(lambda case: check_sidecar_groups(plan_sidecar_groups, *case), sidecar_cases)

    assert not is_refuted(lambda case: check_extend_prefix(extend_prefix, *case), st.tuples(prefixes, key_tuples))
    assert not is_refuted(lambda values: check_count_leading_run(count_leading_run, values), flags)
    assert not is_refuted(lambda case: check_compute_pool_hit(compute_pool_hit, case), pool_cases)
