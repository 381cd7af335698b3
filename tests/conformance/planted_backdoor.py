"""Backdoor hooks for the in-test backends, and the planted bugs only the backdoor checks catch.

``CorrectBackdoor`` goes straight to ``CorrectBackend``'s store dict; a
backend class offers it through its ``hicache_backdoor`` attribute.
``BACKDOOR_SINGLE`` maps each planted backend to the one check that must
catch it, and no other (it joins ``planted_single.SINGLE``).
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import torch

from tests.conformance.correct_backend import CorrectBackend


class CorrectBackdoor:
    """Plants, peeks and removes objects of a ``CorrectBackend`` store under the backend's own names."""

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        with backend.lock:
            backend.objects[backend.name(key, pool)] = bytes(data)
        index_put(backend, backend.name(key, pool), len(data))

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
"""Per store: the size of every object written, as a store-wide index (``StoreIndexAnswersLookups``)."""
_INDEX_LOCK = threading.Lock()


def index_put(backend: Any, name: str, size: int) -> None:
    """Note an object written into ``backend``'s store (what a store-side index would learn from a write)."""
    with _INDEX_LOCK:
        INDEXES.setdefault(backend.store_name, {})[name] = size


class StoreIndexAnswersLookups(CorrectWithBackdoor):
    """KV lookups answer from a store-wide index of what was written, kept up to date on writes and clear() but not
    on objects that vanish otherwise (evicted, deleted by another process): a removed page stays a hit (BE-2,
    BE-4). Only the backdoor check removes an object behind the backend's back."""

    def put(self, name: str, data: bytes) -> bool:
        written = super().put(name, data)
        index_put(self, name, len(data))
        return written

    def present(self, name: str, pool: str = "kv") -> bool:
        if pool != "kv":
            return super().present(name, pool)
        if self.store_failing:
            return False
        with _INDEX_LOCK:
            size = INDEXES.get(self.store_name, {}).get(name)
        return size is not None and pool in self.pools and size == self.page_bytes(pool)

    def clear(self) -> None:
        super().clear()
        with _INDEX_LOCK:
            index = INDEXES.setdefault(self.store_name, {})
            for name in [name for name in index if name.startswith(self.namespace + "|")]:
                del index[name]


class ShortObjectCopiedBeforeTheSizeCheck(CorrectWithBackdoor):
    """A v1 read copies what a stored object holds into the host page, then finds it short and reports a miss
    (BE-16): the page keeps the partial copy. The suite's other short objects are written with legacy set and
    looked up with the legacy calls; only the backdoor check reads one through batch_get_v1."""

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        host_pool = self.pools.get(pool)
        if host_pool is not None:
            for index, key in enumerate(keys):
                data = self.fetch(self.name(key, pool)) if not self.store_failing else None
                if data is not None and 0 < len(data) < self.page_bytes(pool):
                    slot = int(host_indices[index * host_pool.page_size])
                    page = host_pool.get_data_page(slot, flat=True).clone()
                    page.view(-1).view(torch.uint8)[: len(data)].copy_(
                        torch.frombuffer(bytearray(data), dtype=torch.uint8)
                    )
                    host_pool.set_from_flat_data_page(slot, page)
        return super().read_pages(pool, keys, host_indices)


class SidecarIndexAnswersPoolLookups(CorrectWithBackdoor):
    """batch_exists_v2 answers a sidecar pool's presence from a store-wide index of the sidecar pages written
    (kept on writes and clear(), not on objects that vanish otherwise): a KV page whose indexer page vanished
    is still restorable (BE-22). Reads look in the store; only the backdoor check removes a sidecar object."""

    def write_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        results = super().write_pages(pool, keys, host_indices)
        if pool != "kv":
            for key, written in zip(keys, results):
                if written:
                    index_put(self, self.name(key, pool), self.page_bytes(pool))
        return results

    def pool_present(self, pool: str, keys: list) -> tuple[bool, ...]:
        if pool == "kv" or self.store_failing:
            return super().pool_present(pool, keys)
        with _INDEX_LOCK:
            index = INDEXES.get(self.store_name, {})
            return tuple(
                pool in self.pools and index.get(self.name(key, pool)) == self.page_bytes(pool) for key in keys
            )

    def clear(self) -> None:
        super().clear()
        with _INDEX_LOCK:
            index = INDEXES.setdefault(self.store_name, {})
            for name in [name for name in index if name.startswith(self.namespace + "|")]:
                del index[name]


BACKDOOR_SINGLE: dict[type, str] = {
    SidecarIndexAnswersPoolLookups: "a_removed_kv_derived_sidecar_reports_its_kv_page_missing",
    StoreIndexAnswersLookups: "a_removed_object_is_a_miss",
    ShortObjectCopiedBeforeTheSizeCheck: "planted_short_objects_are_misses",
}
