"""Properties of batch planning and leading-run counting (CTL-2, BE-2, HYB-8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import STORAGE_BATCH_SIZE, count_leading_run, plan_batches
from tests.spec.strategies import flags


def check_count_leading_run(impl, values) -> None:
    """Compare with an independent definition: the longest all-True head."""
    expected = max(n for n in range(len(values) + 1) if all(values[:n]))
    assert impl(values) == expected


@pytest.mark.clause("BE-2", "HYB-8")
@given(flags)
def test_count_leading_run_is_longest_true_head(values):
    check_count_leading_run(count_leading_run, values)


@pytest.mark.clause("BE-3")
def test_count_leading_run_of_nothing_is_zero():
    assert count_leading_run(()) == 0


@pytest.mark.clause("CTL-2", "BE-10")
@given(st.integers(min_value=0, max_value=2000), st.integers(min_value=1, max_value=300))
def test_plan_batches_covers_every_page_once(page_count, batch_size):
    batches = plan_batches(page_count, batch_size)
    covered = [page for start, end in batches for page in range(start, end)]
    assert covered == list(range(page_count))
    assert all(start % batch_size == 0 and 0 < end - start <= batch_size for start, end in batches)


@pytest.mark.clause("CTL-2", "BE-10")
@pytest.mark.parametrize(
    "pages, expected",
    [(0, ()), (1, ((0, 1),)), (127, ((0, 127),)), (128, ((0, 128),)), (129, ((0, 128), (128, 129)))],
)
def test_plan_batches_at_the_storage_batch_size(pages, expected):
    assert STORAGE_BATCH_SIZE == 128
    assert plan_batches(pages, STORAGE_BATCH_SIZE) == expected
