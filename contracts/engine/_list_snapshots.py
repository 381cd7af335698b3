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

A new operation's first list is often the start of an earlier, longer one
(the same prompt prefix): it is compared with the start of the private list
and gets the earlier snapshot of that length; while its next lists keep
equal to the earlier operation's, they get that operation's later snapshots
too (``_Entry.ahead``), compared the same way, key for key.

The private lists are kept for the next entries (``_Mirrors``) rather than
dropped with their entry: a long-lived list is not walked by the garbage
collector's young collections, where a new one of 16,000 keys would be, once
per collection, touching every key.
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
    """Put in a mirror's place for one comparison: unequal to any key, and ``_END < key`` is ``_STARTS``.

    A list comparison finds the first position where the two lists' items
    differ and returns the comparison of those two items; with ``_END`` at
    position ``count - 1`` of the mirror, that item is ``_END`` (and the
    result ``_STARTS``) only if every earlier position holds an equal key.
    """

    __slots__ = ()

    def __lt__(self, other: object) -> Any:
        return _STARTS


_END = _End()


def _starts_with(mirror: list[Any], prefix: list[Any], count: int) -> bool:
    """Whether the first ``count`` keys of ``prefix`` equal those of ``mirror`` (1 <= count <= both lengths)."""
    last = count - 1
    saved = mirror[last]
    mirror[last] = _END
    try:
        starts: object = mirror < prefix  # _STARTS exactly when the first count - 1 keys are equal
    finally:
        mirror[last] = saved
    return starts is _STARTS and bool(prefix[last] == saved)


class _Entry:
    __slots__ = ("snapshot", "mirror", "first", "last", "extendable", "ahead")

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot
        """The latest snapshot: a tuple (a copy) or a PrefixKeys (a copy extended)."""
        self.mirror: Optional[list[Any]] = None
        """A private list of the snapshot's keys (of ``ahead[0]``'s while ``ahead`` is set), filled when first compared."""
        self.first = snapshot[0]
        self.last = snapshot[-1]
        """The snapshot's last key (read on every comparison; a PrefixKeys reads it in Python)."""
        self.extendable = True
        """False once its keys failed the key check: it can then only be reused whole."""
        self.ahead: Optional[list[PrefixKeys]] = None
        """After going back to an earlier snapshot: the later ones it led to, the longest first, the next last."""


class _Mirrors:
    """Emptied private lists, handed to the next entries: the same list objects serve for a recorder's life."""

    __slots__ = ("_free",)

    def __init__(self) -> None:
        self._free: list[list[Any]] = []

    def take(self, keys: Any) -> list[Any]:
        """Return a private list holding ``keys``."""
        mirror = self._free.pop() if self._free else []
        mirror.extend(keys)
        return mirror

    def give_back(self, entries: list[_Entry]) -> None:
        """Empty the entries' private lists and keep them (at most KEPT) for later entries."""
        for entry in entries:
            mirror, entry.mirror, entry.ahead = entry.mirror, None, None
            if mirror is not None and len(self._free) < KEPT:
                mirror.clear()
                self._free.append(mirror)


class ListSnapshots:
    """The latest few snapshots of long list prefixes, to build the next snapshot from. Thread-safe."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._mirrors = _Mirrors()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._mirrors.give_back(self._entries)
            self._entries.clear()

    def add(self, snapshot: tuple[Any, ...]) -> None:
        """Keep a fresh copy of a list prefix (at least SHORTEST keys) for later calls."""
        with self._lock:
            self._entries.append(_Entry(snapshot))
            if len(self._entries) > KEPT:
                self._mirrors.give_back(self._entries[:-KEPT])
                del self._entries[:-KEPT]

    def find(self, prefix: list[Any]) -> Any:
        """Return a snapshot of ``prefix`` built from a kept one, or None when none fits (copy it then)."""
        with self._lock:
            for entry in reversed(self._entries):
                try:
                    snapshot = _snapshot_from(entry, prefix, self._mirrors)
                except Exception:  # an engine's key that cannot be compared: copy instead
                    snapshot = None
                if snapshot is not None:
                    self._entries.remove(entry)
                    self._entries.append(entry)
                    return snapshot
        return None


def _snapshot_from(entry: _Entry, prefix: list[Any], mirrors: _Mirrors) -> Any:
    """Return the snapshot of ``prefix`` if it equals the entry's keys or starts with them, else None."""
    snapshot = entry.snapshot
    known = len(snapshot)
    length = len(prefix)
    if known > length:
        return _rewound(entry, prefix, length)
    if not (prefix[0] == entry.first and prefix[known - 1] == entry.last):
        return None
    mirror = entry.mirror
    if mirror is None:
        mirror = entry.mirror = mirrors.take(snapshot)
    if known == length:
        return snapshot if _starts_with(mirror, prefix, known) else None
    if not entry.extendable:
        return None
    ahead = entry.ahead
    if ahead is not None:
        following = ahead[-1]
        if following._length == length and _starts_with(mirror, prefix, length):
            ahead.pop()
            if not ahead:
                entry.ahead = None  # the mirror holds exactly the snapshot's keys again
            entry.snapshot = following
            entry.last = mirror[length - 1]
            return following
        del mirror[known:]  # the list left the earlier operation's keys: forget them
        entry.ahead = None
    if not _starts_with(mirror, prefix, known):
        return None
    added = prefix[known:]
    base = snapshot
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
    entry.last = added[-1]
    return grown


def _rewound(entry: _Entry, prefix: list[Any], length: int) -> Any:
    """Return the entry's earlier snapshot of ``length`` keys if ``prefix`` equals it, the entry gone back to it.

    Only snapshots the entry was extended from count (they share its keys);
    the later ones are kept in ``ahead`` for the lists that follow.
    """
    mirror = entry.mirror
    snapshot = entry.snapshot
    if mirror is None or not isinstance(snapshot, PrefixKeys):
        return None
    later: list[PrefixKeys] = []
    node: Optional[PrefixKeys] = snapshot
    while node is not None and node._length > length:
        later.append(node)
        node = node._parent
    if node is None or node._length != length:
        return None
    if not (prefix[0] == entry.first and prefix[-1] == mirror[length - 1]):
        return None
    if not _starts_with(mirror, prefix, length):
        return None
    entry.ahead = later if entry.ahead is None else entry.ahead + later
    entry.snapshot = node
    entry.last = mirror[length - 1]
    return node
