"""The memory backend's planted bugs: subclasses of ``MemoryBackend`` with one bug each, and the checks that catch them.

Each is caught by one vendor check run alone (a bug in page IO on both
paths) or by a reference check (``test_memory_backend``, ``backend_checks``).
Most of the logic lives in the shared base, so these bugs also stand for the
file backend's (which has its own file-specific ones).
"""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest
import torch

from hicache_reference.backends import MemoryBackend, tensor_bytes
from hicache_reference.backends.memory import _HostPages
from tests.reference.backend_checks import MemoryHarness, assert_vendor_check_fails, run_vendor_suite
from tests.reference.reference_checks import (
    check_bad_keys,
    check_concurrent_threads,
    check_derived_sidecars_travel_with_kv,
    check_fold_measures_pools_against_kv,
    check_legacy_shapes,
    check_reads_stay_in_their_slots,
    check_registration,
    check_round_trip_between_pools,
    check_short_objects_are_misses,
)
from tests.reference.test_memory_backend import (
    check_eviction,
    check_failed_target_copy_is_a_miss,
    check_rewrite_is_a_use,
    fast_path,
)


# ================================================================== planted bugs
class ExistsWithAnotherScheme(MemoryBackend):
    """exists/batch_exists look under a differently tagged name than set wrote (a real bug: L3 never hit)."""

    def _present(self, pool_name: str, keys: Any) -> list[bool]:
        return super()._present(pool_name, [key + "-tagged" for key in keys])


class ClearRemovesEverything(MemoryBackend):
    def _clear_namespace(self, namespace: str) -> None:
        self.store.delete_prefix("")


class ClearDoesNothing(MemoryBackend):
    def _clear_namespace(self, namespace: str) -> None:
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


class ExistsWithoutExtraInfo(MemoryBackend):
    def batch_exists(self, keys: Any) -> int:  # type: ignore[override]
        return super().batch_exists(keys)


class ExtraInfoUnderOtherNames(MemoryBackend):
    """Correct (BE-8): every release hands extra_info to batch_exists and the v1 calls positionally, so the
    parameter's name is the backend's to choose there."""

    def batch_exists(self, keys: Any, info: Any = None) -> int:  # type: ignore[override]
        return super().batch_exists(keys, info)

    def batch_get_v1(self, keys: Any, host_indices: Any, info: Any = None) -> list:  # type: ignore[override]
        return super().batch_get_v1(keys, host_indices, info)

    def batch_set_v1(self, keys: Any, host_indices: Any, info: Any = None) -> list:  # type: ignore[override]
        return super().batch_set_v1(keys, host_indices, info)


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
    *planted("extra_info_accepted_in_every_shape", ExistsWithoutExtraInfo, "BE-8"),
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


@pytest.mark.parametrize("check, buggy_class", VENDOR_PLANTED)
def test_vendor_check_catches_planted_bug(memory_harness: MemoryHarness, check: str, buggy_class: type) -> None:
    assert_vendor_check_fails(memory_harness.using(buggy_class), check)


@pytest.mark.clause("BE-8")
def test_extra_info_under_another_name_where_releases_pass_it_positionally_passes(
    memory_harness: MemoryHarness,
) -> None:
    report = run_vendor_suite(memory_harness.using(ExtraInfoUnderOtherNames), ("extra_info_accepted_in_every_shape",))
    outcome = {item.check: item for item in report.sections[0].checks}["extra_info_accepted_in_every_shape"]
    assert outcome.status == "pass", outcome.message


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
