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
