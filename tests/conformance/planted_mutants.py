"""Planted bugs that reach the branches of the vendor checks no other planted bug reaches.

Each backend differs from ``CorrectBackend`` in one realistic bug; ``MUTANT_PLANTED`` maps it to the
check that must fail it, the clause that check must report, and the suite options of the run. The
correct variants in ``CORRECT_VARIANTS`` honour every clause in ways the plain correct backend does
not exercise (evicting pages it may drop), so that a check made stricter than the contract fails them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hicache_contracts.conformance import BACKEND_LEVELS
from tests.conformance.correct_backend import CorrectBackend


# ================================================================ BE-5: storage errors
class ClaimsWritesWhileTheStoreFails(CorrectBackend):
    """While the store fails, writes report True and store nothing (BE-5): a write-behind queue that drops."""

    def write_pages(self, pool, keys, host_indices):
        if self.store_failing:
            return [True] * len(keys)
        return super().write_pages(pool, keys, host_indices)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        if self.store_failing:
            return True
        return super().set(key, value, target_location, target_sizes)


# ================================================================ BE-23: concurrency (deterministic bugs)
class IndexPerThread(CorrectBackend):
    """batch_exists consults an index of the pages the calling thread wrote (a thread-local cache): pages
    another thread stored are not counted (BE-23)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.local = threading.local()

    def written(self) -> set:
        if not hasattr(self.local, "names"):
            self.local.names = set()
        return self.local.names

    def put(self, name: str, data: bytes) -> bool:
        stored = super().put(name, data)
        self.written().add(name)
        return stored

    def batch_exists(self, keys, extra_info=None):
        for index, key in enumerate(keys):
            if not self.exists(key) or self.name(key) not in self.written():
                return index
        return len(keys)


class DropsAfterTheSecondRead(CorrectBackend):
    """A page is dropped once read twice (an eviction policy), though eviction is not declared (BE-23)."""

    hicache_may_evict = False

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.reads: dict[str, int] = {}

    def served(self, name: str) -> None:
        with self.lock:
            self.reads[name] = self.reads.get(name, 0) + 1
            if self.reads[name] >= 2:
                self.objects.pop(name, None)
                del self.reads[name]

    def read_pages(self, pool, keys, host_indices):
        results = super().read_pages(pool, keys, host_indices)
        for key, hit in zip(keys, results):
            if hit:
                self.served(self.name(key, pool))
        return results

    def get(self, key, target_location=None, target_sizes=None):
        value = super().get(key, target_location, target_sizes)
        if value is not None:
            self.served(self.name(key))
        return value


class StatsRaiseDuringIO(CorrectBackend):
    """get_stats walks counters that IO threads update, and raises when a call moves pages meanwhile (BE-23)."""

    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        super().__init__(storage_config, kwargs)
        self.moved = 0

    def read_pages(self, pool, keys, host_indices):
        self.moved += 1
        return super().read_pages(pool, keys, host_indices)

    def write_pages(self, pool, keys, host_indices):
        self.moved += 1
        return super().write_pages(pool, keys, host_indices)

    def get_stats(self):
        before = self.moved
        time.sleep(0.0005)  # the walk over the counters
        if self.moved != before:
            raise RuntimeError("dictionary changed size during iteration")
        return None


# ================================================================ BE-8: extra_info by keyword
class V1SetNamesItsInfoParameterInfo(CorrectBackend):
    """batch_set_v1's third parameter is called ``info``: extra_info passed by keyword raises (BE-8)."""

    def batch_set_v1(self, keys, host_indices, info=None):  # type: ignore[override]
        return super().batch_set_v1(keys, host_indices, info)


class V1GetNamesItsInfoParameterInfo(CorrectBackend):
    """batch_get_v1's third parameter is called ``info``: extra_info passed by keyword raises (BE-8)."""

    def batch_get_v1(self, keys, host_indices, info=None):  # type: ignore[override]
        return super().batch_get_v1(keys, host_indices, info)


class V2GetNamesItsInfoParameterInfo(CorrectBackend):
    """batch_get_v2's second parameter is called ``info``: extra_info passed by keyword raises (BE-8)."""

    def batch_get_v2(self, transfers, info=None):  # type: ignore[override]
        return super().batch_get_v2(transfers, info)


# ================================================================ correct variants
class EvictsAfterTheSecondRead(DropsAfterTheSecondRead):
    """The same cache, declaring that it may evict: correct."""

    hicache_may_evict = True


MUTANT_PLANTED: dict[type, tuple[str, str, dict]] = {
    ClaimsWritesWhileTheStoreFails: ("storage_errors_are_failures_not_exceptions", "BE-5", {}),
    IndexPerThread: ("concurrent_calls_keep_every_key_consistent", "BE-23", {}),
    DropsAfterTheSecondRead: ("concurrent_calls_keep_every_key_consistent", "BE-23", {}),
    StatsRaiseDuringIO: ("concurrent_calls_keep_every_key_consistent", "BE-23", {}),
    V1SetNamesItsInfoParameterInfo: ("extra_info_accepted_in_every_shape", "BE-8", {}),
    V1GetNamesItsInfoParameterInfo: ("extra_info_accepted_in_every_shape", "BE-8", {}),
    V2GetNamesItsInfoParameterInfo: ("extra_info_accepted_in_every_shape", "BE-8", {}),
}
"""Planted backend -> (the check that must fail it, the clause it reports, extra suite options)."""

CORRECT_VARIANTS: list[tuple[str, type, dict]] = [
    ("evicting-declared", EvictsAfterTheSecondRead, {}),
    ("mla-page-first", CorrectBackend, dict(kind="mla", layout="page_first")),
    ("legacy-mla", CorrectBackend, dict(kind="mla", levels=tuple(level for level in BACKEND_LEVELS if level != "v1"))),
]
"""(name, correct backend, suite options): every check the run makes must pass (an evicting backend declares it)."""
