"""The object primitives a reference backend supplies, and how objects are named.

A reference backend stores one object per page and pool. ``ObjectStore``
declares the primitives a concrete backend implements::

    _object_size(name)                    -> int | None     (None: no such object)
    _read_object_into(name, buffer)       -> bool           (fill exactly len(buffer) bytes)
    _write_object(name, data, group)      -> bool           (atomic: all or nothing)
    _clear_namespace(namespace)           -> None           (remove that namespace only)

and, with ``reads_into_ranges`` set, a fifth::

    _read_object_into_ranges(name, views) -> bool           (fill the views in order, exactly)

Each has a batch form (``_object_sizes``, ``_read_objects_into``,
``_read_objects_into_ranges``, ``_write_objects``) whose default loops over
the single form; a networked backend overrides the batch forms to save round
trips. Which are called is the backend's page strategy's choice
(strategies.py): ``PER_PAGE`` calls the single forms, ``BATCHED`` the batch
forms. Primitives may raise: ``_guarded`` turns every storage error into
False, 0 or None (BE-4, BE-5) and counts it.

A name is what ``_name(key, pool)`` gives: by default the ``ObjectName``'s
``to_str()`` (NS-6: one scheme for every call); a backend may render the
``ObjectName`` otherwise (the file backend as a path) or pass it on as it is
(Redis). See docs/backends.md, "Writing another backend on the same base".
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from hicache_reference.backends.namespace import ObjectName, plain_keys
from hicache_reference.backends.values import Counters
from hicache_spec import KV

__all__ = ["ObjectStore"]


class ObjectStore:
    """The object primitives (to be supplied), their batch forms, the guard and the names of objects."""

    reads_into_ranges: bool = False
    """Whether the backend supplies ``_read_object_into_ranges``, so reads may land in host memory directly."""

    writes_from_ranges: bool = False
    """Whether ``_write_object`` takes a page as the list of its host byte ranges (views of the pool, in
    flat-page order), so a write sends the pool's own memory without a copy."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        """Who this instance's pages belong to (NS-1..NS-5); the first part of every object name."""
        self._counters = Counters()
        self._closed = False
        self._name_prefixes: dict[str, tuple[str, Any]] = {}

    # ============================================================ primitives
    def _object_size(self, name: Any) -> Optional[int]:
        """Return the size in bytes of the object ``name``, or None if there is none."""
        raise NotImplementedError

    def _read_object_into(self, name: Any, buffer: memoryview) -> bool:
        """Fill ``buffer`` with the object ``name``; True only if it exists and is exactly ``len(buffer)`` bytes."""
        raise NotImplementedError

    def _write_object(self, name: Any, data: Any, group: Any) -> bool:
        """Store ``data`` as ``name``, atomically (BE-7); ``group`` names objects dropped together (BE-22)."""
        raise NotImplementedError

    def _read_object_into_ranges(self, name: Any, views: Sequence[memoryview]) -> bool:
        """Fill ``views`` one after the other with the object ``name``; only with ``reads_into_ranges``.

        True only if it exists and is exactly the views' total size. Writes
        nothing unless the size is right; a read that fails after that may
        leave the views partly filled (only the views: BE-16), and is False.
        """
        raise NotImplementedError

    def _clear_namespace(self, namespace: str) -> None:
        """Remove every object of ``namespace`` (this instance's, or under replicated KV its rank's own), and nothing
        else (NS-8)."""
        raise NotImplementedError

    # Batch forms: override to save round trips. Each entry fails alone.
    def _object_sizes(self, names: Sequence[Any]) -> list[Optional[int]]:
        """Return ``_object_size`` of each name; a failing name gives None."""
        return [self._guarded(self._object_size, None, name) for name in names]

    def _read_objects_into(self, names: Sequence[Any], buffers: Sequence[memoryview]) -> list[bool]:
        """Return ``_read_object_into`` of each (name, buffer); a failing one gives False."""
        return [self._guarded(self._read_object_into, False, name, buffer) for name, buffer in zip(names, buffers)]

    def _read_objects_into_ranges(self, names: Sequence[Any], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        """Return ``_read_object_into_ranges`` of each (name, views); a failing one gives False."""
        return [
            self._guarded(self._read_object_into_ranges, False, name, views) for name, views in zip(names, page_views)
        ]

    def _write_objects(self, names: Sequence[Any], datas: Sequence[Any], groups: Sequence[Any]) -> list[bool]:
        """Return ``_write_object`` of each (name, data, group); a missing data or failing one gives False."""
        return [
            data is not None and self._guarded(self._write_object, False, name, data, group)
            for name, data, group in zip(names, datas, groups)
        ]

    def _guarded(self, primitive: Any, on_error: Any, *arguments: Any) -> Any:
        """Call ``primitive``; turn any exception into ``on_error`` and count it (BE-5)."""
        try:
            return primitive(*arguments)
        except Exception:  # BE-5: a storage error is a failed page, never an exception into the engine
            self._counters.add(storage_errors=1)
            return on_error

    # ============================================================ names (NS-6)
    def _render(self, name: ObjectName) -> Any:
        """Return what the primitives get for ``name``: its ``to_str()`` unless a backend says otherwise."""
        return name.to_str()

    _longest_plain_key: Optional[int] = None
    """Longest key named as prefix + key (None: no bound); a longer one goes through ``_render``."""

    def _plain(self, keys: Sequence[str]) -> bool:
        """Whether every key's name is its pool's prefix followed by the key (``plain_keys``)."""
        if not plain_keys("".join(keys)):
            return False
        limit = self._longest_plain_key
        return limit is None or max(map(len, keys), default=0) <= limit

    def _name(self, key: str, pool: str = KV) -> Any:
        """Return the primitives' name of page ``key`` in ``pool``."""
        # On ASCII text, str.isalnum is exactly [A-Za-z0-9]: ``_plain`` for one key, inline.
        if key.isascii() and key.isalnum() and (self._longest_plain_key is None or len(key) <= self._longest_plain_key):
            return self._name_prefix(pool) + key
        return self._render(ObjectName(self.namespace, pool, key))

    def _names(self, keys: Sequence[str], pool: str) -> list[Any]:
        """Return ``_name`` of every key; a batch of plain keys is named at once (prefix + key)."""
        if self._plain(keys):
            prefix = self._name_prefix(pool)
            return [prefix + key for key in keys]
        return [self._name(key, pool) for key in keys]

    def _name_prefix(self, pool: str) -> Any:
        """Return the name of the empty key in ``pool``: what precedes every plain key's name (cached)."""
        cached = self._name_prefixes.get(pool)
        if cached is None or cached[0] is not self.namespace:  # the namespace may be set after construction
            cached = self._name_prefixes[pool] = (self.namespace, self._render(ObjectName(self.namespace, pool, "")))
        return cached[1]
