"""Plain-value rules shared by every layer (standard library only)."""

from __future__ import annotations

from typing import Any, Final, Optional, TypeGuard

__all__ = ["BEST_EFFORT", "PREFETCH_POLICIES", "TIMEOUT", "WAIT_COMPLETE", "is_count"]

BEST_EFFORT: Final = "best_effort"
"""Prefetch policy: load what arrives until the scheduler asks to stop (CTL-9; the default)."""
WAIT_COMPLETE: Final = "wait_complete"
"""Prefetch policy: never stopped before every page is loaded, whatever the scheduler asks (CTL-9)."""
TIMEOUT: Final = "timeout"
"""Prefetch policy: stopped once its deadline has passed (CTL-9, CTL-14)."""
PREFETCH_POLICIES = (BEST_EFFORT, WAIT_COMPLETE, TIMEOUT)
"""The prefetch policies of CTL-9, in the order the clause names them."""


def is_count(value: Any, minimum: int = 0, maximum: Optional[int] = None, *, exact: bool = True) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` itself (no bool, no subclass, no float) within ``[minimum, maximum]``.

    ``exact=False`` lets an ``int`` subclass (an ``IntEnum``) count too, never
    a bool: how a count a backend returns is read, since SGLang only does
    arithmetic with it; ``exact=True`` is how the project's own inputs are
    checked.

    pre: maximum is None or minimum <= maximum
    post: not __return__ or (isinstance(value, int) and not isinstance(value, bool) and value >= minimum)
    post: not (__return__ and exact) or type(value) is int
    """
    if exact:
        kind_ok = type(value) is int
    else:
        kind_ok = isinstance(value, int) and not isinstance(value, bool)
    return kind_ok and value >= minimum and (maximum is None or value <= maximum)
