"""Properties of the prefix-metadata functions (PFX family)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import expected_prefixes, extend_prefix, prefix_before
from tests.spec.strategies import key_tuples, prefixes


def check_extend_prefix(impl, prefix, batch) -> None:
    """The properties every correct prefix extension has."""
    before = None if prefix is None else list(prefix)
    result = impl(prefix, batch)
    assert (result is None) == (prefix is None), "PFX-3/PFX-4: None stays None, a list stays a list"
    if prefix is not None:
        assert before is not None and result is not None
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


def plain_prefix_before(prefix, chain, offset):
    """The operation's prefix, then the chain's keys before ``offset``, appended one by one."""
    if prefix is None:
        return None
    keys = list(prefix)
    for position in range(offset):
        keys.append(chain[position])
    return tuple(keys)


def check_prefix_before(impl, prefix, chain, offset) -> None:
    assert impl(prefix, chain, offset) == plain_prefix_before(prefix, chain, offset)


def check_expected_prefixes(impl, prefix, chain, batch_size) -> None:
    """One prefix per batch, batch i starting at key i * batch_size (counted here, not by ``plan_batches``)."""
    expected, start = [], 0
    while start < len(chain):
        expected.append(plain_prefix_before(prefix, chain, start))
        start += batch_size
    assert list(impl(prefix, chain, batch_size)) == expected


with_offsets = st.tuples(prefixes, key_tuples).flatmap(
    lambda case: st.tuples(st.just(case[0]), st.just(case[1]), st.integers(min_value=0, max_value=len(case[1])))
)
with_batch_sizes = st.tuples(prefixes, key_tuples, st.integers(min_value=1, max_value=5))


@pytest.mark.clause("PFX-2")
@given(with_offsets)
def test_prefix_before_is_operation_prefix_plus_chain_head(case):
    check_prefix_before(prefix_before, *case)


@pytest.mark.clause("PFX-2", "PFX-10", "CTL-2")
@given(with_batch_sizes)
def test_expected_prefixes_one_per_batch_contiguous(case):
    check_expected_prefixes(expected_prefixes, *case)


@pytest.mark.clause("PFX-2")
def test_prefix_oracles_refute_planted_off_by_ones():
    from tests.spec import planted_spec
    from tests.spec.test_planted import is_refuted

    planted = planted_spec.prefix_before_including_first_key
    assert is_refuted(lambda case: check_prefix_before(planted, *case), with_offsets)
    planted = planted_spec.expected_prefixes_after_own_batch
    assert is_refuted(lambda case: check_expected_prefixes(planted, *case), with_batch_sizes)


@pytest.mark.clause("PFX-2")
@pytest.mark.parametrize("pages", [0, 1, 127, 128, 129, 256, 300])
def test_expected_prefixes_at_batch_boundaries(pages):
    chain = tuple(f"k{i}" for i in range(pages))
    result = expected_prefixes(("root",), chain, 128)
    assert len(result) == (pages + 127) // 128
    for index, got in enumerate(result):
        assert got == ("root",) + chain[: index * 128]


def check_sidecar_groups(impl, prefix, span, key_counts) -> None:
    """Each call's prefix joins its own keys (prefix + keys is one chain) and every transfer is in one call."""
    groups = impl(prefix, span, key_counts)
    members = sorted(index for _, group in groups for index in group)
    assert members == list(range(len(key_counts)))
    for group_prefix, group in groups:
        if prefix is None:
            assert group_prefix is None, "PFX-3: feature off, no prefix"
            continue
        for index in group:
            # The transfer's keys are the span's last key_counts[index]; prefix + keys must be prefix + span.
            keys = tuple(span[len(span) - key_counts[index] :])
            assert tuple(group_prefix) + keys == tuple(prefix) + tuple(span), "PFX-9: the prefix joins the keys"
    if prefix is not None:
        assert len(groups) == len(set(key_counts)), "one call per distinct trailing length"
    else:
        assert len(groups) == 1


sidecar_cases = key_tuples.flatmap(
    lambda span: st.tuples(prefixes, st.just(span), st.lists(st.integers(0, len(span)), max_size=4).map(tuple))
)


@pytest.mark.clause("PFX-9", "HYB-2", "HYB-5")
@given(sidecar_cases)
def test_sidecar_groups_carry_a_prefix_that_joins_their_keys(case):
    from hicache_spec import plan_sidecar_groups

    check_sidecar_groups(plan_sidecar_groups, *case)


@pytest.mark.clause("PFX-9")
def test_sidecar_groups_example():
    from hicache_spec import plan_sidecar_groups

    span = ("k0", "k1", "k2", "k3")
    # KV-derived indexer (all 4 keys), SWA window 2, Mamba window 1, a second window-2 pool.
    groups = plan_sidecar_groups(("p0",), span, (4, 2, 1, 2))
    assert groups == ((("p0",), (0,)), (("p0", "k0", "k1"), (1, 3)), (("p0", "k0", "k1", "k2"), (2,)))
    assert plan_sidecar_groups((), span, (1,)) == ((("k0", "k1", "k2"), (0,)),)  # [] accumulates
    assert plan_sidecar_groups(None, span, (4, 1)) == ((None, (0, 1)),)
