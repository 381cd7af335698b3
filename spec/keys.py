"""The page-hash chain (KEY family), byte-compatible with SGLang."""

from __future__ import annotations

import hashlib
import re
from typing import Optional

__all__ = ["compute_page_key", "compute_key_chain", "is_page_key"]

_HEX64 = re.compile(r"[0-9a-f]{64}")


def is_page_key(value: object) -> bool:
    """Return whether ``value`` is a strict page key: 64 lowercase hex characters. Clause: KEY-2.

    post: (not __return__) or (isinstance(value, str) and len(value) == 64)
    """
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def compute_page_key(token_ids: tuple[int, ...], prior_key: Optional[str] = None) -> str:
    """Return the key of a page from its tokens and the previous page's key. Clause: KEY-1.

    pre: all(0 <= t < 2 ** 32 for t in token_ids)
    pre: prior_key is None or is_page_key(prior_key)
    post: is_page_key(__return__)
    """
    digest = hashlib.sha256()
    if prior_key is not None:
        digest.update(bytes.fromhex(prior_key))
    for token in token_ids:
        digest.update(token.to_bytes(4, byteorder="little", signed=False))
    return digest.hexdigest()


def compute_key_chain(
    token_ids: tuple[int, ...], page_size: int, prior_key: Optional[str] = None
) -> tuple[str, ...]:
    """Return the key of every whole page of ``token_ids``, chained from ``prior_key``. Clauses: KEY-1, KEY-3.

    A trailing partial page has no key.

    pre: page_size >= 1
    pre: all(0 <= t < 2 ** 32 for t in token_ids)
    pre: prior_key is None or is_page_key(prior_key)
    post: len(__return__) == len(token_ids) // page_size
    """
    keys: list[str] = []
    previous = prior_key
    for start in range(0, len(token_ids) - page_size + 1, page_size):
        previous = compute_page_key(token_ids[start : start + page_size], previous)
        keys.append(previous)
    return tuple(keys)
