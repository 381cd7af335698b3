"""Planted buggy variants of spec functions, each under the real function's contracts.

CrossHair and the hypothesis properties in this folder must refute every one
of them; ``test_planted.py`` and ``.ci/crosshair_check.py`` prove they do.
Each variant reproduces a bug seen in the field (CONTRACT.md §5, §6).
"""

from __future__ import annotations

from typing import Optional

from hicache_spec.batching import count_leading_run
from hicache_spec.pools import compute_restorable_lengths


def extend_prefix_in_place(prefix: Optional[list[str]], batch: list[str]) -> Optional[list[str]]:
    """Extend the prefix with ``+=`` (SGLang before the fix): mutates the list already handed out.

    post[]: __return__ is None or __return__ == prefix + batch
    """
    if prefix is None:
        return None
    prefix += batch
    return prefix


def extend_prefix_only_when_non_empty(prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]) -> Optional[tuple[str, ...]]:
    """Extend only a non-empty prefix (SGLang before the fix): [] never accumulates.

    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    """
    if prefix is not None and len(prefix) > 0:
        return prefix + batch
    return prefix


def extend_prefix_collapsing_empty(prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]) -> Optional[tuple[str, ...]]:
    """Treat [] as None ('feature off'): the feature switches itself off at the root.

    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    """
    if not prefix:
        return None
    return prefix + batch


def count_leading_run_off_by_one(flags: tuple[bool, ...]) -> int:
    """Count the first failing flag as a hit.

    post: 0 <= __return__ <= len(flags)
    post: all(flags[:__return__])
    post: __return__ == len(flags) or not flags[__return__]
    """
    for index, flag in enumerate(flags):
        if not flag:
            return index + 1
    return len(flags)


def compute_pool_hit_window_misplaced(policy: str, window: int, present: tuple[bool, ...], kv_hit: int) -> int:
    """Check the TRAILING_PAGES window at the start of the prefix instead of at its end.

    pre: policy in ("all_pages", "trailing_pages")
    pre: 0 <= kv_hit <= len(present)
    pre: window >= 0
    post: 0 <= __return__ <= kv_hit
    post: policy != "all_pages" or all(present[:__return__])
    post: policy != "trailing_pages" or __return__ == 0 or all(present[max(0, __return__ - max(1, window)):__return__])
    """
    if policy == "all_pages":
        run = 0
        while run < kv_hit and present[run]:
            run += 1
        return run
    size = max(1, window)
    return kv_hit if all(present[:size]) else 0


def fold_pool_query_min_of_maxima(kv_present: tuple[bool, ...], pools: tuple) -> tuple:
    """Fold with the minimum of each pool's largest hit (SGLang #39147; HiCacheFile before 0.5.23, SimHiCacheStorage).

    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: __return__[0] == (__return__[2][-1] if __return__[2] else 0)
    post: all(n in compute_restorable_lengths(q[1], q[2], q[3], count_leading_run(kv_present)) for q in pools for n in __return__[2])
    """
    kv_hit = count_leading_run(kv_present)
    final = kv_hit
    entries = [("kv", kv_hit)] if kv_hit else []
    for name, policy, window, present in pools:
        if final == 0:
            break
        lengths = compute_restorable_lengths(policy, window, present, kv_hit)
        boundary = lengths[-1] if lengths else 0
        if boundary:
            entries.append((name, boundary))
        final = min(final, boundary)
    return final, tuple(entries), tuple(range(1, final + 1))


def plan_sidecar_groups_operation_prefix(prefix: Optional[tuple[str, ...]], span: tuple[str, ...], key_counts: tuple[int, ...]) -> tuple:
    """Give every sidecar call the operation-level prefix (the old PFX-9 decision): a trailing window's prefix skips keys.

    pre: all(0 <= n <= len(span) for n in key_counts)
    post: prefix is None or all(p == prefix + span[: len(span) - key_counts[m[0]]] for p, m in __return__)
    """
    if prefix is None:
        return ((None, tuple(range(len(key_counts)))),)
    groups: dict[int, list[int]] = {}
    for index, count in enumerate(key_counts):
        groups.setdefault(len(span) - count, []).append(index)
    return tuple((prefix, tuple(members)) for members in groups.values())
