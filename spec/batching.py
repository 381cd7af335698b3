"""Slicing an operation into storage batches and counting leading runs (CTL-2, BE-2, HYB-8)."""

from __future__ import annotations

__all__ = ["count_leading_run", "plan_batches"]


def plan_batches(page_count: int, batch_size: int) -> tuple[tuple[int, int], ...]:
    """Return the ``(start, end)`` page ranges of an operation's batches. Clause: CTL-2.

    Batches are consecutive, start at multiples of ``batch_size``, cover every
    page once and none is empty.

    pre: page_count >= 0
    pre: batch_size >= 1
    post: len(__return__) == (page_count + batch_size - 1) // batch_size
    post: all(start % batch_size == 0 for start, _ in __return__)
    post: all(0 < end - start <= batch_size for start, end in __return__)
    post: all(a[1] == b[0] for a, b in zip(__return__, __return__[1:]))
    post: __return__ == () or (__return__[0][0] == 0 and __return__[-1][1] == page_count)
    """
    return tuple((start, min(start + batch_size, page_count)) for start in range(0, page_count, batch_size))


def count_leading_run(flags: tuple[bool, ...]) -> int:
    """Return how many flags are True before the first False. Clauses: BE-2, HYB-8.

    post: 0 <= __return__ <= len(flags)
    post: all(flags[:__return__])
    post: __return__ == len(flags) or not flags[__return__]
    """
    for index, flag in enumerate(flags):
        if not flag:
            return index
    return len(flags)
