"""Second formulations of spec rules, written apart from ``hicache_spec`` so tests do not check the spec by itself.

Each is a plain loop over pages, restating SGLang 0.5.23's rule from its
statement, not from the spec's code; ``tests/spec/test_oracles.py`` shows each
refutes a planted wrong implementation and agrees with the spec.
"""

from __future__ import annotations


def plain_pool_boundary(policy: str, window: int, present: tuple, kv_hit: int) -> int:
    """A pool's own boundary: the largest n <= kv_hit whose needed pages are all present (0 if none).

    ALL_PAGES needs pages 0..n-1; TRAILING_PAGES the last max(1, window) pages
    before n; BLOCK_GROUPS the leading present run cut to whole groups.
    """
    if policy == "block_groups":
        run = 0
        while run < kv_hit and present[run]:
            run += 1
        group = window if window > 0 else 1
        return (run // group) * group
    best = 0
    for n in range(1, kv_hit + 1):
        if plain_restores(policy, window, present, n):
            best = n
    return best


def plain_restores(policy: str, window: int, present: tuple, n: int) -> bool:
    """Whether an ALL_PAGES or TRAILING_PAGES pool can restore the prefix of n pages."""
    first = 0 if policy == "all_pages" else n - (window if window > 0 else 1)
    for page in range(max(first, 0), n):
        if not present[page]:
            return False
    return True


def plain_fold(kv_present: tuple, pools: tuple) -> tuple[int, tuple[tuple[str, int], ...], tuple[int, ...]]:
    """batch_exists_v2's (hit, entries, restorable lengths) as 0.5.23's HiCacheFile answers it.

    KV restores 1..kv_hit (its leading present run). Each gating pool keeps, of
    the lengths still restorable, those it can restore; a BLOCK_GROUPS pool
    reports its boundary and gates nothing. Entries, KV first, are the non-zero
    boundaries of the pools examined; once no length is left, no later pool
    is examined. The hit is the largest length left.
    """
    kv_hit = 0
    while kv_hit < len(kv_present) and kv_present[kv_hit]:
        kv_hit += 1
    entries = [("kv", kv_hit)] if kv_hit > 0 else []
    left = [n for n in range(1, kv_hit + 1)]
    for name, policy, window, present in pools:
        if not left:
            break
        boundary = plain_pool_boundary(policy, window, present, kv_hit)
        if boundary > 0:
            entries.append((name, boundary))
        if policy != "block_groups":
            left = [n for n in left if plain_restores(policy, window, present, n)]
    return (left[-1] if left else 0), tuple(entries), tuple(left)
