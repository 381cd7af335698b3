"""Oracles of the linker clauses (LNK-7, LNK-22): what lookup must report, and what the engine loads.

A linker's lookup answers for the device-uncached tail of a prefix: page 0 of the
KV transfer's keys is the first page the device does not hold. Its answer is a
set of prefix lengths in pages; the engine intersects the ranks' sets.
"""

from __future__ import annotations

from hicache_spec.pools import PoolQuery, fold_pool_query

__all__ = ["intersect_rank_lookups", "judge_lookup", "linker_restorable_lengths"]


def linker_restorable_lengths(kv_present: tuple[bool, ...], pools: tuple[PoolQuery, ...]) -> tuple[int, ...]:
    """Return, ascending, every tail length lookup must report. Clause: LNK-7.

    ``kv_present[i]`` says whether the tail's page i is stored for KV; each
    other pool is ``(name, policy, window, presence per tail page)``, the
    window being the number of keys of its TRAILING_PAGES transfer. The set
    is the one BE-26 defines for ``restorable_prefix_pages``.

    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages", "block_groups") and query[2] >= 0 for query in pools)
    post: all(1 <= n <= len(kv_present) for n in __return__)
    post: all(a < b for a, b in zip(__return__, __return__[1:]))
    post: all(all(kv_present[:n]) for n in __return__)
    """
    return fold_pool_query(kv_present, pools)[2]


def judge_lookup(
    reported: tuple[int, ...], expected: tuple[int, ...], tail_pages: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return (lengths reported but not restorable, restorable lengths not reported). Clause: LNK-7.

    Values outside 1..tail_pages are ignored (the engine never marks them);
    order and repeats carry no meaning.

    pre: tail_pages >= 0
    pre: all(1 <= n <= tail_pages for n in expected)
    post: all(1 <= n <= tail_pages and n not in expected for n in __return__[0])
    post: all(n in expected and n not in reported for n in __return__[1])
    post: (__return__ == ((), ())) == ({n for n in reported if 1 <= n <= tail_pages} == set(expected))
    """
    seen = {n for n in reported if 1 <= n <= tail_pages}
    wanted = set(expected)
    return tuple(sorted(seen - wanted)), tuple(sorted(wanted - seen))


def intersect_rank_lookups(per_rank: tuple[tuple[int, ...], ...], tail_pages: int) -> int:
    """Return the tail length the engine loads: the largest length every rank reported, else 0. Clause: LNK-22.

    Each rank's lengths are read as a 0/1 mask over 1..tail_pages and the
    masks are combined by MIN (logical AND); values outside are ignored.

    pre: tail_pages >= 0
    pre: len(per_rank) >= 1
    post: 0 <= __return__ <= tail_pages
    post: __return__ == 0 or all(__return__ in lengths for lengths in per_rank)
    post: all(not all(n in lengths for lengths in per_rank) for n in range(__return__ + 1, tail_pages + 1))
    """
    common = {n for n in per_rank[0] if 1 <= n <= tail_pages}
    for lengths in per_rank[1:]:
        common &= set(lengths)
    return max(common) if common else 0
