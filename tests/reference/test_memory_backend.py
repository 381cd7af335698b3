"""The in-memory reference backend: every generic clause check, eviction, shared stores, planted bugs.

The planted bugs at the bottom are subclasses of ``MemoryBackend`` with one
bug each; every check in ``backend_checks`` is shown to catch at least one.
Most of the logic lives in the shared base, so these bugs also stand for the
file backend's (which has its own file-specific ones).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Optional

import pytest
from hicache_reference.backends import (
    BackendStats,
    MemoryBackend,
    MemoryStore,
    forget_shared_memory_store,
    shared_memory_store,
)
from tests.reference.backend_checks import (
    BackendClauseTests,
    Harness,
    MemoryHarness,
    check_accepts_extra_config,
    check_bad_keys,
    check_clear,
    check_clear_keeps_other_namespaces,
    check_concurrent_threads,
    check_cp_ranks_apart,
    check_derived_sidecars_travel_with_kv,
    check_every_generation_implemented,
    check_extra_info_shapes,
    check_fold_measures_pools_against_kv,
    check_full_batch,
    check_idempotent_set,
    check_leading_run,
    check_legacy_shapes,
    check_missing_is_a_miss,
    check_models_apart,
    check_one_key_scheme,
    check_pp_ranks_apart,
    check_prefix_untouched,
    check_reads_stay_in_their_slots,
    check_registration,
    check_replicated_kv_shared,
    check_round_trip_between_pools,
    check_set_means_readable,
    check_short_objects_are_misses,
    check_stats,
    check_storage_error_is_a_failure,
    check_tp_ranks_apart,
    check_unregistered_pool,
    check_v1_cardinality,
    check_v2_cardinality,
    check_v2_exists_folds,
    config,
    fill_pages,
    make_pool,
    page_keys,
    slots_of,
    write_pages,
)


@pytest.fixture
def store_name() -> Any:
    name = f"test-store-{uuid.uuid4().hex}"
    yield name
    forget_shared_memory_store(name)


@pytest.fixture
def memory_harness(store_name: str) -> MemoryHarness:
    return MemoryHarness(store_name)


class TestMemoryBackend(BackendClauseTests):
    @pytest.fixture
    def harness(self, memory_harness: MemoryHarness) -> Harness:
        return memory_harness


# ================================================================== memory-only behaviour
def check_eviction(harness: Harness) -> None:
    """A full store evicts the least recently used page; a read after eviction is a miss, never an error."""
    backend = harness.make(capacity_pages=3)
    pool = backend.mem_pool_host
    keys = page_keys(5, start=600)
    assert write_pages(backend, keys[:3], [0, 1, 2]) == [True] * 3
    assert backend.batch_get_v1(keys[:1], slots_of(pool, [8])) == [True]  # keys[0] is now the most recent
    assert write_pages(backend, keys[3:4], [3]) == [True]  # evicts keys[1], the least recently used
    present = [backend.exists(key) for key in keys[:4]]
    assert present == [True, False, True, True], f"expected keys[1] evicted, presence {present}"
    assert backend.batch_get_v1([keys[1]], slots_of(pool, [9])) == [False]
    assert backend.get(keys[1]) is None
    for key in keys[:4]:
        if backend.exists(key):
            assert backend.batch_get_v1([key], slots_of(pool, [10])) == [True], "exists said hit, read missed"
    assert len(backend.store) <= 3


@pytest.mark.clause("BE-4", "BE-17")
def test_eviction(memory_harness: MemoryHarness) -> None:
    check_eviction(memory_harness)


@pytest.mark.clause("BE-22")
def test_eviction_drops_kv_and_derived_sidecars_together(memory_harness: MemoryHarness) -> None:
    backend = memory_harness.make(capacity_pages=4)
    indexer = make_pool(kind="mla", layer_num=1, head_dim=4)
    backend.register_mem_host_pool_v2(indexer, "indexer")
    pool = backend.mem_pool_host
    from hicache_contracts import PoolTransfer

    keys = page_keys(3, start=650)
    fill_pages(pool, [0, 1, 2], seed=20)
    for index, key in enumerate(keys):
        transfer = PoolTransfer(name="kv", keys=[key], host_indices=slots_of(pool, [index]))
        derived = PoolTransfer(name="indexer", keys=[key], indices_from_pool="kv")
        assert backend.batch_set_v2([derived, transfer]) == {"kv": [True], "indexer": [True]}
    # Capacity 4 holds two groups of (sidecar, KV); the first group went out whole.
    names = backend.store.names()
    assert len(names) == 4
    assert backend.exists(keys[0]) is False
    assert memory_harness.peek(backend, keys[0], pool="indexer") is None, "the sidecar outlived its KV page"
    assert backend.batch_exists(keys[1:]) == 2


@pytest.mark.clause("NS-1", "NS-5")
def test_instances_share_a_named_store(store_name: str) -> None:
    first = MemoryBackend(config(), {"store": store_name})
    second = MemoryBackend(config(), {"store": store_name})
    private = MemoryBackend(config(), None)
    assert first.store is second.store is shared_memory_store(store_name)
    assert private.store is not first.store
    handed = MemoryBackend(config(), {"store": first.store})
    assert handed.store is first.store


def test_store_configuration_errors(store_name: str) -> None:
    shared_memory_store(store_name, 4)
    with pytest.raises(ValueError) as raised:
        MemoryBackend(config(), {"store": store_name, "capacity_pages": 5})
    assert str(raised.value) == (
        f"MemoryBackend.extra_config.capacity_pages: must match the capacity of shared store {store_name!r}, "
        "4 (got 5)"
    )
    with pytest.raises(ValueError) as raised:
        MemoryBackend(config(), {"store": 3})
    assert str(raised.value) == (
        "MemoryBackend.extra_config.store: must be a shared store name (str) or a MemoryStore (got 3)"
    )
    with pytest.raises(ValueError) as raised:
        MemoryStore(0)
    assert str(raised.value) == "MemoryStore.capacity_pages: must be None or an int >= 1 (got 0)"


@pytest.mark.clause("BE-1")
def test_no_extra_config_at_all() -> None:
    backend = MemoryBackend(config(), None)
    backend.register_mem_pool_host(make_pool())
    assert write_pages(backend, page_keys(1), [0]) == [True]
    assert MemoryBackend(None, None).namespace == "default-model/pp0of1/cp0of1/tp0of1"


@pytest.mark.clause("BE-12")
def test_stats_counters(memory_harness: MemoryHarness) -> None:
    backend = memory_harness.make(config(enable_storage_metrics=True))
    assert backend.get_stats() == BackendStats()
    write_pages(backend, page_keys(2), [0, 1])
    backend.batch_get_v1(page_keys(3), slots_of(backend.mem_pool_host, [2, 3, 4]))
    page = backend.mem_pool_host.page_bytes
    assert backend.get_stats() == BackendStats(pages_read=2, pages_written=2, read_misses=1,
                                               bytes_read=2 * page, bytes_written=2 * page)


# ================================================================== planted bugs
class ExistsWithAnotherScheme(MemoryBackend):
    """exists/batch_exists look under a differently tagged name than set wrote (a real bug: L3 never hit)."""

    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        return super()._present(pool_name, [key + "-tagged" for key in keys])


class ClearRemovesEverything(MemoryBackend):
    def _clear_namespace(self) -> None:
        self.store.delete_prefix("")


class ClearDoesNothing(MemoryBackend):
    def _clear_namespace(self) -> None:
        pass


def _namespace_without(part: str) -> type:
    class NamespaceWithout(MemoryBackend):
        def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
            super().__init__(storage_config, extra_config)
            model, pp, cp, tp = self.namespace.split("/")
            kept = {"model": model, "pp": pp, "cp": cp, "tp": tp}
            kept.pop(part)
            self.namespace = "/".join(kept.values())

    NamespaceWithout.__name__ = f"NamespaceWithout_{part}"
    return NamespaceWithout


class ReplicatedKvNotShared(MemoryBackend):
    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self.namespace = self.namespace.replace("tp-shared", f"tp{storage_config.tp_rank}")


class DoubleV1Results(MemoryBackend):
    """Returns 2N results for MHA, as two real backends did (one per K and V half)."""

    def batch_get_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        return super().batch_get_v1(keys, host_indices, extra_info) * 2


class WritesBeforeItKnows(MemoryBackend):
    """Reads straight into the host slots, leaving partial garbage when the page turns out missing or short."""

    def _read_pages(self, pool_name: str, keys: Any, slots: Any) -> list[bool]:
        results = super()._read_pages(pool_name, keys, slots)
        pool = self._pools[pool_name]
        for slot, landed in zip(slots, results):
            if not landed:
                pool.set_from_flat_data_page(slot, pool.get_dummy_flat_data_page())
        return results


class RaisesOnMissingKey(MemoryBackend):
    def batch_get_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        results = super().batch_get_v1(keys, host_indices, extra_info)
        if not all(results):
            raise KeyError("page not found")
        return results


class LetsStorageErrorsOut(MemoryBackend):
    def _guarded(self, primitive: Any, on_error: Any, *arguments: Any) -> Any:
        return primitive(*arguments)


class StatsAsDict(MemoryBackend):
    def get_stats(self) -> Any:
        return {"pages_read": 0}


class RaisesOnUnregisteredPool(MemoryBackend):
    def _plan_v2(self, transfers: list) -> list:
        for transfer in transfers:
            if str(transfer.name) not in self._formats:
                raise KeyError(f"pool {transfer.name} not registered")
        return super()._plan_v2(transfers)


class FoldIgnoresPools(MemoryBackend):
    """A sidecar pool missing from the query is counted as a full hit (a real bug)."""

    def batch_exists_v2(self, keys: Any, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        return super().batch_exists_v2(keys, None, extra_info)


class KvWithoutItsSidecar(MemoryBackend):
    """Writes KV whatever happened to its derived sidecar, and reports pools independently."""

    @staticmethod
    def _derived_ok(keys: list, derived_steps: list, results: Any) -> list[bool]:
        return [True] * len(keys)

    def _couple_kv_group(self, plan: list, results: Any, reading: bool) -> None:
        pass

    def _kv_present(self, keys: Any, derived: Any) -> list[bool]:
        return self._present("kv", keys)


class MutatesPrefix(MemoryBackend):
    def batch_exists(self, keys: Any, extra_info: Any = None) -> int:
        if extra_info is not None and isinstance(extra_info.prefix_keys, list):
            extra_info.prefix_keys += list(keys)  # the in-place += of old engines, here in a backend
        return super().batch_exists(keys, extra_info)


class RetainsExtraInfo(MemoryBackend):
    def batch_get_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        self.last_extra_info = extra_info
        return super().batch_get_v1(keys, host_indices, extra_info)


class ExistingKeyFails(MemoryBackend):
    def batch_set_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        existed = [self.exists(key) for key in keys]
        written = super().batch_set_v1(keys, host_indices, extra_info)
        return [flag and not before for flag, before in zip(written, existed)]


class CountsEveryHit(MemoryBackend):
    def batch_exists(self, keys: Any, extra_info: Any = None) -> int:
        return sum(self._present("kv", self._checked_keys(keys)))


class NoKeywordExtraInfo(MemoryBackend):
    def batch_exists(self, keys: Any, info: Any = None) -> int:  # type: ignore[override]
        return super().batch_exists(keys, info)


class ShortObjectIsHit(MemoryBackend):
    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        return [size is not None for size in self._object_sizes([self._name(key, pool_name) for key in keys])]


class SharedStagingBuffer(MemoryBackend):
    """Reads every page through one buffer shared by all threads; two readers meet and swap pages."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self._shared = bytearray(0)
        self._meeting = threading.Barrier(2)

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        data = self.store.get(name)
        if data is None or len(data) != len(buffer):
            return False
        self._shared = bytearray(data)
        self._meeting.wait(timeout=1)  # the other reader overwrites the shared buffer meanwhile
        buffer[:] = self._shared
        return True


class LiesAboutWrites(MemoryBackend):
    """Claims every second write and stores nothing for it."""

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        self._writes = getattr(self, "_writes", 0) + 1
        if self._writes % 2 == 0:
            return True
        return super()._write_object(name, data, group)


class IgnoresHostIndices(MemoryBackend):
    def _page_slots(self, page_format: Any, host_indices: Any, key_count: int) -> list[int]:
        super()._page_slots(page_format, host_indices, key_count)
        return [index * page_format.page_size for index in range(key_count)]


class GetReturnsBytes(MemoryBackend):
    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        return self.store.get(self._name(key))


class SmallBatchesOnly(MemoryBackend):
    def batch_get_v1(self, keys: Any, host_indices: Any, extra_info: Any = None) -> list[bool]:
        if len(keys) > 64:
            return [False] * len(keys)
        return super().batch_get_v1(keys, host_indices, extra_info)


class V2ReturnsNone(MemoryBackend):
    def batch_exists_v2(self, keys: Any, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        return None


class V2DropsPools(MemoryBackend):
    def batch_get_v2(self, transfers: Any, extra_info: Any = None) -> Any:
        result = super().batch_get_v2(transfers, extra_info)
        return {name: flags for name, flags in result.items() if name == "kv"}


class AcceptsAnyPool(MemoryBackend):
    def _register(self, pool: Any, name: str) -> None:
        if not hasattr(pool, "get_data_page"):
            return
        super()._register(pool, name)


class RefusesUnknownExtraKeys(MemoryBackend):
    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        unknown = set(self.extra_config) - {"store", "capacity_pages"}
        if unknown:
            raise ValueError(f"unknown extra config keys {sorted(unknown)}")


class AcceptsAnyKey(MemoryBackend):
    def _checked_keys(self, keys: Any) -> list:
        return [str(key) for key in keys]


PLANTED = [
    pytest.param(check_one_key_scheme, ExistsWithAnotherScheme, marks=pytest.mark.clause("NS-6"), id="NS-6"),
    pytest.param(check_clear_keeps_other_namespaces, ClearRemovesEverything, marks=pytest.mark.clause("NS-8"),
                 id="NS-8"),
    pytest.param(check_clear, ClearDoesNothing, marks=pytest.mark.clause("BE-11"), id="BE-11"),
    pytest.param(check_tp_ranks_apart, _namespace_without("tp"), marks=pytest.mark.clause("NS-1"), id="NS-1"),
    pytest.param(check_pp_ranks_apart, _namespace_without("pp"), marks=pytest.mark.clause("NS-2"), id="NS-2"),
    pytest.param(check_cp_ranks_apart, _namespace_without("cp"), marks=pytest.mark.clause("NS-3"), id="NS-3"),
    pytest.param(check_models_apart, _namespace_without("model"), marks=pytest.mark.clause("NS-4"), id="NS-4"),
    pytest.param(check_replicated_kv_shared, ReplicatedKvNotShared, marks=pytest.mark.clause("NS-5"), id="NS-5"),
    pytest.param(check_v1_cardinality, DoubleV1Results, marks=pytest.mark.clause("BE-14"), id="BE-14"),
    pytest.param(check_reads_stay_in_their_slots, WritesBeforeItKnows, marks=pytest.mark.clause("BE-16"),
                 id="BE-16"),
    pytest.param(check_short_objects_are_misses, WritesBeforeItKnows, marks=pytest.mark.clause("BE-16"),
                 id="BE-16-short"),
    pytest.param(check_missing_is_a_miss, RaisesOnMissingKey, marks=pytest.mark.clause("BE-4"), id="BE-4"),
    pytest.param(check_stats, StatsAsDict, marks=pytest.mark.clause("BE-12"), id="BE-12"),
    pytest.param(check_unregistered_pool, RaisesOnUnregisteredPool, marks=pytest.mark.clause("BE-20"),
                 id="BE-20"),
    pytest.param(check_derived_sidecars_travel_with_kv, KvWithoutItsSidecar, marks=pytest.mark.clause("BE-22"),
                 id="BE-22"),
    pytest.param(check_prefix_untouched, MutatesPrefix, marks=pytest.mark.clause("PFX-6"), id="PFX-6-mutates"),
    pytest.param(check_prefix_untouched, RetainsExtraInfo, marks=pytest.mark.clause("PFX-6"), id="PFX-6-retains"),
    pytest.param(check_idempotent_set, ExistingKeyFails, marks=pytest.mark.clause("BE-6"), id="BE-6"),
    pytest.param(check_leading_run, CountsEveryHit, marks=pytest.mark.clause("BE-2"), id="BE-2"),
    pytest.param(check_extra_info_shapes, NoKeywordExtraInfo, marks=pytest.mark.clause("BE-8"), id="BE-8"),
    pytest.param(check_short_objects_are_misses, ShortObjectIsHit, marks=pytest.mark.clause("BE-13"), id="BE-13"),
    pytest.param(check_concurrent_threads, SharedStagingBuffer, marks=pytest.mark.clause("BE-23"), id="BE-23"),
    pytest.param(check_set_means_readable, LiesAboutWrites, marks=pytest.mark.clause("BE-17"), id="BE-17"),
    pytest.param(check_legacy_shapes, GetReturnsBytes, marks=pytest.mark.clause("BE-9"), id="BE-9"),
    pytest.param(check_full_batch, SmallBatchesOnly, marks=pytest.mark.clause("BE-10"), id="BE-10"),
    pytest.param(check_every_generation_implemented, V2ReturnsNone, marks=pytest.mark.clause("BE-18"), id="BE-18"),
    pytest.param(check_v2_cardinality, V2DropsPools, marks=pytest.mark.clause("BE-19"), id="BE-19"),
    pytest.param(check_registration, AcceptsAnyPool, marks=pytest.mark.clause("BE-24"), id="BE-24"),
    pytest.param(check_accepts_extra_config, RefusesUnknownExtraKeys, marks=pytest.mark.clause("BE-1"), id="BE-1"),
    pytest.param(check_bad_keys, AcceptsAnyKey, marks=pytest.mark.clause("KEY-2"), id="KEY-2"),
]


@pytest.mark.parametrize("check, buggy_class", PLANTED)
def test_check_catches_planted_bug(memory_harness: MemoryHarness, check: Any, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check(memory_harness.using(buggy_class))


@pytest.mark.clause("BE-5")
def test_storage_error_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_storage_error_is_a_failure(memory_harness.using(LetsStorageErrorsOut),
                                         TestMemoryBackend.break_storage.__get__(TestMemoryBackend()))


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
@pytest.mark.parametrize("foreign", [False, True], ids=["host-page-pool", "foreign-pool"])
def test_round_trip_check_catches_planted_bug(memory_harness: MemoryHarness, layout: str, foreign: bool) -> None:
    harness = memory_harness.using(IgnoresHostIndices)
    with pytest.raises(AssertionError):
        check_round_trip_between_pools(harness.with_foreign_pools() if foreign else harness, "mha", layout)


@pytest.mark.clause("BE-16")
def test_foreign_pool_guard_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_reads_stay_in_their_slots(memory_harness.using(WritesBeforeItKnows).with_foreign_pools())


@pytest.mark.clause("BE-21")
def test_fold_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    pools = (("indexer", "all_pages", 4, (True, True, False, True)),)
    with pytest.raises(AssertionError):
        check_v2_exists_folds(memory_harness.using(FoldIgnoresPools), (True, True, True, True), pools)


class KvRunIncludesSidecars(MemoryBackend):
    """Counts a KV page without its derived sidecar as absent KV, so every pool is measured against a short run."""

    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        present = super()._present(pool_name, keys)
        if pool_name == "kv":
            for derived in self._known_derived():
                present = [mine and theirs for mine, theirs in zip(present, super()._present(derived, keys))]
        return present


@pytest.mark.clause("BE-21")
def test_fold_against_kv_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_fold_measures_pools_against_kv(memory_harness.using(KvRunIncludesSidecars))


class EvictionLeavesStaleEntries(MemoryBackend):
    """Eviction forgets the bytes but exists still answers from a stale size index."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self._sizes: dict[str, int] = {}

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        self._sizes[name] = len(data)
        return super()._write_object(name, data, group)

    def _object_size(self, name: str) -> Optional[int]:
        return self._sizes.get(name)


def test_eviction_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_eviction(memory_harness.using(EvictionLeavesStaleEntries))

