"""Hybrid pools: a KV-derived indexer pool read with every KV slice, and a TRAILING_PAGES SWA pool read once after KV.

Scenario: a node of STORED pages is backed up with its indexer pages and the
SWA state of its last WINDOW pages; a fresh controller prefetches a longer
chain, so the agreed hit (STORED) ends before the query does and the SWA
window must be re-aligned to it (HYB-3).

Second scenario (CTL-2): pools with their own slots whose windows are longer
than a slice — Mamba state on every page (ALL_PAGES) over 260 or 300 pages,
and an SWA window of 200 pages — are read once after KV in batch_get_v2
calls of at most 128 keys per pool, checked by our own assertions and by the
engine suite's trace checker.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hicache_contracts import PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.engine import RecordingBackend as EngineRecorder
from hicache_contracts.engine import check_trace
from hicache_reference import CacheController, SidecarPool
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain
from tests.reference.controller_checks import (
    check_derived_with_kv,
    check_frees,
    check_loaded_bytes,
    check_prefetch_acks,
    check_prefixes,
    check_slices,
    pool_hits,
)
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    CountingHostPool,
    FaultingRecorder,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    on_call,
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


def backup_node(pools: Pools, recorder: FaultingRecorder, prefix=None):
    """Back up STORED pages with indexer and the SWA window of the last WINDOW pages."""
    kv_slots = pools.kv.alloc(STORED)
    swa_slots = pools.swa.alloc(WINDOW)
    swa = PoolTransfer(
        name=PoolName.SWA,
        keys=KEYS[STORED - WINDOW : STORED],  # type: ignore[arg-type]
        host_indices=swa_slots,
        hit_policy=PoolHitPolicy.TRAILING_PAGES,
    )
    with CacheController(
        recorder,
        pools.kv,
        sidecar_pools=pools.sidecars(),
        settings=ControllerSettings(pass_prefix_keys=prefix is not None),
    ) as controller:
        backup = controller.backup(KEYS[:STORED], kv_slots, prefix_keys=prefix, sidecar_transfers=[swa])
        wait_all(backup)
    return backup, kv_slots, swa_slots


def prefetch_node(store, faults=None, prefix=None):
    pools = Pools()
    recorder = FaultingRecorder(memory_backend(store=store), faults)
    with CacheController(
        recorder,
        pools.kv,
        sidecar_pools=pools.sidecars(),
        settings=ControllerSettings(prefetch_threshold=0, pass_prefix_keys=prefix is not None),
    ) as controller:
        operation = controller.prefetch(keys=KEYS, prefix_keys=prefix)
        wait_all(operation)
    return pools, recorder, operation


@pytest.fixture(scope="module")
def stored():
    pools = Pools()
    pools.fill()
    recorder = FaultingRecorder(memory_backend())
    backup, kv_slots, swa_slots = backup_node(pools, recorder, prefix=ANCHOR)
    return pools, recorder, backup, kv_slots, swa_slots


@pytest.mark.clause("HYB-5", "PFX-9", "CTL-2", "CTL-7")
def test_backup_writes_sidecars_first_then_kv(stored):
    pools, recorder, backup, kv_slots, swa_slots = stored
    assert backup.completed_tokens == STORED * PAGE_SIZE and backup.error is None
    methods = [call.method for call in recorder.calls]
    # One batch_set_v2 per trailing-length group over the whole span (SGLang 0.5.23), then KV by slices.
    assert methods == ["batch_set_v2", "batch_set_v2", "batch_set_v1", "batch_set_v1"]
    indexer, swa = recorder.calls_of("batch_set_v2")
    assert [(name, keys) for name, keys, _ in indexer.transfers] == [("indexer", KEYS[:STORED])]  # unsliced
    assert [(name, keys) for name, keys, _ in swa.transfers] == [("swa", KEYS[STORED - WINDOW : STORED])]
    assert indexer.prefix_at_call == ANCHOR  # PFX-9: covers no span key before its first
    assert swa.prefix_at_call == ANCHOR + KEYS[: STORED - WINDOW]  # PFX-9: the prefix joins the window's keys
    check_prefixes(recorder.calls, KEYS, ANCHOR)


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
    assert sidecar_read[0].transfers[0][1] == KEYS[STORED - WINDOW : STORED]  # HYB-3: ends at the agreed hit
    assert sidecar_read[0].prefix_at_call == ANCHOR + KEYS[: STORED - WINDOW]  # PFX-9: joins the window
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
    recorder = FaultingRecorder(memory_backend())
    backup_node(pools, recorder)
    faults = {"batch_get_v2": on_call(1, lambda call, run: {"indexer": run()["indexer"][:-1] + [False]})}
    target, reader, operation = prefetch_node(recorder.inner.store, faults)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128, 71))
    assert pool_hits(operation) is None  # HYB-2: KV did not complete
    assert all(call.transfers[0][0] == "indexer" for call in reader.calls_of("batch_get_v2"))
    check_frees(target.kv, operation.loaded_host_indices)
    assert target.swa.used_pages() == 0


@pytest.mark.clause("HYB-4", "CTL-12", "CTL-6")
@pytest.mark.parametrize(
    "result",
    [
        {},
        {"swa": [True] * (WINDOW - 1) + [False]},
        {"swa": [True] * (WINDOW + 1)},
        {"indexer": [True] * WINDOW},
        None,
    ],
)
def test_sidecar_read_is_all_or_nothing(result):
    pools = Pools()
    recorder = FaultingRecorder(memory_backend())
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
    recorder = FaultingRecorder(
        memory_backend(),
        {"batch_set_v2": on_call(0, lambda call, run: {**run(), "swa": [True] * (WINDOW - 1) + [False]})},
    )
    backup, _, _ = backup_node(pools, recorder)
    assert backup.completed_tokens == 0 and backup.error == "sidecar write failed"
    assert recorder.calls_of("batch_set_v1") == []


@pytest.mark.clause("BE-21", "CTL-11")
@pytest.mark.parametrize("result", [None, "200", -1, QUERIED + 1])
def test_bad_v2_hit_query_result_is_a_miss(result):
    class Fake:
        kv_hit_pages = result

    pools = Pools()
    recorder = FaultingRecorder(memory_backend())
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
        CacheController(
            memory_backend(), kv, sidecar_pools=[SidecarPool("indexer", small, kv_derived=True)], start=False
        )
    assert torch.equal(kv.kv_buffer, torch.zeros_like(kv.kv_buffer))


# ================================================================== sidecar reads longer than a slice (CTL-2)
LONG = 300
"""Pages of the long hybrid prefix: three slices (128, 128, 44)."""
LONG_STORED = 260
"""Pages stored of it: the agreed hit, so a TRAILING_PAGES window ends before the chain does."""
LONG_WINDOW = 200
"""N of the long TRAILING_PAGES pool: longer than a slice, so its window is read in two calls."""
LONG_KEYS = keys_for(LONG, offset=7_000)


class LongPools:
    """KV with two pools of their own slots: Mamba state on every page (ALL_PAGES) and a long SWA window."""

    def __init__(self, trailing: bool = True) -> None:
        self.kv = make_pool(600)
        self.mamba = CountingHostPool(600, PAGE_SIZE, 1, 1, 2, kind="mla", pin_memory=False)
        self.swa = CountingHostPool(600, PAGE_SIZE, 1, 1, 4, kind="mha", pin_memory=False)
        self.trailing = trailing

    def sidecars(self) -> list:
        pools = [SidecarPool(PoolName.MAMBA, self.mamba)]
        if self.trailing:
            pools.append(
                SidecarPool(PoolName.SWA, self.swa, hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=LONG_WINDOW)
            )
        return pools

    def windows(self, hit: int) -> dict:
        """Each pool's pages [start, end) of the chain after an agreed hit of ``hit`` pages (HYB-3)."""
        windows = {"mamba": (0, hit)}
        if self.trailing:
            windows["swa"] = (max(0, hit - LONG_WINDOW), hit)
        return windows


def store_long_prefix(stored: int = LONG_STORED, trailing: bool = True):
    """Back up ``stored`` pages of the long prefix with Mamba state on every page and the SWA window."""
    pools = LongPools(trailing)
    for seed, pool in enumerate((pools.kv, pools.mamba, pools.swa)):
        fill_random(pool, 10 + seed)
    backend = memory_backend()
    kv_slots, mamba_slots = pools.kv.alloc(stored), pools.mamba.alloc(stored)
    transfers = [PoolTransfer(name=PoolName.MAMBA, keys=LONG_KEYS[:stored], host_indices=mamba_slots)]  # type: ignore[arg-type]
    swa_slots = None
    if trailing:
        start = max(0, stored - LONG_WINDOW)
        swa_slots = pools.swa.alloc(stored - start)
        transfers.append(
            PoolTransfer(
                name=PoolName.SWA,
                keys=LONG_KEYS[start:stored],  # type: ignore[arg-type]
                host_indices=swa_slots,
                hit_policy=PoolHitPolicy.TRAILING_PAGES,
            )
        )
    with CacheController(backend, pools.kv, sidecar_pools=pools.sidecars()) as controller:
        backup = controller.backup(LONG_KEYS[:stored], kv_slots, sidecar_transfers=transfers)
        wait_all(backup)
    assert backup.completed_tokens == stored * PAGE_SIZE, backup.error
    return backend.store, pools, {"kv": kv_slots, "mamba": mamba_slots, "swa": swa_slots}


def prefetch_long_prefix(store, controller_class=CacheController, trailing: bool = True, faults=None):
    """Prefetch the whole long chain through the engine suite's recorder (prefix: ANCHOR)."""
    pools = LongPools(trailing)
    recorder = EngineRecorder(FaultingRecorder(memory_backend(store=store), faults))
    with controller_class(
        recorder,
        pools.kv,
        sidecar_pools=pools.sidecars(),
        settings=ControllerSettings(prefetch_threshold=0, pass_prefix_keys=True),
    ) as controller:
        operation = controller.prefetch(keys=LONG_KEYS, prefix_keys=ANCHOR)
        wait_all(operation)
    return pools, recorder, operation


def sidecar_reads(recorder) -> list:
    """The recorded batch_get_v2 calls with no KV-derived transfer: the reads of the pools with their own slots."""
    return [
        call
        for call in recorder.calls
        if call.method == "batch_get_v2" and not any(transfer.indices_from_pool == "kv" for transfer in call.transfers)
    ]


def check_sidecar_read_in_groups(recorder, operation, windows: dict) -> None:
    """CTL-2, HYB-2, HYB-3, PFX-9: the other sidecars are read once after KV, one call per trailing-length group.

    As SGLang 0.5.23's ``_trailing_chain_groups``: pools whose windows start
    at the same page of the agreed hit share one unsliced ``batch_get_v2``,
    whose prefix is the operation's prefix followed by the chain up to that
    page; all after the last KV read, every window read once into the slots
    the operation hands over.
    """
    reads = sidecar_reads(recorder)
    assert reads, "[HYB-2] the other sidecars were not read although KV completed"
    last_kv = max(call.index for call in recorder.calls if call.method == "batch_get_v1")
    assert min(call.index for call in reads) > last_kv, "[HYB-2] a sidecar read came before the last KV read"
    assert [call.index for call in reads] == list(range(reads[0].index, reads[0].index + len(reads))), (
        "[HYB-2] the sidecar read is not one run of calls"
    )
    groups = {start for start, _ in windows.values()}
    assert len(reads) == len(groups), (
        f"[HYB-2] {len(reads)} sidecar read calls for {len(groups)} trailing-length groups"
    )
    for number, call in enumerate(reads):
        starts = {windows[transfer.name][0] for transfer in call.transfers}
        assert len(starts) == 1, f"[PFX-9] sidecar read {number} mixes windows starting at pages {sorted(starts)}"
        (start,) = starts
        assert call.prefix_keys == ANCHOR + operation.keys[:start], (
            f"[PFX-9] sidecar read {number} carries a prefix that does not join its keys (page {start})"
        )
    for name, (start, end) in windows.items():
        parts = [transfer for call in reads for transfer in call.transfers if transfer.name == name]
        assert len(parts) == 1, f"[CTL-2] {name} was read in {len(parts)} parts; sidecar reads are not sliced"
        assert parts[0].keys == operation.keys[start:end], f"[HYB-3] {name} read other pages than [{start}, {end})"
        slots = next(
            transfer.host_indices for call in reads for transfer in call.args[0] if transfer.name.value == name
        )
        assert torch.equal(slots, operation.pool_host_indices[name]), (
            f"[HYB-2] {name} was not read into the slots the operation hands over"
        )


def checked_by_the_trace_checker(recorder, operation) -> Any:
    """Run the engine suite's checker on the prefetch; return its report after our own checks agreed."""
    return check_trace(
        recorder.calls,
        chain=LONG_KEYS,
        prefix_keys=operation.base_info.prefix_keys,
        acks=operation.acks,
        page_size=PAGE_SIZE,
    )


@pytest.mark.clause("CTL-2", "HYB-2", "HYB-3", "PFX-9")
@pytest.mark.parametrize("trailing", [False, True], ids=["all-pages-300", "all-pages-and-long-window"])
def test_sidecar_read_longer_than_a_slice_is_one_call_per_group(trailing):
    stored = LONG if not trailing else LONG_STORED
    store, source, source_slots = store_long_prefix(stored, trailing)
    pools, recorder, operation = prefetch_long_prefix(store, trailing=trailing)
    assert operation.hit_pages == stored and operation.error is None
    windows = pools.windows(stored)
    check_sidecar_read_in_groups(recorder, operation, windows)
    assert pool_hits(operation) == {name: stored for name in windows}  # HYB-2: acked with per-pool hits
    report = checked_by_the_trace_checker(recorder, operation)
    assert {"CTL-2", "HYB-2", "PFX-9"} <= set(report.checked)
    assert report.ok, report.format_table(statements=True)
    loaded = operation.loaded_host_indices
    check_loaded_bytes(source.kv, source_slots["kv"], pools.kv, loaded, stored)
    check_loaded_bytes(source.mamba, source_slots["mamba"], pools.mamba, operation.pool_host_indices["mamba"], stored)
    if trailing:
        check_loaded_bytes(source.swa, source_slots["swa"], pools.swa, operation.pool_host_indices["swa"], LONG_WINDOW)
    check_frees(pools.mamba, operation.pool_host_indices["mamba"])


def check_a_failed_part_fails_the_read(controller_class=CacheController, failing_call: int = 1, result=None) -> None:
    """HYB-4, CTL-12: one failed group call of a sidecar read fails every pool, stops the read, frees the slots."""
    store, _, _ = store_long_prefix()
    faults = {"batch_get_v2": on_call(failing_call, returning(result))}  # the only v2 reads are the sidecar groups
    pools, recorder, operation = prefetch_long_prefix(store, controller_class, faults=faults)
    assert operation.loaded_tokens == LONG_STORED * PAGE_SIZE
    assert len(sidecar_reads(recorder)) == failing_call + 1, "[HYB-4] the read went on after a failed part"
    assert pool_hits(operation) == {"mamba": 0, "swa": 0}, "[HYB-4] a failed part counted as hits"
    assert operation.pool_host_indices == {} and operation.final_ack.error == "sidecar read failed"
    for pool in (pools.mamba, pools.swa):
        assert pool.used_pages() == 0 and not pool.double_frees, "[CTL-12] sidecar slots not freed exactly once"


@pytest.mark.clause("HYB-4", "CTL-12", "CTL-6")
@pytest.mark.parametrize(
    "failing_call, result",
    [
        (0, {}),
        (1, {"swa": [True] * (LONG_WINDOW - 1) + [False]}),
        (1, {"mamba": [True] * LONG_STORED}),
        (1, None),
    ],
    ids=["first-part-empty", "a-false-page", "a-pool-missing", "none"],
)
def test_a_failed_part_fails_the_whole_sidecar_read(failing_call, result):
    check_a_failed_part_fails_the_read(failing_call=failing_call, result=result)


# The planted bugs of the grouped sidecar read (one call, the operation's prefix, sliced windows, the last
# part deciding) are in tests/planted_controllers.py; test_controller_planted.py runs them through the checks above.
