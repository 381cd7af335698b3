"""Plain-value rules shared by every layer (standard library only)."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["is_count"]


def is_count(value: Any, minimum: int = 0, maximum: Optional[int] = None) -> bool:
    """Whether ``value`` is an ``int`` itself (no bool, no subclass, no float) within ``[minimum, maximum]``.

    pre: maximum is None or minimum <= maximum
    post: not __return__ or (type(value) is int and value >= minimum)
    """
    return type(value) is int and value >= minimum and (maximum is None or value <= maximum)
