"""Objects the suite hands to a backend and watches afterwards (PFX-6).

SGLang hands a backend its prefix as a plain, mutable ``list`` inside a
``HiCacheStorageExtraInfo`` dataclass. ``WatchedList`` is such a list that
records every mutating call made on it; the suite also compares its content
before and after, and holds only a weak reference to learn whether the
backend kept it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

__all__ = ["ExtraInfoStandIn", "WatchedList"]

_MUTATORS = (
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "sort",
    "reverse",
    "__setitem__",
    "__delitem__",
    "__iadd__",
    "__imul__",
)


class WatchedList(list[Any]):
    """A list that records the name of every mutating method called on it in ``mutations``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.mutations: list[str] = []


def _recording(name: str) -> Any:
    original = getattr(list, name)

    def method(self: WatchedList, *args: Any, **kwargs: Any) -> Any:
        self.mutations.append(name)
        return original(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in _MUTATORS:
    setattr(WatchedList, _name, _recording(_name))


@dataclass
class ExtraInfoStandIn:
    """A stand-in for SGLang's ``HiCacheStorageExtraInfo`` dataclass: same fields, a mutable list inside."""

    prefix_keys: Optional[list[Any]] = None
    extra_info: Optional[dict[str, Any]] = None
