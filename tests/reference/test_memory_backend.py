"""The in-memory reference backend: the vendor suite, the reference checks, eviction, shared stores, planted bugs.

The vendor suite runs twice: as it comes (its pools count their helper
calls, so the backend serves them page by page through the helpers) and
with its pools moved through the fast path (``fast_path``). The reference
checks run with ``HostPagePool``s (the fast path) and with foreign pools.
The planted bugs are subclasses of ``MemoryBackend`` with one bug each: each
is caught by one vendor check run alone (a bug in page IO on both paths), or
by a reference check. Most of the logic lives in the shared base, so these
bugs also stand for the file backend's (which has its own file-specific
ones). The fast path's own checks are at the end.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Optional

import pytest
import torch

from hicache_contracts.conformance.pools import ConformancePool
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import (
    BackendStats,
    MemoryBackend,
    MemoryStore,
    forget_shared_memory_store,
    shared_memory_store,
    storage_name,
    tensor_bytes,
)
from hicache_reference.backends.memory import _HostPages, buffer_pages
from hicache_contracts.conformance import backend_clauses
from hicache_spec import STORAGE_BATCH_SIZE
from tests.reference.backend_checks import (
    ForeignPool,
    Harness,
    MemoryHarness,
    ReferenceBackendTests,
    assert_vendor_check_fails,
    run_vendor_suite,
    before_page,
    check_bad_keys,
    check_concurrent_threads,
    check_derived_sidecars_travel_with_kv,
    check_fold_measures_pools_against_kv,
    check_legacy_shapes,
    check_reads_stay_in_their_slots,
    check_registration,
    check_round_trip_between_pools,
    check_short_objects_are_misses,
    config,
    fill_pages,
    make_pool,
    page_bytes,
    page_keys,
    sentinel_fill,
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


def fast_path(backend_cls: type) -> type:
    """Return a test subclass of ``backend_cls`` that moves the suite's host pools through the fast path.

    The vendor suite's pools count their page-helper calls, so the backend
    serves them through the helpers; this subclass views their buffers as a
    plain ``HostPagePool``'s instead, so the suite's checks also cover the fast path.
    """

    class FastPath(backend_cls):  # type: ignore[misc, valid-type]
        def _register(self, pool: Any, name: str) -> None:
            super()._register(pool, name)
            if isinstance(pool, HostPagePool) and name not in self._page_views:
                plain = HostPagePool.__new__(HostPagePool)
                plain.__dict__.update(pool.__dict__)
                pages = buffer_pages(plain)
                if pages is not None:
                    with self._registration_lock:
                        self._page_views[name] = _HostPages(pages)

    FastPath.__name__ = FastPath.__qualname__ = backend_cls.__name__
    return FastPath


class TestMemoryBackend(ReferenceBackendTests):
    """The vendor suite (its pools served through their page helpers); the reference checks with ``HostPagePool``s."""

    not_claimed = ("durability",)

    @pytest.fixture
    def harness(self, memory_harness: MemoryHarness) -> Harness:
        return memory_harness


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_fast_path_passes_the_vendor_suite(memory_harness: MemoryHarness) -> None:
    """The vendor suite with its pools moved through the fast path (BE-7's held helper is then never met)."""
    report = run_vendor_suite(memory_harness.using(fast_path(MemoryBackend)))
    assert not report.failed, report.render_text(color=False)
    skipped = {verdict.clause_id: verdict.reason for verdict in report.sections[0].clauses if verdict.status != "pass"}
    assert set(skipped) == {"BE-7", "NS-7"}, skipped
    assert skipped["BE-7"].startswith("the backend did not read the host page through the pool's page helpers")


class TestMemoryBackendThroughHelpers(TestMemoryBackend):
    """The reference checks again with pools that are not ``HostPagePool``s: page by page, through their helpers."""

    @pytest.fixture
    def harness(self, memory_harness: MemoryHarness) -> Harness:
        return memory_harness.with_foreign_pools()

    test_passes_the_vendor_suite = None  # type: ignore[assignment]  # the suite hands over its own pools


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
        f"MemoryBackend.extra_config.capacity_pages: must match the capacity of shared store {store_name!r}, 4 (got 5)"
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
    assert backend.get_stats() == BackendStats(
        pages_read=2, pages_written=2, read_misses=1, bytes_read=2 * page, bytes_written=2 * page
    )


def check_rewrite_is_a_use(harness: Harness) -> None:
    """Writing a page again makes it the most recently used: the next eviction takes another page."""
    backend = harness.make(capacity_pages=3)
    keys = page_keys(4, start=660)
    assert write_pages(backend, keys[:3], [0, 1, 2]) == [True] * 3
    assert write_pages(backend, keys[:1], [3], seed=2) == [True]  # keys[0] again: now the most recent
    assert write_pages(backend, keys[3:], [4]) == [True]  # evicts keys[1], the least recently used
    present = [backend.exists(key) for key in keys]
    assert present == [True, False, True, True], f"expected keys[1] evicted, presence {present}"
    assert backend.batch_get_v1(keys[:1], slots_of(backend.mem_pool_host, [8])) == [True]
    assert page_bytes(backend.mem_pool_host, 8) == page_bytes(backend.mem_pool_host, 3)


def test_rewrite_is_a_use(either_path: MemoryHarness) -> None:
    check_rewrite_is_a_use(either_path)


@pytest.mark.parametrize("capacity", [0, -3, "10", 1.5, True])
@pytest.mark.parametrize("store", ["private", "shared", "object"])
def test_capacity_errors_name_the_key(store_name: str, capacity: Any, store: str) -> None:
    extra = {"capacity_pages": capacity}
    if store == "shared":
        extra["store"] = store_name
    elif store == "object":
        extra["store"] = MemoryStore()
    with pytest.raises(ValueError) as raised:
        MemoryBackend(config(), extra)
    assert str(raised.value) == (
        f"MemoryBackend.extra_config.capacity_pages: must be null or an int >= 1 (got {capacity!r})"
    )


def test_store_object_keeps_its_capacity() -> None:
    with pytest.raises(ValueError) as raised:
        MemoryBackend(config(), {"store": MemoryStore(4), "capacity_pages": 5})
    assert str(raised.value) == (
        "MemoryBackend.extra_config.capacity_pages: must match the capacity of the store given, 4 (got 5)"
    )
    assert MemoryBackend(config(), {"store": MemoryStore(4), "capacity_pages": 4}).store.capacity_pages == 4


def check_failed_target_copy_is_a_miss(harness: Harness) -> None:
    """A legacy get whose target cannot take the page returns None and counts a miss, not a page read."""
    backend = harness.make(config(enable_storage_metrics=True))
    key = page_keys(1, start=670)[0]
    assert write_pages(backend, [key], [0]) == [True]
    pool = backend.mem_pool_host
    refusing = torch.zeros(pool.page_bytes // 2, dtype=torch.float16, requires_grad=True)  # in-place copy raises
    assert backend.get(key, refusing) is None
    stats = backend.get_stats()
    assert (stats.pages_read, stats.bytes_read, stats.read_misses) == (0, 0, 1), f"counted as read: {stats}"
    assert stats.storage_errors == 1


@pytest.mark.clause("BE-12", "BE-15")
def test_failed_target_copy_is_a_miss(memory_harness: MemoryHarness) -> None:
    check_failed_target_copy_is_a_miss(memory_harness)


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
    """Reads pages through one buffer shared by all threads; two readers meet and swap pages (both paths)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self._shared: Any = None
        self._meeting = threading.Barrier(2)

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        page = self.store.get(name)
        if page is None or page.numel() * page.element_size() != len(buffer):
            return False
        self._shared = bytes(tensor_bytes(page))
        self._meeting.wait(timeout=1)  # the other reader overwrites the shared buffer meanwhile
        buffer[:] = self._shared
        return True

    def _load_pages(self, names: Any, host: Any, numbers: Any) -> list:
        self._shared = torch.empty((len(numbers), *host.pages.shape[1:]), dtype=host.pages.dtype)
        staged = _HostPages(self._shared)
        results = super()._load_pages(names, staged, list(range(len(numbers))))
        self._meeting.wait(timeout=1)  # the other reader replaces the shared buffer meanwhile
        for position, number in enumerate(numbers):
            host.pages[number].copy_(self._shared[position])
        return results


class LiesAboutWrites(MemoryBackend):
    """Claims every second write and stores nothing for it (both paths)."""

    def _lies_now(self) -> bool:
        self._writes = getattr(self, "_writes", 0) + 1
        return self._writes % 2 == 0

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        return True if self._lies_now() else super()._write_object(name, data, group)

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        lies = [self._lies_now() for _ in names]
        kept = [index for index, lie in enumerate(lies) if not lie]
        held = super()._store_pages(
            [names[i] for i in kept], [groups[i] for i in kept], host, [numbers[i] for i in kept]
        )
        flags = [True] * len(names)
        for index, flag in zip(kept, held):
            flags[index] = flag
        return flags


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


def planted(check: str, buggy_class: type, clause: str, *, io: bool = False) -> list[Any]:
    """A planted bug and the vendor check that catches it; ``io``: its bug is in page IO, so the fast path too."""
    paths = ("through-helpers", "fast-path") if io else ("through-helpers",)
    return [
        pytest.param(
            check,
            fast_path(buggy_class) if path == "fast-path" else buggy_class,
            marks=pytest.mark.clause(clause),
            id=f"{clause}-{buggy_class.__name__}-{path}",
        )
        for path in paths
    ]


VENDOR_PLANTED = [
    *planted("exists_get_and_set_share_one_key_scheme", ExistsWithAnotherScheme, "NS-6"),
    *planted("clear_removes_only_its_own_namespace", ClearRemovesEverything, "NS-8"),
    *planted("clear_removes_every_page", ClearDoesNothing, "BE-11"),
    *planted("ranks_and_models_never_share_pages", _namespace_without("tp"), "NS-1"),
    *planted("ranks_and_models_never_share_pages", _namespace_without("pp"), "NS-2"),
    *planted("ranks_and_models_never_share_pages", _namespace_without("cp"), "NS-3"),
    *planted("ranks_and_models_never_share_pages", _namespace_without("model"), "NS-4"),
    *planted("replicated_kv_is_shared_across_tp_ranks", ReplicatedKvNotShared, "NS-5"),
    *planted("v1_results_have_one_bool_per_key", DoubleV1Results, "BE-14", io=True),
    *planted("missing_keys_are_misses_not_errors", RaisesOnMissingKey, "BE-4", io=True),
    *planted("get_stats_returns_none_or_an_object", StatsAsDict, "BE-12"),
    *planted("v2_unregistered_pool_is_all_false", RaisesOnUnregisteredPool, "BE-20"),
    *planted("prefix_keys_are_never_mutated", MutatesPrefix, "PFX-6"),
    *planted("prefix_keys_are_copied_if_kept", RetainsExtraInfo, "PFX-6"),
    *planted("rewriting_a_key_returns_true_and_keeps_correct_bytes", ExistingKeyFails, "BE-6", io=True),
    *planted("batch_exists_counts_the_leading_run", CountsEveryHit, "BE-2"),
    *planted("extra_info_accepted_in_every_shape", NoKeywordExtraInfo, "BE-8"),
    *planted("planted_short_objects_are_misses", ShortObjectIsHit, "BE-13"),
    *planted("v1_pages_round_trip_bit_for_bit", LiesAboutWrites, "BE-17", io=True),
    *planted("full_batches_of_128_pages_work", SmallBatchesOnly, "BE-10", io=True),
    *planted("unimplemented_methods_raise_not_implemented", V2ReturnsNone, "BE-18"),
    *planted("v2_results_have_one_entry_per_pool", V2DropsPools, "BE-19"),
    *planted("extra_config_with_unknown_keys_is_accepted", RefusesUnknownExtraKeys, "BE-1"),
    *planted("storage_errors_are_failures_not_exceptions", LetsStorageErrorsOut, "BE-5", io=True),
    *planted("v2_exists_folds_pool_hits_per_policy", FoldIgnoresPools, "BE-21"),
]
"""Planted bugs the vendor suite catches: each is run through the one vendor check named, alone."""

PLANTED = [
    pytest.param(
        check_derived_sidecars_travel_with_kv, KvWithoutItsSidecar, marks=pytest.mark.clause("BE-22"), id="BE-22"
    ),
    pytest.param(check_reads_stay_in_their_slots, WritesBeforeItKnows, marks=pytest.mark.clause("BE-16"), id="BE-16"),
    pytest.param(check_short_objects_are_misses, ShortObjectIsHit, marks=pytest.mark.clause("BE-13"), id="BE-13"),
    pytest.param(check_concurrent_threads, SharedStagingBuffer, marks=pytest.mark.clause("BE-23"), id="BE-23"),
    pytest.param(check_legacy_shapes, GetReturnsBytes, marks=pytest.mark.clause("BE-9"), id="BE-9"),
    pytest.param(check_registration, AcceptsAnyPool, marks=pytest.mark.clause("BE-24"), id="BE-24"),
    pytest.param(check_bad_keys, AcceptsAnyKey, marks=pytest.mark.clause("KEY-2"), id="KEY-2"),
]
"""Planted bugs of the reference's own promises, each caught by a reference check (the suite asks less: a failed
read may write its own addressed slots, BE-16)."""


@pytest.fixture(params=["fast-path", "through-helpers"])
def either_path(request: Any, memory_harness: MemoryHarness) -> MemoryHarness:
    """The memory harness with ``HostPagePool``s (batches at once) or with foreign pools (page by page)."""
    return memory_harness if request.param == "fast-path" else memory_harness.with_foreign_pools()


@pytest.mark.parametrize("check, buggy_class", VENDOR_PLANTED)
def test_vendor_check_catches_planted_bug(memory_harness: MemoryHarness, check: str, buggy_class: type) -> None:
    assert_vendor_check_fails(memory_harness.using(buggy_class), check)


@pytest.mark.parametrize("check, buggy_class", PLANTED)
def test_check_catches_planted_bug(either_path: MemoryHarness, check: Any, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check(either_path.using(buggy_class))


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
    """Eviction forgets the bytes but exists still answers from a stale size index (both paths)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        self._sizes: dict[str, int] = {}

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        self._sizes[name] = len(data)
        return super()._write_object(name, data, group)

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        size = host.views[0].numel() * host.views[0].element_size()
        self._sizes.update((name, size) for name in names)
        return super()._store_pages(names, groups, host, numbers)

    def _object_size(self, name: str) -> Optional[int]:
        return self._sizes.get(name)

    def _object_sizes(self, names: Any) -> list[Optional[int]]:
        return [self._sizes.get(name) for name in names]


def test_eviction_check_catches_planted_bug(either_path: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_eviction(either_path.using(EvictionLeavesStaleEntries))


class RewriteKeepsItsAge(MemoryBackend):
    """A page written again keeps its old place in the eviction order (both paths)."""

    def _write_object(self, name: str, data: memoryview, group: Any) -> bool:
        known = name in self.store.names()
        written = super()._write_object(name, data, group)
        if known:
            self._make_oldest([name])
        return written

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        held = set(self.store.names())
        written = super()._store_pages(names, groups, host, numbers)
        self._make_oldest([name for name in names if name in held])
        return written

    def _make_oldest(self, names: list[str]) -> None:
        with self.store._lock:
            for name in names:
                if name in self.store._objects:
                    self.store._objects.move_to_end(name, last=False)


def test_rewrite_check_catches_planted_bug(either_path: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_rewrite_is_a_use(either_path.using(RewriteKeepsItsAge))


class CountsFailedGetAsRead(MemoryBackend):
    """A legacy get that could not fill its target still counts a page read."""

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        result = super().get(key, target_location, target_sizes)
        if result is None and target_location is not None:
            self._counters.add(pages_read=1, read_misses=-1)
        return result


@pytest.mark.clause("BE-12")
def test_failed_target_copy_check_catches_planted_bug(memory_harness: MemoryHarness) -> None:
    with pytest.raises(AssertionError):
        check_failed_target_copy_is_a_miss(memory_harness.using(CountsFailedGetAsRead))


# ================================================================== the fast path
def pool_pages_bytes(pool: Any, pages: list[int]) -> list[bytes]:
    return [page_bytes(pool, page) for page in pages]


def check_fast_path_matches_helpers(harness: Harness) -> None:
    """BE-15, BE-17: pages written on the fast path read back byte for byte through the helpers, and the other way.

    A round trip on one path alone cannot see a fast path that lays the bytes
    of a page out in another order than ``get_data_page``: both directions
    would agree with each other.
    """
    for kind in ("mha", "mla"):
        for layout in ("layer_first", "page_first"):
            fast = harness.make(pool=make_pool(page_count=160, kind=kind, layout=layout))
            slow = harness.with_foreign_pools().make(pool=make_pool(page_count=160, kind=kind, layout=layout))
            for start, (writer, reader) in ((0, (fast, slow)), (200, (slow, fast))):
                keys = page_keys(STORAGE_BATCH_SIZE, start=3000 + start + 1000 * len(kind) + 100 * len(layout))
                sources = list(range(STORAGE_BATCH_SIZE))[::-1]  # scattered the other way round
                targets = [(3 * index) % 160 for index in range(STORAGE_BATCH_SIZE)]
                assert write_pages(writer, keys, sources, seed=40) == [True] * STORAGE_BATCH_SIZE
                expected = pool_pages_bytes(writer.mem_pool_host, sources)
                assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, targets)) == [True] * len(keys)
                got = pool_pages_bytes(reader.mem_pool_host, targets)
                wrong = [index for index, (mine, theirs) in enumerate(zip(got, expected)) if mine != theirs]
                assert not wrong, f"{kind}/{layout}: pages {wrong[:5]} differ between the fast path and the helpers"


def check_batch_with_misses(harness: Harness) -> None:
    """BE-13, BE-15, BE-16: in a full batch of found, missing, short and long pages, only the found ones land.

    Each found page lands in its own slots, every other slot keeps its bytes.
    """
    writer = harness.make(pool=make_pool(page_count=300))
    keys = page_keys(STORAGE_BATCH_SIZE, start=5000)
    kinds = ["found", "missing", "found", "short", "found", "long", "found", "found"]
    kind_of = [kinds[index % len(kinds)] for index in range(STORAGE_BATCH_SIZE)]
    found = [index for index, kind in enumerate(kind_of) if kind == "found"]
    assert write_pages(writer, [keys[i] for i in found], list(range(len(found))), seed=41) == [True] * len(found)
    expected = dict(zip(found, pool_pages_bytes(writer.mem_pool_host, list(range(len(found))))))
    size = writer.mem_pool_host.page_bytes
    for index, kind in enumerate(kind_of):
        if kind in ("short", "long"):
            harness.plant(writer, keys[index], b"\x05" * (size - 2 if kind == "short" else size + 2))
    reader = harness.make(pool=make_pool(page_count=300))
    pool = reader.mem_pool_host
    targets = [299 - 2 * index for index in range(STORAGE_BATCH_SIZE)]
    sentinel_fill(pool)
    before = pool.kv_buffer.clone()
    result = reader.batch_get_v1(keys, slots_of(pool, targets))
    assert result == [kind == "found" for kind in kind_of], f"results {result}"
    for index, target in enumerate(targets):
        now = page_bytes(pool, target)
        if index in expected:
            assert now == expected[index], f"page {index} did not land whole in its own slots"
        else:
            assert now == bytes(before_page(before, pool, target)), (
                f"the slots of {kind_of[index]} page {index} changed"
            )
    untouched = set(range(pool.page_count)) - set(targets)
    changed = [page for page in untouched if page_bytes(pool, page) != bytes(before_page(before, pool, page))]
    assert not changed, f"pages outside the call changed: {changed[:5]}"


def check_stored_pages_are_own_copies(harness: Harness) -> None:
    """BE-17: a stored page keeps its bytes when the host page is rewritten; the store stays within its memory bound.

    A stored page lives outside the host pool's memory. Rewriting the same
    keys and clearing then writing again reuse freed slab rows: each slab
    holds at most ``max(64, 2 x the most pages live at once)`` rows
    (docs: the memory backend's bound), whatever the number of writes.
    """
    backend = harness.make(pool=make_pool(page_count=STORAGE_BATCH_SIZE * 2), store=MemoryStore())
    pool = backend.mem_pool_host
    keys = page_keys(STORAGE_BATCH_SIZE, start=7000)
    assert write_pages(backend, keys, list(range(STORAGE_BATCH_SIZE)), seed=42) == [True] * len(keys)
    expected = pool_pages_bytes(pool, list(range(STORAGE_BATCH_SIZE)))
    sentinel_fill(pool, 3.0)  # the engine reuses the host pages
    targets = list(range(STORAGE_BATCH_SIZE, 2 * STORAGE_BATCH_SIZE))
    assert backend.batch_get_v1(keys, slots_of(pool, targets)) == [True] * len(keys)
    assert pool_pages_bytes(pool, targets) == expected, "a stored page changed when its host page was rewritten"
    host_start = pool.kv_buffer.untyped_storage().data_ptr()
    host_end = host_start + pool.kv_buffer.untyped_storage().nbytes()
    for key in keys[:4]:
        address = harness.peek(backend, key).untyped_storage().data_ptr()
        assert not host_start <= address < host_end, f"page {key[:8]} is stored in the host pool's memory"
    store = backend.store
    for round_index in range(8):  # six rewrites of the same keys, then a clear and new keys twice
        if round_index == 6:
            backend.clear()
        sources = list(range(STORAGE_BATCH_SIZE)) if round_index % 2 else targets
        round_keys = keys if round_index < 6 else page_keys(STORAGE_BATCH_SIZE, start=8000 + round_index)
        assert write_pages(backend, round_keys, sources, seed=50 + round_index) == [True] * len(keys)
    live = len(store) + STORAGE_BATCH_SIZE  # the pages stored and one batch in flight
    bound = max(64, 2 * live) * pool.page_bytes
    assert store.held_bytes() <= bound, f"the store holds {store.held_bytes()} bytes for {len(store)} pages"


def check_names_follow_the_scheme(backend_cls: type) -> None:
    """NS-6: every name the backend gives an object is ``storage_name`` of its key and pool, escaping included."""
    backend = backend_cls(config(), {})
    keys = [page_keys(1)[0], "PlainKey42", "a/b", "50%", "space key", "caf\u00e9", "..", "-_."]
    for pool in ("kv", "indexer", "odd/pool"):
        expected = [storage_name(backend.namespace, key, pool) for key in keys]
        assert [backend._name(key, pool) for key in keys] == expected
        assert backend._names(keys, pool) == expected
        assert backend._names(keys[:2], pool) == expected[:2]
    backend.namespace = "other/namespace"  # set after construction, as a subclass may
    assert backend._name(keys[0], "kv") == storage_name("other/namespace", keys[0], "kv")


def check_fast_path_only_for_known_layouts(select: Any) -> None:
    """The fast path serves a ``HostPagePool`` with its own helpers, page ``n`` in flat-page order, and nothing else.

    A pool whose helpers are hooked (the conformance suite's) or foreign
    (SGLang's) must be served through its helpers, or the hooks never run.
    """
    for kind in ("mha", "mla"):
        for layout in ("layer_first", "page_first"):
            pool = make_pool(page_count=6, kind=kind, layout=layout)
            fill_pages(pool, list(range(6)), seed=43)
            pages = select(pool)
            assert pages is not None and pages.shape[0] == pool.page_count
            for number in (0, 5):
                assert torch.equal(pages[number].reshape(-1), pool.get_data_page(number * pool.page_size)), (
                    f"{kind}/{layout}: page {number} is not in flat-page order"
                )
    hooked = ConformancePool(4, 4, 2, 2, 8, pin_memory=False)
    assert select(hooked) is None, "a pool with its own page helpers must be served through them"
    assert select(ForeignPool(make_pool())) is None


class TransposedPageViews(MemoryBackend):
    """Sees a layer_first page as [layer, component, ...]: self-consistent, but not the flat-page order."""

    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        host = self._page_views.get(name)
        if host is not None and getattr(pool, "layout", None) == "layer_first":
            self._page_views[name] = _HostPages(host.pages.transpose(1, 2))


class StoreLosesPositions(MemoryBackend):
    """The store answers the found pages first and the misses after them: pages land in others' slots."""

    def _load_pages(self, names: Any, host: Any, numbers: Any) -> list:
        sizes = self.store.sizes(names)
        found = [name for name, size in zip(names, sizes) if size is not None]
        missing = [name for name, size in zip(names, sizes) if size is None]
        return super()._load_pages(found + missing, host, numbers)


class StoresHostViews(MemoryBackend):
    """Stores views of the host pages instead of copies: the engine's next use of those slots rewrites them."""

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        return self.store.put_many(names, [host.views[number] for number in numbers], groups)


class RewriteLeaksRows(MemoryBackend):
    """Forgets a rewritten page's old slab row instead of freeing it: memory grows with every rewrite."""

    def _store_pages(self, names: Any, groups: Any, host: Any, numbers: Any) -> list[bool]:
        with self.store._lock:
            for name in names:
                self.store._objects.pop(name, None)  # the row it held is never given back
        return super()._store_pages(names, groups, host, numbers)


class SkipsEscaping(MemoryBackend):
    """Puts every key after the pool's prefix as it is, escaping nothing."""

    def _name(self, key: str, pool: str = "kv") -> str:
        return self._name_prefix(pool) + key

    def _names(self, keys: Any, pool: str) -> list:
        return [self._name(key, pool) for key in keys]


def select_ignoring_helpers(pool: Any) -> Any:
    """``buffer_pages`` that never asks whose page helpers the pool has."""
    if not isinstance(pool, HostPagePool):
        return None
    if pool.layout == "layer_first":
        return pool.kv_buffer.view(pool.component_count, pool.layer_num, pool.page_count, -1).permute(2, 0, 1, 3)
    return pool.kv_buffer.view(pool.component_count, pool.page_count, -1).permute(1, 0, 2)


@pytest.mark.clause("BE-15", "BE-17")
def test_fast_path_matches_helpers(memory_harness: MemoryHarness) -> None:
    check_fast_path_matches_helpers(memory_harness)


@pytest.mark.clause("BE-13", "BE-15", "BE-16")
def test_batch_with_misses(either_path: MemoryHarness) -> None:
    check_batch_with_misses(either_path)


@pytest.mark.clause("BE-17")
def test_stored_pages_are_own_copies(memory_harness: MemoryHarness) -> None:
    check_stored_pages_are_own_copies(memory_harness)


@pytest.mark.clause("NS-6")
def test_names_follow_the_scheme() -> None:
    check_names_follow_the_scheme(MemoryBackend)


def test_fast_path_only_for_known_layouts() -> None:
    check_fast_path_only_for_known_layouts(buffer_pages)


def test_layout_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_fast_path_only_for_known_layouts(select_ignoring_helpers)


@pytest.mark.clause("BE-15", "BE-17")
def test_without_foreach_functions(memory_harness: MemoryHarness, monkeypatch: Any) -> None:
    """Where torch lacks the foreach functions, the fast path copies page by page, with the same bytes."""
    monkeypatch.delattr(torch, "_foreach_copy_")
    monkeypatch.delattr(torch, "_foreach_clone")
    check_fast_path_matches_helpers(memory_harness)
    check_stored_pages_are_own_copies(memory_harness)


FAST_PATH_PLANTED = [
    pytest.param(
        check_fast_path_matches_helpers, TransposedPageViews, marks=pytest.mark.clause("BE-15"), id="transposed-views"
    ),
    pytest.param(
        check_batch_with_misses, StoreLosesPositions, marks=pytest.mark.clause("BE-15", "BE-16"), id="lost-positions"
    ),
    pytest.param(
        check_stored_pages_are_own_copies, StoresHostViews, marks=pytest.mark.clause("BE-17"), id="host-views"
    ),
    pytest.param(check_stored_pages_are_own_copies, RewriteLeaksRows, id="rewrite-leaks-rows"),
]


@pytest.mark.parametrize("check, buggy_class", FAST_PATH_PLANTED)
def test_fast_path_check_catches_planted_bug(memory_harness: MemoryHarness, check: Any, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check(memory_harness.using(buggy_class))


@pytest.mark.clause("NS-6")
def test_names_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_names_follow_the_scheme(SkipsEscaping)


# ================================================================== reads never see a reused row
class StoreCopiesAfterUnlock(MemoryStore):
    """Looks pages up under the lock but copies them after releasing it; ``between`` runs in that gap."""

    between: Any = None

    def read_pages(self, names: Any, pages: Any, numbers: Any, views: Any = None) -> list[bool]:
        from hicache_reference.backends.memory import _ROW_BITS, _ROW_MASK

        with self._lock:
            entries = [self._objects.get(name) for name in names]
        if self.between is not None:
            self.between()
        results = []
        for entry, number in zip(entries, numbers):
            if not isinstance(entry, int):
                results.append(False)
                continue
            views[number].copy_(self._slab_list[entry >> _ROW_BITS].row(entry & _ROW_MASK))
            results.append(True)
        return results


def uniform_pages(pool: Any, pages: list[int]) -> list[float]:
    """The one value each page holds (pages are written uniform); NaN for a page holding two values."""
    values = []
    for page in pages:
        data = pool.get_data_page(page * pool.page_size).float()
        values.append(float(data[0]) if bool((data == data[0]).all()) else float("nan"))
    return values


def check_read_gets_one_stored_version(store: MemoryStore, interleave: bool) -> None:
    """BE-23: a page read while its key is deleted and its row reused by another write is one stored version.

    Pages are uniform (value 1.0 for the key read, 2.0 for the other key);
    the read must return 1.0 (the version it found) or miss, never the other
    key's bytes. ``interleave`` runs the delete and the other write inside
    the store's read where the store offers that gap (the planted store);
    the real store is also hammered from two threads.
    """
    writer = MemoryBackend(config(), {"store": store})
    writer.register_mem_pool_host(make_pool(page_count=4))
    reader = MemoryBackend(config(), {"store": store})
    reader.register_mem_pool_host(make_pool(page_count=4))
    pool = writer.mem_pool_host
    key, other = page_keys(2, start=9100)

    def put(which: str, value: float, page: int) -> None:
        pool.set_from_flat_data_page(
            page * pool.page_size, torch.full((pool.page_element_count,), value, dtype=pool.dtype)
        )
        assert writer.batch_set_v1([which], slots_of(pool, [page])) == [True]

    def replace() -> None:
        store.delete(writer._name(key))
        put(other, 2.0, 1)  # takes the row just freed

    for _ in range(20 if not interleave else 1):
        put(key, 1.0, 0)
        if interleave:
            store.between = replace
            found = reader.batch_get_v1([key], slots_of(reader.mem_pool_host, [2]))
            store.between = None
        else:
            thread = threading.Thread(target=replace)
            thread.start()
            found = reader.batch_get_v1([key], slots_of(reader.mem_pool_host, [2]))
            thread.join()
        if found == [True]:
            assert uniform_pages(reader.mem_pool_host, [2]) == [1.0], "a read returned bytes of another key's page"
        store.delete(writer._name(other))


@pytest.mark.clause("BE-23")
def test_read_gets_one_stored_version() -> None:
    check_read_gets_one_stored_version(MemoryStore(), interleave=False)


@pytest.mark.clause("BE-23")
def test_read_version_check_catches_planted_bug() -> None:
    with pytest.raises(AssertionError):
        check_read_gets_one_stored_version(StoreCopiesAfterUnlock(), interleave=True)
