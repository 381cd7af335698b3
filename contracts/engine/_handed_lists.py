"""Lists the scenario runner hands an engine, which remember where they were changed in place. Clause: PFX-5.

SGLang hands its controller plain lists (the page keys of an operation, its
prefix), and an engine may build every batch's prefix from them. A change to
one of them in place (``operation.prefix_keys += batch``) changes the
operation's prefix under every backend and every later batch (PFX-5), yet
once an extra-info class copies the list (as the project's
``HiCacheStorageExtraInfo`` does) no backend call shows the list itself. So
the runner hands ``HandedList`` objects: real lists (``isinstance(value,
list)``, ``+``, slicing and ``list(...)`` behave as for a list) that note
each in-place change with the frame that made it.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, Optional, SupportsIndex

__all__ = ["HandedList", "ListChange"]

_MAX_CHANGES = 8
"""Changes kept per list: the first ones say where the engine went wrong."""


class ListChange(NamedTuple):
    """One in-place change to a handed list: the operation, the length before and after, and where."""

    operation: str
    """How the list was changed: ``+=``, ``extend``, ``append``, ``[i] =``, ``clear`` ..."""
    length_before: int
    length_after: int
    where: str
    """``file:line in function`` of the code that changed it."""

    def describe(self) -> str:
        grown = self.length_after - self.length_before
        if grown > 0:
            how = f"extended by {grown} key(s)"
        elif grown < 0:
            how = f"shortened by {-grown} key(s)"
        else:
            how = "changed in place"
        return f"{how} with {self.operation} at {self.where}"


def _caller(depth: int) -> str:
    """``file:line in function`` of the frame ``depth`` levels up (the code calling the list's method)."""
    try:
        frame = sys._getframe(depth)
    except ValueError:  # pragma: no cover - a shallower stack than any caller has
        return "an unknown place"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


class HandedList(list):  # type: ignore[type-arg]
    """A list of keys handed to an engine, noting every in-place change and where it was made.

    ``label`` names the list in reports (``the prefix_keys list handed to
    prefetch()``); ``original`` is its content when handed over;
    ``changes`` the in-place changes, the first ``_MAX_CHANGES`` of them.
    """

    __slots__ = ("label", "original", "changes", "change_count")

    label: str
    original: tuple[Any, ...]
    changes: list[ListChange]
    change_count: int

    def __init__(self, keys: Any = (), label: str = "a list handed to the engine") -> None:
        super().__init__(keys)
        self.label = label
        self.original = tuple(self)
        self.changes = []
        self.change_count = 0

    def _note(self, operation: str, length_before: int) -> None:
        self.change_count += 1
        if len(self.changes) < _MAX_CHANGES:
            self.changes.append(ListChange(operation, length_before, len(self), _caller(3)))

    # ---------------------------------------------------------------- the mutating methods, each noted
    def __iadd__(self, other: Any) -> HandedList:  # type: ignore[misc]
        before = len(self)
        super().__iadd__(other)
        self._note("+=", before)
        return self

    def __imul__(self, count: SupportsIndex) -> HandedList:
        before = len(self)
        super().__imul__(count)
        self._note("*=", before)
        return self

    def extend(self, other: Any) -> None:
        before = len(self)
        super().extend(other)
        self._note("extend()", before)

    def append(self, item: Any) -> None:
        before = len(self)
        super().append(item)
        self._note("append()", before)

    def insert(self, index: SupportsIndex, item: Any) -> None:
        before = len(self)
        super().insert(index, item)
        self._note("insert()", before)

    def __setitem__(self, index: Any, value: Any) -> None:
        before = len(self)
        super().__setitem__(index, value)
        self._note("[...] =", before)

    def __delitem__(self, index: Any) -> None:
        before = len(self)
        super().__delitem__(index)
        self._note("del [...]", before)

    def pop(self, index: SupportsIndex = -1) -> Any:
        before = len(self)
        item = super().pop(index)
        self._note("pop()", before)
        return item

    def remove(self, item: Any) -> None:
        before = len(self)
        super().remove(item)
        self._note("remove()", before)

    def clear(self) -> None:
        before = len(self)
        super().clear()
        self._note("clear()", before)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        before = len(self)
        super().sort(*args, **kwargs)
        self._note("sort()", before)

    def reverse(self) -> None:
        before = len(self)
        super().reverse()
        self._note("reverse()", before)

    # ---------------------------------------------------------------- what a report says
    @property
    def changed(self) -> bool:
        """Whether the list was changed in place (its content differs, or a change was noted)."""
        return bool(self.change_count) or tuple(self) != self.original

    def change_message(self) -> Optional[str]:
        """One sentence naming the list, how and where it was changed, and what it holds now; None if unchanged."""
        if not self.changed:
            return None
        if self.changes:
            first = self.changes[0].describe()
            more = f" (the first of {self.change_count} in-place changes)" if self.change_count > 1 else ""
            how = f"was {first}{more}"
        else:
            how = "was changed in place"
        return (
            f"{self.label} ({len(self.original)} key(s) when handed over) {how}; it holds {len(self)} key(s) now. "
            "A list handed over is never changed: build a new one per batch (prefix_keys + batch_keys)"
        )

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))  # a plain list when copied or pickled
