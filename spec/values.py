"""Plain-value rules shared by every layer (standard library only)."""

from __future__ import annotations

import operator
from typing import Any, Final, Optional, TypeGuard

__all__ = [
    "BEST_EFFORT",
    "PREFETCH_POLICIES",
    "TIMEOUT",
    "WAIT_COMPLETE",
    "is_count",
    "is_flag",
    "is_numpy_scalar",
    "is_true_flag",
]

BEST_EFFORT: Final = "best_effort"
"""Prefetch policy: load what arrives until the scheduler asks to stop (CTL-9; the default)."""
WAIT_COMPLETE: Final = "wait_complete"
"""Prefetch policy: never stopped before every page is loaded, whatever the scheduler asks (CTL-9)."""
TIMEOUT: Final = "timeout"
"""Prefetch policy: stopped once its deadline has passed (CTL-9, CTL-14)."""
PREFETCH_POLICIES = (BEST_EFFORT, WAIT_COMPLETE, TIMEOUT)
"""The prefetch policies of CTL-9, in the order the clause names them."""


COUNT_MIN_BYTES = 4
"""The narrowest integer scalar a returned count may be (BE-2): SGLang multiplies it by the page size in its own type."""


def _wide_enough(value: Any) -> bool:
    width = getattr(value, "itemsize", None)
    return type(width) is int and width >= COUNT_MIN_BYTES


def is_count(value: Any, minimum: int = 0, maximum: Optional[int] = None, *, exact: bool = True) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` itself (no bool, no subclass, no float) within ``[minimum, maximum]``.

    ``exact=False`` is how a count a backend returns is read (BE-2): an
    ``int`` of any kind (a bool, an ``IntEnum``), or a scalar a slice takes
    as an index (``operator.index``) at least 32 bits wide (numpy's
    integers from ``int32``, a 0-d integer tensor), since SGLang cuts the
    key list with it and multiplies it by the page size in its own type: a
    narrower integer overflows there, and a float or numpy's bool is no
    index at all. ``exact=True`` is how the project's own inputs are checked.

    pre: maximum is None or minimum <= maximum
    post: not __return__ or operator.index(value) >= minimum
    post: not (__return__ and exact) or type(value) is int
    """
    if exact:
        if type(value) is not int:
            return False
        number = value
    else:
        if not isinstance(value, int) and not _wide_enough(value):
            return False
        try:
            operator.index(value)
        except TypeError:
            return False
        number = value  # compared as it is, as SGLang compares it (an int subclass's own comparisons run)
    return bool(number >= minimum and (maximum is None or number <= maximum))


def is_numpy_scalar(value: Any) -> bool:
    """Whether ``value`` is one of numpy's scalars (its bools and numbers, immutable), told by type, without numpy."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ != "ndarray" and hasattr(value, "item")


def is_flag(value: Any) -> bool:
    """Whether ``value`` is a success flag as a backend may return one: a ``bool``, or numpy's bool (``numpy.bool_``
    before numpy 2, ``numpy.bool`` from it), never an int or another truthy value (BE-14).

    post: __return__ == (type(value) is bool or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")))
    """
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def is_true_flag(value: Any) -> bool:
    """Whether ``value`` is a flag (``is_flag``) that says yes: what confirms a page (CTL-11, BE-14)."""
    return is_flag(value) and bool(value)
