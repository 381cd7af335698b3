"""Pool-hit folding for hybrid models (HYB-6, HYB-7, HYB-8, HYB-9, BE-21, HYB-3).

The fold of ``batch_exists_v2`` follows SGLang 0.5.23's ``HiCacheFile``: each
pool has a set of prefix lengths (in pages) it can restore; the hit is the
largest length that KV and every gating pool can restore, i.e. the maximum of
the intersection of those sets. Taking the minimum of each pool's largest hit
instead (SGLang #39147) names lengths a TRAILING_PAGES pool cannot restore.
"""

from __future__ import annotations

from hicache_spec.batching import count_leading_run

__all__ = [
    "ALL_PAGES",
    "BLOCK_GROUPS",
    "TRAILING_PAGES",
    "PoolFold",
    "PoolQuery",
    "compute_pool_hit",
    "compute_restorable_lengths",
    "compute_trailing_window",
    "count_pool_hits",
    "fold_pool_hits",
    "fold_pool_query",
]

ALL_PAGES = "all_pages"
"""Every page in [0, kv_hit) must exist in the pool (SGLang's PoolHitPolicy.ALL_PAGES)."""
TRAILING_PAGES = "trailing_pages"
"""Only the last N pages of the prefix must exist (SGLang's PoolHitPolicy.TRAILING_PAGES)."""
BLOCK_GROUPS = "block_groups"
"""Whole key groups from the span start; reports its own verdict and never gates (SGLang 0.5.22+)."""

POLICIES = (ALL_PAGES, TRAILING_PAGES, BLOCK_GROUPS)
"""Every hit policy the spec defines."""

KV = "kv"
"""The name of the KV pool (SGLang's PoolName.KV)."""

PoolQuery = tuple[str, str, int, tuple[bool, ...]]
"""One pool of a batch_exists_v2 query: (name, policy, window, presence per query key).

The window is N = len(transfer.keys) for TRAILING_PAGES and the group size
(``group_pages``) for BLOCK_GROUPS; ALL_PAGES ignores it.
"""

PoolFold = tuple[int, tuple[tuple[str, int], ...], tuple[int, ...]]
"""The result of a fold: (hit pages, (pool, own boundary) entries, restorable prefix lengths)."""


def compute_restorable_lengths(policy: str, window: int, present: tuple[bool, ...], kv_hit: int) -> tuple[int, ...]:
    """Return, ascending, every prefix length in 1..kv_hit this pool can restore. Clauses: HYB-6, HYB-7.

    ALL_PAGES: 1..n for the leading run n of present pages within the KV hit.
    TRAILING_PAGES: every length whose window of max(1, window) pages ending
    there is present; 5 may be restorable while 3 and 4 are not.

    pre: policy in ("all_pages", "trailing_pages")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    post: all(1 <= n <= kv_hit for n in __return__)
    post: all(a < b for a, b in zip(__return__, __return__[1:]))
    post: policy != "all_pages" or __return__ == tuple(range(1, count_leading_run(present[:kv_hit]) + 1))
    post: policy != "trailing_pages" or all(all(present[max(0, n - max(1, window)):n]) for n in __return__)
    """
    if policy == ALL_PAGES:
        return tuple(range(1, count_leading_run(present[:kv_hit]) + 1))  # HYB-6
    size = max(1, window)  # HYB-7
    return tuple(n for n in range(1, kv_hit + 1) if all(present[max(0, n - size) : n]))


def compute_pool_hit(policy: str, window: int, present: tuple[bool, ...], kv_hit: int) -> int:
    """Return a pool's own boundary within the KV hit: its largest restorable length. Clauses: HYB-6, HYB-7, HYB-9.

    BLOCK_GROUPS: the pages covered by the leading complete groups of
    max(1, window) present pages.

    pre: policy in ("all_pages", "trailing_pages", "block_groups")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    post: 0 <= __return__ <= kv_hit
    post: policy != "all_pages" or all(present[:__return__])
    post: policy != "trailing_pages" or __return__ == 0 or all(present[max(0, __return__ - max(1, window)):__return__])
    post: policy != "block_groups" or __return__ % max(1, window) == 0
    """
    if policy == BLOCK_GROUPS:
        size = max(1, window)  # HYB-9: whole groups only
        run = count_leading_run(present[:kv_hit])
        return run - run % size
    lengths = compute_restorable_lengths(policy, window, present, kv_hit)
    return lengths[-1] if lengths else 0


def fold_pool_query(kv_present: tuple[bool, ...], pools: tuple[PoolQuery, ...]) -> PoolFold:
    """Return batch_exists_v2's result as SGLang 0.5.23's HiCacheFile computes it. Clauses: BE-21, HYB-6, HYB-7, HYB-9.

    The KV hit is the leading run of present KV pages, and KV can restore
    1..kv_hit. Pools are taken in order; each gating pool (ALL_PAGES,
    TRAILING_PAGES) narrows the restorable set to its intersection with the
    pool's own restorable lengths. The hit is the largest length left (0 if
    none). Entries, KV first, hold each pool's own boundary where it is
    non-zero; once the restorable set is empty the remaining pools are not
    examined and get no entry. BLOCK_GROUPS pools report their own verdict
    and never narrow the set.

    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: __return__[0] == (__return__[2][-1] if __return__[2] else 0)
    post: all(hits > 0 for _, hits in __return__[1])
    post: all(a < b for a, b in zip(__return__[2], __return__[2][1:]))
    post: all(n in compute_restorable_lengths(q[1], q[2], q[3], count_leading_run(kv_present)) for q in pools if q[1] != "block_groups" for n in __return__[2])
    """
    kv_hit = count_leading_run(kv_present)
    entries: list[tuple[str, int]] = [(KV, kv_hit)] if kv_hit else []
    restorable = tuple(range(1, kv_hit + 1))
    for name, policy, window, present in pools:
        if not restorable:
            break  # nothing left to restore: later pools are not examined
        hit = compute_pool_hit(policy, window, present, kv_hit)
        if hit:
            entries.append((name, hit))  # the pool's own boundary
        if policy == BLOCK_GROUPS:
            continue  # HYB-9: never gates
        allowed = compute_restorable_lengths(policy, window, present, kv_hit)
        restorable = tuple(n for n in restorable if n in allowed)  # BE-21: intersection
    return (restorable[-1] if restorable else 0), tuple(entries), restorable


def fold_pool_hits(
    kv_present: tuple[bool, ...], pools: tuple[PoolQuery, ...]
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Return the folded hit and the per-pool entries of ``fold_pool_query``. Clauses: BE-21, HYB-6, HYB-7.

    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: all(hits > 0 for _, hits in __return__[1])
    """
    hit, entries, _ = fold_pool_query(kv_present, pools)
    return hit, entries


def count_pool_hits(results: tuple[tuple[str, tuple[bool, ...]], ...]) -> tuple[tuple[str, int], ...]:
    """Return, per pool, the length of the leading run of True in its results. Clause: HYB-8.

    post: len(__return__) == len(results)
    post: all(name == r[0] for (name, _), r in zip(__return__, results))
    post: all(0 <= hits <= len(r[1]) for (_, hits), r in zip(__return__, results))
    """
    return tuple((name, count_leading_run(flags)) for name, flags in results)


def compute_trailing_window(hit_pages: int, window: int) -> tuple[int, int]:
    """Return the ``(start, end)`` pages a TRAILING_PAGES transfer reads after a hit. Clause: HYB-3.

    pre: hit_pages >= 0
    pre: window >= 0
    post: __return__[1] == hit_pages
    post: 0 <= __return__[0] <= __return__[1]
    post: hit_pages == 0 or __return__[1] - __return__[0] == min(hit_pages, max(1, window))
    """
    return max(0, hit_pages - max(1, window)), hit_pages
