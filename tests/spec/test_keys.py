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
    [
        ("a" * 64, True),
        ("A" * 64, False),
        ("a" * 63, False),
        ("g" * 64, False),
        ("", False),
        (123, False),
        (None, False),
    ],
)
def test_strict_page_key(value, ok):
    assert is_page_key(value) is ok


def independent_seed(extra_key, cache_salt):
    """The namespace seed restated from its byte layout."""
    if extra_key is None and cache_salt is None:
        return None
    data = b"sglang-cache-namespace-v1"
    for part in (extra_key, cache_salt):
        if part is None:
            data += b"\x00"
        else:
            raw = part.encode("utf-8")
            data += b"\x01" + struct.pack("<Q", len(raw)) + raw
    return hashlib.sha256(data).hexdigest()


@pytest.mark.clause("KEY-4")
@given(st.one_of(st.none(), st.text(max_size=6)), st.one_of(st.none(), st.text(max_size=6)))
def test_namespace_seed_matches_its_byte_layout(extra_key, cache_salt):
    from hicache_spec import compute_namespace_seed

    assert compute_namespace_seed(extra_key, cache_salt) == independent_seed(extra_key, cache_salt)


@pytest.mark.clause("KEY-4", "KEY-3")
def test_a_namespaced_chain_starts_from_the_seed_and_parts_stay_apart():
    from hicache_spec import compute_namespace_seed

    seeds = {
        compute_namespace_seed(*parts)
        for parts in [("", None), (None, ""), ("ab", None), ("a", "b"), ("ab", ""), ("", "ab")]
    }
    assert len(seeds) == 6 and None not in seeds
    assert compute_namespace_seed(None, None) is None
    tokens = tuple(range(8))
    seed = compute_namespace_seed("lora-1", None)
    assert compute_key_chain(tokens, 4, extra_key="lora-1") == compute_key_chain(tokens, 4, seed)
    assert compute_key_chain(tokens, 4, extra_key="lora-1")[0] == independent_key(list(tokens[:4]), seed)
    assert compute_key_chain(tokens, 4) != compute_key_chain(tokens, 4, extra_key="lora-1")
    # A prior key wins over the namespace: only the chain's first page is seeded.
    prior = compute_page_key((9, 9, 9, 9))
    assert compute_key_chain(tokens, 4, prior, extra_key="lora-1") == compute_key_chain(tokens, 4, prior)


@pytest.mark.clause("KEY-5")
@pytest.mark.parametrize("tokens", [(2**32, 1), (1, 2**63 - 1), (0, 2**32 - 1, 2**40)])
def test_a_wide_token_hashes_the_page_with_a_tag_and_eight_byte_words(tokens):
    prior = compute_page_key((1, 2))
    expected = hashlib.sha256(bytes.fromhex(prior) + b"\xff" + struct.pack(f"<{len(tokens)}Q", *tokens)).hexdigest()
    assert compute_page_key(tokens, prior) == expected
    assert compute_page_key(tokens) == hashlib.sha256(b"\xff" + struct.pack(f"<{len(tokens)}Q", *tokens)).hexdigest()


@pytest.mark.clause("KEY-5", "KEY-1")
def test_wide_encoding_is_per_page():
    chain = compute_key_chain((1, 2, 2**33, 4), 2)
    assert chain[0] == independent_key([1, 2], None)
    assert chain[1] == hashlib.sha256(bytes.fromhex(chain[0]) + b"\xff" + struct.pack("<2Q", 2**33, 4)).hexdigest()
    assert compute_page_key((2**32 - 1,)) == independent_key([2**32 - 1], None)


@pytest.mark.clause("KEY-6")
def test_bigram_pages_hash_pairs_and_read_one_token_ahead():
    tokens = (10, 11, 12, 13, 14)  # logical length 4, lookahead 14
    chain = compute_key_chain(tokens, 2, bigram=True)
    assert len(chain) == 2
    assert chain[0] == independent_key([10, 11, 11, 12], None)
    assert chain[1] == independent_key([12, 13, 13, 14], chain[0])
    assert compute_key_chain((10, 11, 12), 2, bigram=True) == (chain[0],)


@pytest.mark.clause("KEY-6")
def test_tuple_tokens_hash_each_element():
    tokens = ((1, 2), (3, 4), (5, 6), (7, 8))
    chain = compute_key_chain(tokens, 2)
    assert chain[0] == independent_key([1, 2, 3, 4], None)
    assert chain[1] == independent_key([5, 6, 7, 8], chain[0])
