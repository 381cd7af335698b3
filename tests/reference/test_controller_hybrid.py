"""Hybrid pools: a KV-derived indexer pool read with every KV slice, and a TRAILING_PAGES SWA pool read once after KV.

Scenario: a node of STORED pages is backed up with its indexer pages and the
SWA state of its last WINDOW pages; a fresh controller prefetches a longer
chain, so the agreed hit (STORED) ends before the query does and the SWA
window must be re-aligned to it (HYB-3).
"""

from __future__ import annotations

import pytest
import torch

from hicache_contracts import PoolHitPolicy, PoolName, PoolTransfer
from hicache_reference import CacheController, SidecarPool
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    CountingHostPool,
    RecordingBackend,
    check_derived_with_kv,
    check_frees,
    check_loaded_bytes,
    check_prefetch_acks,
    check_prefixes,
    check_slices,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    on_call,
    pool_hits,
    returning,
    wait_all,
)

STORED = 200
QUERIED = 300
WINDOW = 4
KEYS = keys_for(QUERIED)
ANCHOR = compute_key_chain(tuple(range(50_000, 50_000 + 2 * PAGE_SIZE)), PAGE_SIZE)


class Pools:
    """A KV pool with its indexer (KV-derived) and SWA (own slots) pools."""

    def __init__(self) -> None:
        self.kv = make_pool(600)
        self.indexer = CountingHostPool(600, PAGE_SIZE, 1, 1, 2, kind="mla", pin_memory=False)
        self.swa = CountingHostPool(32, PAGE_SIZE, 1, 1, 4, kind="mha", pin_memory=False)

    def sidecars(self):
        return [
            SidecarPool(PoolName.INDEXER, self.indexer, kv_derived=True),
            SidecarPool(PoolName.SWA, self.swa, hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=WINDOW),
        ]

    def fill(self) -> None:
        for seed, pool in enumerate((self.kv, self.indexer, self.swa)):
            fill_random(pool, seed)


def backup_node(pools: Pools, recorder: RecordingBackend, prefix=None):
    """Back up STORED pages with indexer and the SWA window of the last WINDOW pages."""
    kv_slots = pools.kv.alloc(STORED)
    swa_slots = pools.swa.alloc(WINDOW)
    swa = PoolTransfer(name=PoolName.SWA, keys=KEYS[STORED - WINDOW: STORED], host_indices=swa_slots,
                       hit_policy=PoolHitPolicy.TRAILING_PAGES)
    with CacheController(recorder, pools.kv, sidecar_pools=pools.sidecars(),
                         pass_prefix_keys=prefix is not None) as controller:
        backup = controller.backup(KEYS[:STORED], kv_slots, prefix_keys=prefix, sidecar_transfers=[swa])
        wait_all(backup)
    return backup, kv_slots, swa_slots


def prefetch_node(store, faults=None, prefix=None):
    pools = Pools()
    recorder = RecordingBackend(memory_backend(store=store), faults)
    with CacheController(recorder, pools.kv, sidecar_pools=pools.sidecars(), prefetch_threshold=0,
                         pass_prefix_keys=prefix is not None) as controller:
        operation = controller.prefetch(keys=KEYS, prefix_keys=prefix)
        wait_all(operation)
    return pools, recorder, operation


@pytest.fixture(scope="module")
def stored():
    pools = Pools()
    pools.fill()
    recorder = RecordingBackend(memory_backend())
    backup, kv_slots, swa_slots = backup_node(pools, recorder, prefix=ANCHOR)
    return pools, recorder, backup, kv_slots, swa_slots


@pytest.mark.clause("HYB-5", "PFX-9", "CTL-2", "CTL-7")
def test_backup_writes_sidecars_first_then_kv(stored):
    pools, recorder, backup, kv_slots, swa_slots = stored
    assert backup.completed_tokens == STORED * PAGE_SIZE and backup.error is None
    methods = [call.method for call in recorder.calls]
    assert methods == ["batch_set_v2", "batch_set_v2", "batch_set_v1", "batch_set_v1"]
    first = recorder.calls[0]
    assert [name for name, _, _ in first.transfers] == ["indexer", "swa"]
    assert [name for name, _, _ in recorder.calls[1].transfers] == ["indexer"]  # the rest of the indexer pages
    for call in recorder.calls_of("batch_set_v2"):
        assert call.prefix_at_call == ANCHOR  # PFX-9: the operation-level prefix
        assert all(len(keys) <= STORAGE_BATCH_SIZE for _, keys, _ in call.transfers)
    check_prefixes(recorder.calls_of("batch_set_v1"), KEYS, ANCHOR)


@pytest.mark.clause("HYB-1", "HYB-2", "HYB-3", "PFX-7", "PFX-8", "PFX-9", "CTL-5", "CTL-6", "CTL-12")
def test_prefetch_round_trip_of_every_pool(stored):
    source, _, _, kv_slots, swa_slots = stored
    pools, recorder, operation = prefetch_node(source_store(stored), prefix=ANCHOR)
    assert operation.hit_pages == STORED
    exists = recorder.calls_of("batch_exists_v2")
    assert len(exists) == 1 and exists[0].keys == KEYS and exists[0].prefix_at_call == ANCHOR
    check_derived_with_kv(recorder.calls)
    check_prefixes(recorder.calls_of("batch_get_v1"), KEYS, ANCHOR)
    check_slices(recorder.calls_of("batch_get_v1"), KEYS, STORAGE_BATCH_SIZE)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128, 72))
    assert pool_hits(operation) == {"swa": STORED}
    sidecar_read = [call for call in recorder.calls_of("batch_get_v2") if call.transfers[0][0] == "swa"]
    assert len(sidecar_read) == 1
    assert sidecar_read[0].transfers[0][1] == KEYS[STORED - WINDOW: STORED]  # HYB-3: ends at the agreed hit
    assert sidecar_read[0].prefix_at_call == ANCHOR  # PFX-9
    loaded = operation.loaded_host_indices
    check_loaded_bytes(source.kv, kv_slots, pools.kv, loaded, STORED)
    check_loaded_bytes(source.indexer, kv_slots, pools.indexer, loaded, STORED)
    check_loaded_bytes(source.swa, swa_slots, pools.swa, operation.pool_host_indices["swa"], WINDOW)
    check_frees(pools.kv, loaded)
    check_frees(pools.swa, operation.pool_host_indices["swa"])


def source_store(stored):
    return stored[1].inner.store


@pytest.mark.clause("HYB-2", "HYB-1", "CTL-4")
def test_short_derived_read_skips_the_sidecar_read():
    pools = Pools()
    recorder = RecordingBackend(memory_backend())
    backup_node(pools, recorder)
    faults = {"batch_get_v2": on_call(1, lambda call, run: {"indexer": run()["indexer"][:-1] + [False]})}
    target, reader, operation = prefetch_node(recorder.inner.store, faults)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128, 71))
    assert pool_hits(operation) is None  # HYB-2: KV did not complete
    assert all(call.transfers[0][0] == "indexer" for call in reader.calls_of("batch_get_v2"))
    check_frees(target.kv, operation.loaded_host_indices)
    assert target.swa.used_pages() == 0


@pytest.mark.clause("HYB-4", "CTL-12", "CTL-6")
@pytest.mark.parametrize("result", [
    {},
    {"swa": [True] * (WINDOW - 1) + [False]},
    {"swa": [True] * (WINDOW + 1)},
    {"indexer": [True] * WINDOW},
    None,
])
def test_sidecar_read_is_all_or_nothing(result):
    pools = Pools()
    recorder = RecordingBackend(memory_backend())
    backup_node(pools, recorder)
    faults = {"batch_get_v2": on_call(2, returning(result))}  # calls 0, 1: derived; 2: the sidecar read
    target, reader, operation = prefetch_node(recorder.inner.store, faults)
    assert operation.loaded_tokens == STORED * PAGE_SIZE
    assert pool_hits(operation) == {"swa": 0}
    assert operation.pool_host_indices == {}
    assert operation.final_ack.error == "sidecar read failed"
    assert target.swa.used_pages() == 0 and not target.swa.double_frees


@pytest.mark.clause("HYB-5", "CTL-7")
def test_failed_sidecar_write_writes_no_kv():
    pools = Pools()
    recorder = RecordingBackend(memory_backend(), {"batch_set_v2": on_call(
        0, lambda call, run: {**run(), "swa": [True] * (WINDOW - 1) + [False]})})
    backup, _, _ = backup_node(pools, recorder)
    assert backup.completed_tokens == 0 and backup.error == "sidecar write failed"
    assert recorder.calls_of("batch_set_v1") == []


@pytest.mark.clause("BE-21", "CTL-11")
@pytest.mark.parametrize("result", [None, "200", -1, QUERIED + 1])
def test_bad_v2_hit_query_result_is_a_miss(result):
    class Fake:
        kv_hit_pages = result

    pools = Pools()
    recorder = RecordingBackend(memory_backend())
    backup_node(pools, recorder)
    target, reader, operation = prefetch_node(recorder.inner.store, {"batch_exists_v2": returning(Fake())})
    assert operation.hit_pages == 0 and operation.revoked
    assert reader.calls_of("batch_get_v1") == []


def test_sidecar_pool_settings_are_checked():
    kv = make_pool()
    with pytest.raises(ValueError, match="SidecarPool.name: must not be kv"):
        SidecarPool(PoolName.KV, kv)
    with pytest.raises(ValueError, match="SidecarPool.window_pages: must be an int >= 1"):
        SidecarPool(PoolName.SWA, kv, hit_policy="trailing_pages", window_pages=0)
    small = CountingHostPool(4, PAGE_SIZE, 1, 1, 2, kind="mla", pin_memory=False)
    with pytest.raises(ValueError, match=r"CacheController.sidecar_pools\[0\].host_pool.size"):
        CacheController(memory_backend(), kv, sidecar_pools=[SidecarPool("indexer", small, kv_derived=True)],
                        start=False)
    assert torch.equal(kv.kv_buffer, torch.zeros_like(kv.kv_buffer))
