"""What a backend result confirms: the one rule the controller counts by and the trace checker judges by (CTL-11).

A page counts as loaded (or written) only when the backend confirmed it:

- a v1 read or write result (``batch_get_v1``, ``batch_set_v1``, one pool's
  entry of a v2 result) confirms its leading run of entries that are ``True``
  itself, and only when it is a list of exactly ``count`` entries (BE-14);
  ``1``, ``"yes"``, ``None`` or a wrong length confirm nothing from there on;
- a ``batch_exists`` result confirms an ``int`` (not a ``bool``) in
  ``[0, count]``; anything else confirms 0.

``hicache_reference.calls`` counts by these functions; so does
``hicache_contracts.engine.check_trace``. A recorded trace may hold a tuple
where the engine received a list (the recorder's snapshot) — pass
``snapshot=True`` there to accept either sequence type.
"""

from __future__ import annotations

from typing import Any

from hicache_spec.batching import count_leading_run

__all__ = ["confirmed_hit", "confirmed_pages"]


def confirmed_pages(result: Any, count: int, *, snapshot: bool = False) -> int:
    """Return how many leading pages a v1-style result confirms. Clauses: CTL-11, BE-14.

    ``snapshot`` accepts a tuple as well as a list (a recorded copy of a list).

    post: 0 <= __return__ <= max(count, 0)
    """
    kinds = (list, tuple) if snapshot else (list,)
    if type(result) not in kinds or len(result) != count:
        return 0
    return count_leading_run(tuple(entry is True for entry in result))


def confirmed_hit(result: Any, count: int) -> int:
    """Return the hit a ``batch_exists`` result confirms: an int in [0, count], else 0. Clauses: CTL-11, BE-2.

    post: 0 <= __return__ <= max(count, 0)
    """
    if type(result) is int and 0 <= result <= count:
        return result
    return 0
