"""The page-hash chain against vectors computed independently with hashlib (KEY family)."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import compute_key_chain, compute_page_key, is_page_key


def independent_key(tokens: list[int], prior_hex: str | None) -> str:
    """SHA-256 over the prior raw digest then the tokens packed as little-endian uint32."""
    data = (bytes.fromhex(prior_hex) if prior_hex else b"") + struct.pack(f"<{len(tokens)}I", *tokens)
    return hashlib.sha256(data).hexdigest()


@pytest.mark.clause("KEY-1")
def test_first_page_vector():
    # sha256 of the bytes 01 00 00 00 02 00 00 00 03 00 00 00 04 00 00 00
    expected = hashlib.sha256(bytes([1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0])).hexdigest()
    assert compute_page_key((1, 2, 3, 4)) == expected


@pytest.mark.clause("KEY-1")
def test_chained_page_vector():
    first = hashlib.sha256(b"\x05\x00\x00\x00\x06\x00\x00\x00").digest()
    second = hashlib.sha256(first + b"\x07\x00\x00\x00\xff\xff\xff\xff").hexdigest()
    assert compute_key_chain((5, 6, 7, 2**32 - 1), page_size=2) == (first.hex(), second)


@pytest.mark.clause("KEY-1", "KEY-3")
@given(
    st.lists(st.integers(min_value=0, max_value=2**32 - 1), max_size=40),
    st.integers(min_value=1, max_value=8),
    st.one_of(st.none(), st.binary(min_size=32, max_size=32).map(bytes.hex)),
)
def test_chain_matches_independent_computation(tokens, page_size, prior):
    chain = compute_key_chain(tuple(tokens), page_size, prior)
    expected, previous = [], prior
    for start in range(0, len(tokens) // page_size * page_size, page_size):
        previous = independent_key(tokens[start : start + page_size], previous)
        expected.append(previous)
    assert chain == tuple(expected)


@pytest.mark.clause("KEY-3")
def test_key_names_the_whole_prefix():
    # Same last page, different history: different keys.
    assert compute_key_chain((1, 2, 9, 9), 2)[-1] != compute_key_chain((3, 4, 9, 9), 2)[-1]


@pytest.mark.clause("KEY-2")
@pytest.mark.parametrize(
    "value, ok",
    [("a" * 64, True), ("A" * 64, False), ("a" * 63, False), ("g" * 64, False), ("", False), (123, False), (None, False)],
)
def test_strict_page_key(value, ok):
    assert is_page_key(value) is ok
