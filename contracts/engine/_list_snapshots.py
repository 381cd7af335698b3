"""Snapshots of plain-list prefixes that share an earlier snapshot's keys instead of copying them.

SGLang builds each batch's prefix as a new list, ``prefix_keys + batch_hashes``,
so the list a call receives usually starts with every key of a list recorded
a batch earlier. Copying it costs one reference-count update per key, each on
a different object. Comparing it with a private list of the earlier
snapshot's keys costs a pass over two arrays of pointers (items that are the
same object are not even looked at), and only the new keys are copied: the
snapshot is the earlier one ``extended`` by them, a ``PrefixKeys`` sharing its
keys. The comparison covers every key, so the snapshot holds exactly what the
list held at call time (PFX-5), as a copy would.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from hicache_contracts.errors import ContractViolation
from hicache_contracts.prefix_keys import PrefixKeys, find_key_problem

KEPT = 4
"""Snapshots kept for comparison (one per operation in flight, roughly), the latest used first."""
SHORTEST = 257
"""Shorter lists are copied outright: a copy costs less than a comparison there."""


class _Starts:
    """Returned by ``mirror + [_END] < prefix`` exactly when ``prefix`` starts with every key of the mirror."""

    __slots__ = ()


_STARTS = _Starts()


class _End:
    """Appended to a mirror for one comparison: unequal to any key, and ``_END < key`` is ``_STARTS``.

    A list comparison finds the first position where the two lists' items
    differ and returns the comparison of those two items; with ``_END`` after
    the mirror's keys, that item is ``_END`` (and the result ``_STARTS``) only
    if every earlier position holds an equal key and the prefix is longer.
    """

    __slots__ = ()

    def __lt__(self, other: object) -> Any:
        return _STARTS


_END = _End()


class _Entry:
    __slots__ = ("snapshot", "mirror", "first", "extendable")

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot
        """The latest snapshot: a tuple (a copy) or a PrefixKeys (a copy extended)."""
        self.mirror: Optional[list[Any]] = None
        """A private list of the same keys, built when first compared; only ever appended to."""
        self.first = snapshot[0]
        self.extendable = True
        """False once its keys failed the key check: it can then only be reused whole."""


class ListSnapshots:
    """The latest few snapshots of long list prefixes, to build the next snapshot from. Thread-safe."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def add(self, snapshot: tuple[Any, ...]) -> None:
        """Keep a fresh copy of a list prefix (at least SHORTEST keys) for later calls."""
        with self._lock:
            self._entries.append(_Entry(snapshot))
            del self._entries[:-KEPT]

    def find(self, prefix: list[Any]) -> Any:
        """Return a snapshot of ``prefix`` built from a kept one, or None when none fits (copy it then)."""
        with self._lock:
            for entry in reversed(self._entries):
                try:
                    snapshot = _snapshot_from(entry, prefix)
                except Exception:  # an engine's key that cannot be compared: copy instead
                    snapshot = None
                if snapshot is not None:
                    self._entries.remove(entry)
                    self._entries.append(entry)
                    return snapshot
        return None


def _snapshot_from(entry: _Entry, prefix: list[Any]) -> Any:
    """Return the snapshot of ``prefix`` if it equals the entry's keys or starts with them, else None."""
    known = len(entry.snapshot)
    length = len(prefix)
    if known > length or not (prefix[0] == entry.first and prefix[known - 1] == entry.snapshot[-1]):
        return None
    if entry.mirror is None:
        entry.mirror = list(entry.snapshot)
    mirror = entry.mirror
    if known == length:
        return entry.snapshot if mirror == prefix else None
    if not entry.extendable:
        return None
    mirror.append(_END)
    try:
        starts: object = mirror < prefix  # _END's comparison answers _STARTS when prefix extends mirror
    finally:
        mirror.pop()
    if starts is not _STARTS:
        return None
    added = prefix[known:]
    base = entry.snapshot
    try:
        if not isinstance(base, PrefixKeys):
            if find_key_problem(base) is not None:
                entry.extendable = False
                return None
            base = PrefixKeys._from_checked_tuple(base)
        grown = base.extended(added)
    except ContractViolation:  # a new key that is not a page key: recorded by a plain copy
        return None
    mirror.extend(added)
    entry.snapshot = grown
    return grown
