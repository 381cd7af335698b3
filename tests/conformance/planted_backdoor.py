"""Backdoor hooks for the in-test backends, and the planted bugs only the backdoor checks catch.

``CorrectBackdoor`` goes straight to ``CorrectBackend``'s store dict; a
backend class offers it through its ``hicache_backdoor`` attribute.
``planted_catalog.CATALOG`` names, for each planted backend, the one check
that must catch it, and no other.
"""

from __future__ import annotations

import threading
from typing import Any, Optional


from tests.conformance.correct_backend import CorrectBackend


class CorrectBackdoor:
    """Plants, peeks and removes objects of a ``CorrectBackend`` store under the backend's own names."""

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        with backend.lock:
            backend.objects[backend.name(key, pool)] = bytes(data)

    def peek(self, backend: Any, key: str, pool: str) -> Optional[bytes]:
        with backend.lock:
            return backend.objects.get(backend.name(key, pool))

    def remove(self, backend: Any, key: str, pool: str) -> None:
        with backend.lock:
            backend.objects.pop(backend.name(key, pool), None)


class CorrectWithBackdoor(CorrectBackend):
    """The correct backend, offering the backdoor hooks."""

    hicache_backdoor = CorrectBackdoor()


INDEXES: dict[str, dict[str, int]] = {}
"""Per store: the size of every object written, as a store-wide index (``ReadsTrustAnIndex``)."""
_INDEX_LOCK = threading.Lock()


def index_put(backend: Any, name: str, size: int) -> None:
    """Note an object written into ``backend``'s store (what a store-side index would learn from a write)."""
    with _INDEX_LOCK:
        INDEXES.setdefault(backend.store_name, {})[name] = size


class LongObjectStreamedIntoTheNextPage(CorrectWithBackdoor):
    """A v1 read streams a stored object longer than a page into consecutive host pages: the rest spills into
    the page after the addressed one (BE-16). The suite writes only whole pages; only the backdoor check
    leaves a longer object in the store."""

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        host_pool = self.pools.get(pool)
        if host_pool is not None and not self.store_failing:
            size = self.page_bytes(pool)
            for index, key in enumerate(keys):
                data = self.fetch(self.name(key, pool))
                if data is not None and len(data) > size:
                    slot = int(host_indices[index * host_pool.page_size]) + host_pool.page_size
                    rest = bytearray(data[size : 2 * size].ljust(size, b"\0"))
                    host_pool.set_from_flat_data_page(slot, self.page_tensor(bytes(rest), pool))
        return super().read_pages(pool, keys, host_indices)


class ReadsTrustAnIndex(CorrectWithBackdoor):
    """Keeps a store-wide index of the objects written (on writes and clear(), not on objects that vanish
    otherwise: evicted, deleted by another process); a read of a page the index holds but the store lost
    reports it loaded and leaves its host page as it was. Which pools trust the index: ``trusted``."""

    def trusted(self, pool: str) -> bool:
        raise NotImplementedError

    def put(self, name: str, data: bytes) -> bool:
        written = super().put(name, data)
        index_put(self, name, len(data))
        return written

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        results = super().read_pages(pool, keys, host_indices)
        if not self.trusted(pool) or self.store_failing or pool not in self.pools:
            return results
        with _INDEX_LOCK:
            index = dict(INDEXES.get(self.store_name, {}))
        return [
            loaded
            or (index.get(self.name(key, pool)) == self.page_bytes(pool) and self.fetch(self.name(key, pool)) is None)
            for key, loaded in zip(keys, results)
        ]

    def clear(self) -> None:
        super().clear()
        with _INDEX_LOCK:
            index = INDEXES.setdefault(self.store_name, {})
            for name in [name for name in index if name.startswith(self.namespace + "|")]:
                del index[name]


class VanishedKvPageReadsAsAHit(ReadsTrustAnIndex):
    """A KV page whose object vanished reads as loaded, its host page untouched (BE-4). Only the backdoor check
    removes an object behind the backend's back."""

    def trusted(self, pool: str) -> bool:
        return pool == "kv"


class VanishedSidecarPageReadsAsAHit(ReadsTrustAnIndex):
    """A sidecar page whose object vanished reads as loaded, its host page untouched (BE-22). Only the backdoor
    check removes a sidecar object behind the backend's back."""

    def trusted(self, pool: str) -> bool:
        return pool != "kv"


class ShortSidecarObjectIsAHit(CorrectWithBackdoor):
    """Any object stored in a sidecar pool counts as a hit, an empty or short one included (BE-13): only KV pages
    have their length checked."""

    def present(self, name: str, pool: str = "kv") -> bool:
        if pool == "kv":
            return super().present(name, pool)
        try:
            return self.fetch(name) is not None and pool in self.pools
        except OSError:
            return False
