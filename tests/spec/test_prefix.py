"""Properties of the prefix-metadata functions (PFX family)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import expected_prefixes, extend_prefix, plan_batches, prefix_before
from tests.spec.strategies import key_tuples, prefixes


def check_extend_prefix(impl, prefix, batch) -> None:
    """The properties every correct prefix extension has."""
    before = None if prefix is None else list(prefix)
    result = impl(prefix, batch)
    assert (result is None) == (prefix is None), "PFX-3/PFX-4: None stays None, a list stays a list"
    if prefix is not None:
        assert list(result) == before + list(batch), "PFX-2: the prefix grows by exactly the batch"
        assert list(prefix) == before, "PFX-5: the input prefix never changes"


@pytest.mark.clause("PFX-1", "PFX-3", "PFX-4", "PFX-5")
@given(prefixes, key_tuples)
def test_extend_prefix_keeps_tri_state_and_never_mutates(prefix, batch):
    check_extend_prefix(extend_prefix, prefix, batch)


@pytest.mark.clause("PFX-4")
def test_empty_prefix_accumulates():
    assert extend_prefix((), ("a",)) == ("a",)
    assert extend_prefix((), ()) == ()
    assert extend_prefix(None, ("a",)) is None


@pytest.mark.clause("PFX-2")
@given(prefixes, key_tuples, st.data())
def test_prefix_before_is_operation_prefix_plus_chain_head(prefix, chain, data):
    offset = data.draw(st.integers(min_value=0, max_value=len(chain)))
    result = prefix_before(prefix, chain, offset)
    if prefix is None:
        assert result is None
    else:
        assert result == prefix + chain[:offset]


@pytest.mark.clause("PFX-2", "PFX-10", "CTL-2")
@given(prefixes, key_tuples, st.integers(min_value=1, max_value=5))
def test_expected_prefixes_one_per_batch_contiguous(prefix, chain, batch_size):
    result = expected_prefixes(prefix, chain, batch_size)
    batches = plan_batches(len(chain), batch_size)
    assert len(result) == len(batches)
    for got, (start, _end) in zip(result, batches):
        assert got == (None if prefix is None else prefix + chain[:start])


@pytest.mark.clause("PFX-2")
@pytest.mark.parametrize("pages", [0, 1, 127, 128, 129, 256, 300])
def test_expected_prefixes_at_batch_boundaries(pages):
    chain = tuple(f"k{i}" for i in range(pages))
    result = expected_prefixes(("root",), chain, 128)
    assert len(result) == (pages + 127) // 128
    for index, got in enumerate(result):
        assert got == ("root",) + chain[: index * 128]
