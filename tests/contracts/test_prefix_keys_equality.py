"""PrefixKeys equality and lookups on sequences of the same length that differ, and on long chains.

Scenario: two key sequences of equal length that differ in one key or only in
order; a chain extended from a shared parent; a chain longer than 125 keys.
Expected: equal exactly when the keys are equal in order (as a tuple of str);
``index`` and ``count`` as on a list.
Why it matters: a prefix compared by length alone lets a reversed or wrong
prefix pass for the right one (PFX-2 breaks silently).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import pytest

from hicache_contracts.prefix_keys import PrefixKeys

keys = st.text(alphabet="abcdef0123456789", min_size=1, max_size=4)


@st.composite
def same_length_pairs(draw):
    """Two key lists of one length: equal, one key changed, or the same keys reordered."""
    left = draw(st.lists(keys, min_size=1, max_size=6))
    how = draw(st.sampled_from(("equal", "changed", "reordered")))
    right = list(left)
    if how == "changed":
        at = draw(st.integers(0, len(left) - 1))
        right[at] = right[at] + "x"
    elif how == "reordered":
        right = draw(st.permutations(left))
    return left, list(right)


def as_prefix(items: list[str], split: int) -> PrefixKeys:
    """The keys as a chain extended once from a parent (``split`` keys in the parent)."""
    split = min(split, len(items))
    return PrefixKeys(items[:split]).extended(items[split:]) if split else PrefixKeys(items)


@pytest.mark.clause("PFX-2")
@given(same_length_pairs(), st.integers(0, 6), st.integers(0, 6))
def test_equal_exactly_when_the_keys_are_equal_in_order(pair, split_left: int, split_right: int) -> None:
    left, right = pair
    expected = left == right
    a, b = as_prefix(left, split_left), as_prefix(right, split_right)
    for other in (b, tuple(right), list(right)):
        assert (a == other) is expected
        assert (a != other) is (not expected)
    assert (list(right) == a) is expected
    if expected:
        assert hash(a) == hash(b)


@pytest.mark.clause("PFX-2")
def test_a_reversed_prefix_is_not_the_prefix() -> None:
    prefix = PrefixKeys(["k0", "k1", "k2"])
    assert prefix != PrefixKeys(["k2", "k1", "k0"])
    assert prefix != ("k2", "k1", "k0") and prefix != ["k0", "k1", "k3"]
    assert prefix == prefix and prefix == PrefixKeys(["k0", "k1", "k2"])


@pytest.mark.clause("PFX-2")
def test_index_and_count_as_on_a_list_on_a_long_chain() -> None:
    items = [f"k{index}" for index in range(300)]
    prefix = PrefixKeys(items[:100]).extended(items[100:])
    assert prefix.index("k0") == 0 and prefix.index("k299") == 299
    assert prefix.index("k150", 140) == 150 and prefix.count("k7") == 1
    with pytest.raises(ValueError):
        prefix.index("k5", 6)
