"""Planted buggy variants of spec functions, each under the real function's contracts.

CrossHair and the hypothesis properties in this folder must refute every one
of them; ``test_planted.py`` and ``.ci/crosshair_check.py`` prove they do.
Each variant reproduces a bug seen in the field (CONTRACT.md §5, §6).
"""

from __future__ import annotations

from typing import Optional


def extend_prefix_in_place(prefix: Optional[list[str]], batch: list[str]) -> Optional[list[str]]:
    """Extend the prefix with ``+=`` (SGLang before the fix): mutates the list already handed out.

    post[]: __return__ is None or __return__ == prefix + batch
    """
    if prefix is None:
        return None
    prefix += batch
    return prefix


def extend_prefix_only_when_non_empty(
    prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]
) -> Optional[tuple[str, ...]]:
    """Extend only a non-empty prefix (SGLang before the fix): [] never accumulates.

    post: (prefix is None) == (__return__ is None)
    post: __return__ is None or __return__ == prefix + batch
    """
    if prefix is not None and len(prefix) > 0:
        return prefix + batch
    return prefix


def extend_prefix_collapsing_empty(
    prefix: Optional[tuple[str, ...]], batch: tuple[str, ...]
) -> Optional[tuple[str, ...]]:
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


def fold_pool_query_min_of_maxima(
    kv_present: tuple[bool, ...], pools: tuple[tuple[str, str, int, tuple[bool, ...]], ...]
) -> tuple:
    """Fold with the minimum of each pool's largest hit (SGLang #39147; HiCacheFile before 0.5.23, SimHiCacheStorage).

    The first two pre lines narrow the domain to where the two folds part (an
    ALL_PAGES pool then a one-page TRAILING_PAGES pool over at most four pages),
    so CrossHair finds the counterexample within its budget; the first post
    states the real contract's last one for that domain (a one-page window must
    hold the hit's last page), the rest are the real ``fold_pool_query``'s.

    pre: len(kv_present) <= 4 and len(pools) == 2
    pre: pools[0][1] == "all_pages" and pools[1][1] == "trailing_pages" and pools[1][2] == 1
    post: __return__[0] == 0 or pools[1][3][__return__[0] - 1]
    pre: all(len(query[3]) == len(kv_present) for query in pools)
    pre: all(query[1] in ("all_pages", "trailing_pages") and query[2] >= 0 for query in pools)
    post: 0 <= __return__[0] <= count_leading_run(kv_present)
    post: __return__[0] == (__return__[2][-1] if __return__[2] else 0)
    post: all(n in compute_restorable_lengths(q[1], q[2], q[3], count_leading_run(kv_present)) for q in pools for n in __return__[2])
    """
    kv_hit = 0
    while kv_hit < len(kv_present) and kv_present[kv_hit]:
        kv_hit += 1
    final = kv_hit
    entries = [("kv", kv_hit)] if kv_hit else []
    for name, policy, window, present in pools:
        if final == 0:
            break
        size = max(1, window)
        boundary = 0
        for end in range(kv_hit, 0, -1):  # the pool's largest hit, inline
            if policy == "all_pages":
                ok = all(present[:end])
            else:
                ok = all(present[max(0, end - size) : end])
            if ok:
                boundary = end
                break
        if boundary:
            entries.append((name, boundary))
        final = min(final, boundary)
    return final, tuple(entries), tuple(range(1, final + 1))


def plan_sidecar_groups_operation_prefix(
    prefix: Optional[tuple[str, ...]], span: tuple[str, ...], key_counts: tuple[int, ...]
) -> tuple:
    """Give every sidecar call the operation-level prefix (the old PFX-9 decision): a trailing window's prefix skips keys.

    pre: all(0 <= n <= len(span) for n in key_counts)
    post: prefix is None or all(p == prefix + span[: len(span) - key_counts[m[0]]] for p, m in __return__)
    """
    if prefix is None:
        return ((None, tuple(range(len(key_counts)))),)
    # Lists rather than a dict, so that CrossHair explores the grouping within its per-condition budget.
    groups: list = []
    seen: list = []
    for index, count in enumerate(key_counts):
        covered = len(span) - count
        if covered in seen:
            groups[seen.index(covered)][1].append(index)
        else:
            seen.append(covered)
            groups.append((prefix, [index]))
    return tuple((group_prefix, tuple(members)) for group_prefix, members in groups)
