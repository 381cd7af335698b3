"""What a backend result confirms: the one rule the controller counts by and the trace checker judges by (CTL-11).

A page counts as loaded (or written) only when the backend confirmed it:

- a v1 read or write result (``batch_get_v1``, ``batch_set_v1``, one pool's
  entry of a v2 result) confirms its leading run of entries that are a true
  flag (``True``, numpy's included: ``is_flag``), and only when it is a list
  of exactly ``count`` entries (BE-14); ``1``, ``"yes"``, ``None`` or a wrong
  length confirm nothing from there on (SGLang reads more leniently: the
  divergences on CTL-11);
- a ``batch_exists`` result confirms a count in ``[0, count]`` as SGLang
  reads one (``is_count`` loose: an int, a bool, numpy's integers, BE-2);
  anything else confirms 0.

``hicache_reference.calls`` counts by these functions; so does
``hicache_contracts.engine.check_trace``. A recorded trace may hold a tuple
where the engine received a list (the recorder's snapshot) — pass
``snapshot=True`` there to accept either sequence type.
"""

from __future__ import annotations

import operator
from typing import Any

from hicache_spec.batching import count_leading_run
from hicache_spec.values import is_count, is_true_flag

__all__ = ["confirmed_hit", "confirmed_pages"]


def confirmed_pages(result: Any, count: int, *, snapshot: bool = False) -> int:
    """Return how many leading pages a v1-style result confirms. Clauses: CTL-11, BE-14.

    ``snapshot`` accepts a tuple as well as a list (a recorded copy of a list).

    post: 0 <= __return__ <= max(count, 0)
    """
    kinds = (list, tuple) if snapshot else (list,)
    if type(result) not in kinds or len(result) != count:
        return 0
    return count_leading_run(tuple(is_true_flag(entry) for entry in result))


def confirmed_hit(result: Any, count: int) -> int:
    """Return the hit a ``batch_exists`` result confirms: a count in [0, count] (``is_count`` loose), else 0. Clauses:
    CTL-11, BE-2.

    post: 0 <= __return__ <= max(count, 0)
    post: type(__return__) is int
    """
    if count >= 0 and is_count(result, 0, count, exact=False):
        return operator.index(result)
    return 0
