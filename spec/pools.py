"""Pool-hit folding for hybrid models (HYB-6, HYB-7, HYB-8, BE-21, HYB-3)."""

from __future__ import annotations

from hicache_spec.batching import count_leading_run

__all__ = [
    "ALL_PAGES",
    "TRAILING_PAGES",
    "PoolQuery",
    "compute_pool_hit",
    "compute_trailing_window",
    "count_pool_hits",
    "fold_pool_hits",
]

ALL_PAGES = "all_pages"
"""Every page in [0, kv_hit) must exist in the pool (SGLang's PoolHitPolicy.ALL_PAGES)."""
TRAILING_PAGES = "trailing_pages"
"""Only the last N pages of the prefix must exist (SGLang's PoolHitPolicy.TRAILING_PAGES)."""

KV = "kv"
"""The name of the KV pool (SGLang's PoolName.KV)."""

PoolQuery = tuple[str, str, int, tuple[bool, ...]]
"""One pool of a batch_exists_v2 query: (name, policy, window N = len(transfer.keys), presence per query key)."""


def compute_pool_hit(policy: str, window: int, present: tuple[bool, ...], kv_hit: int) -> int:
    """Return how many leading pages of the KV hit this pool can serve. Clauses: HYB-6, HYB-7.

    ALL_PAGES: the leading run of present pages within the KV hit.
    TRAILING_PAGES: the largest n <= kv_hit whose window of max(1, window)
    pages ending at n is present; 0 if there is none.

    pre: policy in ("all_pages", "trailing_pages")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    post: 0 <= __return__ <= kv_hit
    post: policy != "all_pages" or all(present[:__return__])
    post: policy != "trailing_pages" or __return__ == 0 or all(present[max(0, __return__ - max(1, window)):__return__])
    """
    if policy == ALL_PAGES:
        return count_leading_run(present[:kv_hit])  # HYB-6
    size = max(1, window)  # HYB-7
    for end in range(kv_hit, 0, -1):
        if all(present[max(0, end - size) : end]):
            return end
    return 0


def fold_pool_hits(
    kv_present: tuple[bool, ...], pools: tuple[PoolQuery, ...]
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Return batch_exists_v2's result: the folded KV hit and the nonzero hit of each pool. Clauses: BE-21, HYB-6, HYB-7.

    The KV hit is the leading run of present KV pages; each pool is measured
    against it; the folded hit is the minimum over KV and every pool. The
    per-pool entries, KV first, leave out pools with zero hits.

    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: all(hits > 0 for _, hits in __return__[1])
    post: all(__return__[0] <= hits for _, hits in __return__[1])
    """
    kv_hit = count_leading_run(kv_present)
    folded = kv_hit
    entries: list[tuple[str, int]] = [(KV, kv_hit)] if kv_hit else []
    for name, policy, window, present in pools:
        hit = compute_pool_hit(policy, window, present, kv_hit)
        folded = min(folded, hit)
        if hit:
            entries.append((name, hit))
    return folded, tuple(entries)


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
