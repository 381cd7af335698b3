"""The page-hash chain (KEY family), byte-compatible with SGLang's storage hash.

A page is hashed as SHA-256 over the previous page's 32-byte digest (absent
for the first page of a chain without a seed), then the page's token words.
Words are 4-byte little-endian unsigned ints (KEY-1); a page with any word
above 2**32 - 1 is hashed with a one-byte tag 0xFF and 8-byte words instead
(KEY-5, SGLang 0.5.23; older releases refuse such tokens). A bigram (EAGLE)
page of n tokens hashes the pairs (t[i], t[i+1]) and so reads one token past
the page; a tuple token contributes each of its elements (KEY-6). A request
with an ``extra_key`` or a ``cache_salt`` starts its chain from a namespace
seed (KEY-4).
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional, Union

__all__ = [
    "NAMESPACE_SEED_TAG",
    "WIDE_PAGE_TAG",
    "compute_key_chain",
    "compute_namespace_seed",
    "compute_page_key",
    "compute_page_words",
    "is_page_key",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")

NAMESPACE_SEED_TAG = b"sglang-cache-namespace-v1"
"""The fixed bytes a namespace seed's SHA-256 starts with (SGLang's storage_namespace_seed)."""
WIDE_PAGE_TAG = b"\xff"
"""The byte after the prior digest of a page hashed with 8-byte words; its odd length keeps it apart from 4-byte pages."""

Token = Union[int, tuple[int, ...]]
"""A token id, or a tuple of ids for multi-id tokens."""


def is_page_key(value: object) -> bool:
    """Return whether ``value`` is a strict page key: 64 lowercase hex characters. Clause: KEY-2.

    post: (not __return__) or (isinstance(value, str) and len(value) == 64)
    """
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def compute_namespace_seed(extra_key: Optional[str], cache_salt: Optional[str]) -> Optional[str]:
    """Return the seed a request's chain starts from, None when it has no namespace. Clause: KEY-4.

    Each part is 0x00 when absent, else 0x01, its UTF-8 length as 8 bytes
    little-endian, and its bytes; so absent, empty and joined parts differ.

    raises: UnicodeEncodeError
    post: (extra_key is None and cache_salt is None) == (__return__ is None)
    post: __return__ is None or is_page_key(__return__)
    """
    if extra_key is None and cache_salt is None:
        return None
    digest = hashlib.sha256(NAMESPACE_SEED_TAG)
    for part in (extra_key, cache_salt):
        if part is None:
            digest.update(b"\x00")
            continue
        encoded = part.encode("utf-8")
        digest.update(b"\x01" + len(encoded).to_bytes(8, "little") + encoded)
    return digest.hexdigest()


def compute_page_words(tokens: tuple[Token, ...], bigram_next: Optional[int] = None) -> tuple[int, ...]:
    """Return the words a page is hashed from. Clause: KEY-6.

    Plain ids are one word each; a tuple token gives each of its elements; a
    bigram page (``bigram_next`` is the token after the page) gives the pair
    (t[i], t[i+1]) for each of its tokens.

    pre: bigram_next is None or all(isinstance(t, int) for t in tokens)
    post: bigram_next is None or len(__return__) == 2 * len(tokens)
    """
    if bigram_next is not None:
        raw = tuple(tokens) + (bigram_next,)
        words: list[int] = []
        for index in range(len(tokens)):
            words += [raw[index], raw[index + 1]]  # type: ignore[list-item]
        return tuple(words)
    flat: list[int] = []
    for token in tokens:
        if isinstance(token, tuple):
            flat.extend(token)
        else:
            flat.append(token)
    return tuple(flat)


def compute_page_key(
    token_ids: tuple[Token, ...], prior_key: Optional[str] = None, bigram_next: Optional[int] = None
) -> str:
    """Return the key of a page from its tokens and the previous page's key. Clauses: KEY-1, KEY-5, KEY-6.

    pre: all(0 <= w < 2 ** 63 for w in compute_page_words(token_ids, bigram_next))
    pre: prior_key is None or is_page_key(prior_key)
    post: is_page_key(__return__)
    """
    words = compute_page_words(token_ids, bigram_next)
    digest = hashlib.sha256()
    if prior_key is not None:
        digest.update(bytes.fromhex(prior_key))
    wide = any(word > 0xFFFFFFFF for word in words)
    if wide:
        digest.update(WIDE_PAGE_TAG)  # KEY-5: 8-byte words, tagged
    width = 8 if wide else 4
    for word in words:
        digest.update(word.to_bytes(width, byteorder="little", signed=False))
    return digest.hexdigest()


def compute_key_chain(
    token_ids: tuple[Token, ...],
    page_size: int,
    prior_key: Optional[str] = None,
    extra_key: Optional[str] = None,
    cache_salt: Optional[str] = None,
    bigram: bool = False,
) -> tuple[str, ...]:
    """Return the key of every whole page of ``token_ids``, chained from ``prior_key``. Clauses: KEY-1, KEY-3, KEY-4, KEY-6.

    A chain without a prior key starts from the namespace seed of
    ``extra_key`` and ``cache_salt`` (KEY-4). With ``bigram`` the last id is
    the lookahead token only: the logical length is ``len(token_ids) - 1``.
    A trailing partial page has no key (controllers hash page-aligned spans).

    pre: page_size >= 1
    pre: prior_key is None or is_page_key(prior_key)
    pre: not bigram or all(isinstance(t, int) for t in token_ids)
    pre: all(0 <= w < 2 ** 63 for t in token_ids for w in ((t,) if isinstance(t, int) else t))
    raises: UnicodeEncodeError
    post: len(__return__) == max(0, len(token_ids) - (1 if bigram else 0)) // page_size
    """
    logical = max(0, len(token_ids) - 1) if bigram else len(token_ids)
    previous = prior_key if prior_key is not None else compute_namespace_seed(extra_key, cache_salt)
    keys: list[str] = []
    for start in range(0, logical - page_size + 1, page_size):
        page = token_ids[start : start + page_size]
        lookahead = token_ids[start + page_size] if bigram else None
        previous = compute_page_key(page, previous, lookahead)  # type: ignore[arg-type]
        keys.append(previous)
    return tuple(keys)
