"""Backends that declare ``hicache_may_evict``: two correct ones, and bugs an evicting backend must still not have.

A backend that may evict may drop any page it accepted, at any time; SGLang
then simply misses it. The correct ones drop a page right after serving it
(``EvictsAfterRead``) or keep nothing past the call that stored it
(``EvictsEverything``). The planted ones evict after a read too, and add
one bug that no eviction excuses (``planted_catalog.CATALOG`` names its clause).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.correct_backend import CorrectBackend, ListsRestorableLengths


class EvictsAfterRead(CorrectBackend):
    """Drops every page right after serving it (a cache of size ~0, or evict-on-read): correct."""

    hicache_may_evict = True

    def served(self, names: list[str]) -> None:
        with self.lock:
            for name in names:
                self.objects.pop(name, None)

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        results = super().read_pages(pool, keys, host_indices)
        self.served([self.name(key, pool) for key, hit in zip(keys, results) if hit])
        return results

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        value = super().get(key, target_location, target_sizes)
        if value is not None:
            self.served([self.name(key)])
        return value


class EvictsEverything(CorrectBackend):
    """Accepts every page and keeps none past the call that stored it: correct, and nothing reads back."""

    hicache_may_evict = True

    def put(self, name: str, data: bytes) -> bool:
        if self.store_failing:
            raise OSError("store unavailable")
        return True


class EvictsAfterReadListingItsLengths(ListsRestorableLengths, EvictsAfterRead):
    """Evicts after a read, and its batch_exists_v2 lists the prefix lengths it can restore (restorable_prefix_pages),
    ascending, as 0.5.23's HiCacheFile does: correct."""


# ================================================================ bugs no eviction excuses
class EvictingServesTheKeyBefore(EvictsAfterRead):
    """Evicts after a read, and a hit on a batch's later key carries the bytes of the key before it (BE-15)."""

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        results = super().read_pages(pool, keys, host_indices)
        host_pool = self.pools.get(pool)
        assert host_pool is not None, pool
        for index in range(1, len(keys)):
            if results[index] and results[index - 1]:
                slot = int(host_indices[(index - 1) * host_pool.page_size])
                page = host_pool.get_data_page(slot, flat=True).clone()  # what landed for the key before
                host_pool.set_from_flat_data_page(int(host_indices[index * host_pool.page_size]), page)
        return results


class EvictingHitLeavesTheSlot(EvictsAfterRead):
    """Evicts after a read, and reports a hit without putting the page's bytes in the host slots (BE-15)."""

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        results = [self.present(self.name(key, pool), pool) for key in keys]
        self.served([self.name(key, pool) for key, hit in zip(keys, results) if hit])
        return results


class EvictingCountsEveryStoredKey(EvictsAfterRead):
    """Evicts after a read, and batch_exists counts every stored key, not the leading run (BE-2)."""

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        return sum(1 for key in keys if self.exists(key))
