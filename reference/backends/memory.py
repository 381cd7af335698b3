"""The in-memory reference backend: pages as bytes in a dict, one lock, optional LRU capacity.

Several instances can share one ``MemoryStore`` (to serve many ranks and
models of one process, and to test namespacing): ``extra_config["store"]``
names a store in a process-wide registry (a str), or is a ``MemoryStore``
itself. Without it, each instance gets a private store.

``extra_config["capacity_pages"]`` bounds the store in stored objects (one
per page and pool); the least recently used page is evicted first, together
with the pages of its group (a KV page and its KV-derived sidecars, BE-22). A
read after eviction is a miss, never an error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Optional

from hicache_reference.backends.base import PageStoreBackend

__all__ = ["MemoryBackend", "MemoryStore", "forget_shared_memory_store", "shared_memory_store"]


class MemoryStore:
    """A thread-safe map of object name → bytes with optional LRU capacity and eviction groups."""

    def __init__(self, capacity_pages: Optional[int] = None) -> None:
        if capacity_pages is not None and (
            isinstance(capacity_pages, bool) or not isinstance(capacity_pages, int) or capacity_pages < 1
        ):
            raise ValueError(f"MemoryStore.capacity_pages: must be None or an int >= 1 (got {capacity_pages!r})")
        self.capacity_pages = capacity_pages
        """The most objects held at once; None for no bound."""
        self.evictions = 0
        """Objects evicted so far."""
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, bytes] = OrderedDict()
        self._group_of: dict[str, str] = {}
        self._members: dict[str, set[str]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def names(self) -> list[str]:
        """Return the stored names, least recently used first."""
        with self._lock:
            return list(self._objects)

    def size(self, name: str) -> Optional[int]:
        """Return the size of ``name`` in bytes, or None; does not count as a use (BE-3)."""
        with self._lock:
            data = self._objects.get(name)
        return None if data is None else len(data)

    def get(self, name: str) -> Optional[bytes]:
        """Return the bytes of ``name`` (marking it recently used), or None."""
        with self._lock:
            data = self._objects.get(name)
            if data is not None:
                self._objects.move_to_end(name)
            return data

    def put(self, name: str, data: bytes, group: Optional[str] = None) -> bool:
        """Store ``data`` as ``name`` whole, in one step (BE-7); return whether it is still held after eviction."""
        with self._lock:
            self._unlink(name)
            self._objects[name] = data
            if group is not None:
                self._group_of[name] = group
                self._members.setdefault(group, set()).add(name)
            self._evict()
            return name in self._objects

    def delete(self, name: str) -> None:
        """Remove ``name`` alone, if present."""
        with self._lock:
            self._objects.pop(name, None)
            self._unlink(name)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose name starts with ``prefix``; return how many."""
        with self._lock:
            doomed = [name for name in self._objects if name.startswith(prefix)]
            for name in doomed:
                del self._objects[name]
                self._unlink(name)
            return len(doomed)

    def _unlink(self, name: str) -> None:
        group = self._group_of.pop(name, None)
        if group is not None:
            members = self._members.get(group)
            if members is not None:
                members.discard(name)
                if not members:
                    del self._members[group]

    def _evict(self) -> None:
        """Drop least recently used objects, each with its whole group, until within capacity (BE-22)."""
        if self.capacity_pages is None:
            return
        while len(self._objects) > self.capacity_pages:
            oldest = next(iter(self._objects))
            group = self._group_of.get(oldest)
            doomed = set(self._members.get(group, ())) | {oldest} if group is not None else {oldest}
            for name in doomed:
                if self._objects.pop(name, None) is not None:
                    self.evictions += 1
                self._unlink(name)


_REGISTRY: dict[str, MemoryStore] = {}
_REGISTRY_LOCK = threading.Lock()


def shared_memory_store(name: str, capacity_pages: Optional[int] = None) -> MemoryStore:
    """Return the process-wide store called ``name``, creating it with ``capacity_pages`` on first use.

    Raises ValueError when the store exists with a different capacity.
    """
    with _REGISTRY_LOCK:
        store = _REGISTRY.get(name)
        if store is None:
            store = _REGISTRY[name] = MemoryStore(capacity_pages)
        elif store.capacity_pages != capacity_pages:
            raise ValueError(
                f"MemoryBackend.extra_config.capacity_pages: must match the capacity of shared store {name!r}, "
                f"{store.capacity_pages!r} (got {capacity_pages!r})"
            )
        return store


class MemoryBackend(PageStoreBackend):
    """Pages in process memory. Extra config: ``store`` (shared store name or object), ``capacity_pages``."""

    hicache_levels = ("core", "v1", "v2", "prefix", "namespacing", "concurrency")

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        capacity = self.extra_config.get("capacity_pages")
        store = self.extra_config.get("store")
        if isinstance(store, MemoryStore):
            self.store = store
        elif isinstance(store, str):
            self.store = shared_memory_store(store, capacity)
        elif store is None:
            self.store = MemoryStore(capacity)
        else:
            raise ValueError(
                f"MemoryBackend.extra_config.store: must be a shared store name (str) or a MemoryStore "
                f"(got {store!r})"
            )
        """Where the pages live; shared with every instance built on the same store."""

    def _object_size(self, name: str) -> Optional[int]:
        return self.store.size(name)

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        data = self.store.get(name)
        if data is None or len(data) != len(buffer):  # BE-13: a short object is a miss
            return False
        buffer[:] = data
        return True

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        return self.store.put(name, bytes(data), group)  # bytes() copies first: the store never sees a partial page

    def _clear_namespace(self) -> None:
        self.store.delete_prefix(self.namespace + "/")  # NS-8: the trailing slash keeps sibling namespaces


def forget_shared_memory_store(name: str) -> None:
    """Drop the process-wide store called ``name`` from the registry (instances holding it keep it)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)
