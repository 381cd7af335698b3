"""The reference controller end to end on CPU: backup real bytes, prefetch them into a fresh pool, compare.

Scenario: a node of N pages is backed up through one controller into the
memory backend, then a second controller with an empty host pool prefetches
the same token chain; the loaded pages must hold the same bytes, every call
must carry the prefix the spec gives it, and the acks must follow the slices.
"""

from __future__ import annotations


import pytest

from hicache_contracts import ContractViolation, FinalAck, HiCacheStorageExtraInfo
from hicache_reference import CacheController, PrefetchOperation, SidecarPool
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain, compute_page_key
from tests.reference.controller_checks import (
    check_backup,
    check_frees,
    check_hit_query,
    check_loaded_bytes,
    check_prefetch_acks,
    check_prefixes,
    check_slices,
)
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    config,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    store_pages,
    tokens_for,
    wait_all,
)

ANCHOR_TOKENS = tuple(range(10_000, 10_000 + 3 * PAGE_SIZE))
"""Three pages before the operation: the anchor node's pages."""
ANCHOR_KEYS = compute_key_chain(ANCHOR_TOKENS, PAGE_SIZE)


def round_trip(pages: int, prefix_mode: str, *, threshold: int = 0):
    """Back up ``pages`` pages after the anchor, prefetch them into a new pool; return everything to check."""
    operation_prefix = {"none": None, "empty": (), "anchor": ANCHOR_KEYS}[prefix_mode]
    prior_key = ANCHOR_KEYS[-1] if prefix_mode == "anchor" else None
    tokens = tokens_for(pages)
    chain = compute_key_chain(tuple(tokens), PAGE_SIZE, prior_key)
    source_pool, target_pool = make_pool(), make_pool()
    fill_random(source_pool)
    writer = FaultingRecorder(memory_backend())
    reader = FaultingRecorder(memory_backend(store=writer.inner.store))
    flag = operation_prefix is not None
    slots = source_pool.alloc(pages)
    with CacheController(
        writer, source_pool, storage_config=config(), settings=ControllerSettings(pass_prefix_keys=flag)
    ) as controller:
        backup = controller.backup(chain, slots, prefix_keys=operation_prefix)
        wait_all(backup)
    with CacheController(
        reader,
        target_pool,
        storage_config=config(),
        settings=ControllerSettings(pass_prefix_keys=flag, prefetch_threshold=threshold),
    ) as controller:
        operation = controller.prefetch(tokens, prior_key=prior_key, prefix_keys=operation_prefix)
        wait_all(operation)
    return chain, operation_prefix, source_pool, slots, target_pool, writer, reader, backup, operation


@pytest.mark.clause("CTL-2", "CTL-5", "CTL-6", "CTL-7", "PFX-2", "PFX-3", "PFX-4", "PFX-5", "PFX-7", "PFX-10", "KEY-3")
@pytest.mark.parametrize("prefix_mode", ["none", "empty", "anchor"])
@pytest.mark.parametrize("pages", [1, 127, 128, 129, 300])
def test_round_trip_bytes_prefixes_and_acks(pages, prefix_mode, threads_before):
    chain, prefix, source, slots, target, writer, reader, backup, operation = round_trip(pages, prefix_mode)
    assert backup.completed_tokens == pages * PAGE_SIZE and backup.error is None
    check_backup(writer.calls, backup, PAGE_SIZE, STORAGE_BATCH_SIZE)
    assert operation.keys == chain and operation.hit_pages == pages
    check_loaded_bytes(source, slots, target, operation.loaded_host_indices, pages)
    for recorded in (writer.calls, reader.calls):
        check_prefixes(recorded, chain, prefix)
        check_slices(recorded, chain, STORAGE_BATCH_SIZE)
    check_hit_query(reader.calls, chain, STORAGE_BATCH_SIZE)
    check_prefetch_acks(
        operation,
        PAGE_SIZE,
        STORAGE_BATCH_SIZE,
        loaded_pages=tuple(end - start for start, end in [(s, min(s + 128, pages)) for s in range(0, pages, 128)]),
    )
    assert operation.final_ack == FinalAck(operation_id=operation.operation_id, tokens=pages * PAGE_SIZE)
    check_frees(target, operation.loaded_host_indices)


@pytest.mark.clause("PFX-3")
def test_feature_off_sends_an_info_without_prefix_even_when_the_caller_has_one():
    chain, prefix, *_, writer, reader, backup, operation = round_trip(5, "anchor")
    pool = make_pool()
    backend = FaultingRecorder(memory_backend(store=writer.inner.store))
    with CacheController(
        backend, pool, storage_config=config(), settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=chain, prefix_keys=ANCHOR_KEYS)
        wait_all(operation)
    assert operation.loaded_tokens == 5 * PAGE_SIZE
    assert backend.calls and all(
        isinstance(call.extra_info, HiCacheStorageExtraInfo) and call.extra_info.prefix_keys is None
        for call in backend.calls
    )


@pytest.mark.clause("KEY-3", "PFX-10")
def test_key_chain_starts_from_the_anchor_and_prefix_ends_with_it():
    pool = make_pool()
    backend = FaultingRecorder(memory_backend())
    tokens = tokens_for(2)
    with CacheController(
        backend, pool, settings=ControllerSettings(prefetch_threshold=0, pass_prefix_keys=True)
    ) as controller:
        operation = controller.prefetch(tokens, prefix_keys=ANCHOR_KEYS)  # prior_key taken from the prefix
        wait_all(operation)
    assert operation.keys[0] == compute_page_key(tuple(tokens[:PAGE_SIZE]), ANCHOR_KEYS[-1])
    assert backend.calls[0].prefix_at_call == ANCHOR_KEYS


@pytest.mark.clause("PFX-10")
def test_prior_key_that_is_not_the_prefix_end_is_rejected():
    with CacheController(
        memory_backend(), make_pool(), settings=ControllerSettings(pass_prefix_keys=True)
    ) as controller:
        with pytest.raises(ContractViolation) as error:
            controller.prefetch(tokens_for(1), prior_key=ANCHOR_KEYS[0], prefix_keys=ANCHOR_KEYS)
    assert str(error.value) == (
        f"CacheController.prefetch.prior_key: must be the last key of prefix_keys, the anchor's last page "
        f"(None when prefix_keys is empty) (got '{ANCHOR_KEYS[0]}') [PFX-10]"
    )


@pytest.mark.clause("CTL-1", "CTL-2")
@pytest.mark.parametrize("stored", [0, 1, 127, 128, 129, 200, 300])
def test_hit_query_is_one_unsliced_call_over_the_whole_chain(stored):
    """SGLang 0.5.21+ queries the whole chain in one batch_exists, also beyond 128 pages."""
    keys = keys_for(300)
    pool = make_pool()
    backend = memory_backend()
    pool.free(store_pages(backend, pool, keys[:stored]))
    recorder = FaultingRecorder(backend)
    with CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False)
    ) as controller:
        operation = controller.prefetch(keys=keys)
        wait_all(operation)
    exists = recorder.calls_of("batch_exists")
    assert [call.keys for call in exists] == [tuple(keys)]
    check_hit_query(recorder.calls, keys, STORAGE_BATCH_SIZE)
    assert operation.hit_pages == stored
    assert operation.loaded_tokens == stored * PAGE_SIZE


@pytest.mark.clause("CTL-3")
@pytest.mark.parametrize(
    "pages, threshold, queried",
    [(3, 4 * PAGE_SIZE, False), (4, 4 * PAGE_SIZE, True), (1, 0, True), (1, 1, True), (0, 0, False)],
)
def test_a_span_below_the_threshold_is_declined_before_any_query(pages, threshold, queried):
    """The effective threshold is max(prefetch_threshold, page_size); a shorter span gets no hit query."""
    pool = make_pool()
    recorder = FaultingRecorder(memory_backend())
    with CacheController(recorder, pool, settings=ControllerSettings(prefetch_threshold=threshold)) as controller:
        operation = controller.prefetch(keys=keys_for(pages))
        wait_all(operation)
    assert bool(recorder.calls_of("batch_exists")) is queried
    assert operation.revoked and operation.final_ack.tokens == 0
    assert operation.declined is (not queried)
    assert operation.local_hit_pages == operation.hit_pages == 0  # a declined span agrees on 0 pages, not less


@pytest.mark.clause("CTL-3", "CTL-6", "CTL-12")
@pytest.mark.parametrize(
    "pages,threshold,revoked", [(127, 256, True), (128, 256, False), (129, 256, False), (0, 0, True), (1, 0, False)]
)
def test_threshold_revokes_before_any_io(pages, threshold, revoked):
    keys = keys_for(200)
    pool = make_pool()
    backend = memory_backend()
    pool.free(store_pages(backend, pool, keys[:pages]))
    recorder = FaultingRecorder(backend)
    with CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=threshold, register_host_pools=False)
    ) as controller:
        operation = controller.prefetch(keys=keys)
        wait_all(operation)
    assert operation.revoked is revoked
    assert bool(recorder.calls_of("batch_get_v1")) is not revoked
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE)
    assert operation.final_ack.tokens == (0 if revoked else pages * PAGE_SIZE)
    check_frees(pool, operation.loaded_host_indices)


@pytest.mark.clause("CTL-3", "CTL-12")
def test_short_host_memory_revokes():
    keys = keys_for(150)
    pool = make_pool()
    backend = memory_backend()
    pool.free(store_pages(backend, pool, keys))
    pool.alloc_short = True
    recorder = FaultingRecorder(backend)
    with CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False)
    ) as controller:
        operation = controller.prefetch(keys=keys)
        wait_all(operation)
    assert operation.local_hit_pages == 150 and operation.hit_pages == 0 and operation.revoked
    assert not recorder.calls_of("batch_get_v1")
    assert operation.acks == (FinalAck(operation_id=operation.operation_id, tokens=0, error="revoked: miss"),)
    check_frees(pool, operation.loaded_host_indices)


@pytest.mark.clause("BE-24")
def test_host_pools_are_registered_once_before_io():
    pool = make_pool()
    recorder = FaultingRecorder(memory_backend())
    with CacheController(recorder, pool, settings=ControllerSettings(prefetch_threshold=0)) as controller:
        wait_all(controller.prefetch(keys=keys_for(3)))
    assert recorder.registered == [("register_mem_pool_host", pool), ("on_host_pools_registered", None)]


@pytest.mark.clause("BE-27", "BE-24")
def test_on_host_pools_registered_fires_once_after_the_burst_and_a_raise_fails_construction():
    pool = make_pool()
    recorder = FaultingRecorder(memory_backend())
    sidecar = SidecarPool("indexer", make_pool(), kv_derived=True)
    with CacheController(
        recorder, pool, sidecar_pools=(sidecar,), settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        wait_all(controller.prefetch(keys=keys_for(3)))
    names = [name for name, _ in recorder.registered]
    assert names == ["register_mem_pool_host", "kv", "indexer", "on_host_pools_registered"]
    assert not recorder.calls or recorder.calls[0].method.startswith("batch")

    class Refusing(FaultingRecorder):
        def on_host_pools_registered(self) -> None:
            raise RuntimeError("remote manager refused the pool set")

    with pytest.raises(RuntimeError, match="remote manager refused"):
        CacheController(Refusing(memory_backend()), make_pool())


def test_close_restart_and_no_leaked_threads(threads_before):
    pool = make_pool()
    backend = memory_backend()
    controller = CacheController(backend, pool, settings=ControllerSettings(prefetch_threshold=0))
    slots = pool.alloc(3)
    wait_all(controller.backup(keys_for(3), slots))
    assert controller.close() and not controller.running
    assert controller.close()  # twice is fine
    with pytest.raises(RuntimeError, match="the controller is closed"):
        controller.prefetch(keys=keys_for(3))
    controller.start()
    operation = controller.prefetch(keys=keys_for(3))
    wait_all(operation)
    assert operation.loaded_tokens == 3 * PAGE_SIZE
    assert controller.close()


def test_operations_submitted_before_close_still_finish(threads_before):
    pool = make_pool()
    controller = CacheController(memory_backend(), pool, settings=ControllerSettings(prefetch_threshold=0))
    operations = [controller.prefetch(keys=keys_for(2, offset=index * 100)) for index in range(5)]
    assert controller.close()
    assert all(operation.done and operation.final_ack is not None for operation in operations)


def test_on_ack_sees_every_ack_in_order_and_a_raising_callback_is_contained():
    seen: list = []

    def on_ack(operation: PrefetchOperation, ack) -> None:
        seen.append(ack)
        raise ValueError("callback failure")

    pool = make_pool()
    with CacheController(
        memory_backend(), pool, on_ack=on_ack, settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=keys_for(3))
        wait_all(operation)
    assert tuple(seen) == operation.acks
    assert len(controller.internal_errors) == len(seen)


@pytest.mark.clause("CTL-9")
def test_unknown_policy_is_rejected():
    with CacheController(memory_backend(), make_pool()) as controller:
        with pytest.raises(ContractViolation) as error:
            controller.prefetch(keys=keys_for(1), policy="eager")
    assert str(error.value) == (
        "CacheController.prefetch.policy: must be one of best_effort, wait_complete, timeout (got 'eager') [CTL-9]"
    )


@pytest.mark.clause("KEY-2")
def test_bad_keys_and_slots_are_rejected_and_nothing_is_written():
    recorder = FaultingRecorder(memory_backend())
    pool = make_pool()
    with CacheController(recorder, pool) as controller:
        with pytest.raises(ContractViolation) as error:
            controller.prefetch(keys=["a" * 64, ""])
        assert str(error.value) == "CacheController.prefetch.keys[1]: page key must be a non-empty str (got '') [KEY-2]"
        slots = pool.alloc(2)
        with pytest.raises(ContractViolation) as error:
            controller.backup(keys_for(3), slots)
        assert str(error.value).startswith("CacheController.backup.host_indices: must hold key_count * page_size")
        with pytest.raises(ContractViolation) as error:
            controller.prefetch([1, -1, 2, 3])
        assert (
            str(error.value) == "CacheController.prefetch.token_ids[1]: must be an int in [0, 2**32) (got -1) [KEY-1]"
        )
        with pytest.raises(ContractViolation):
            controller.prefetch([1, 2], keys=keys_for(1))
    assert recorder.calls == []


def test_snapshots_match_the_operation():
    pool = make_pool()
    with CacheController(
        memory_backend(), pool, settings=ControllerSettings(pass_prefix_keys=True, prefetch_threshold=0)
    ) as controller:
        operation = controller.prefetch(keys=keys_for(3), prefix_keys=[], policy="wait_complete")
        backup = controller.backup(keys_for(2), pool.alloc(2), prefix_keys=ANCHOR_KEYS)
        wait_all(operation, backup)
    snapshot = operation.snapshot()
    assert snapshot.keys == keys_for(3) and snapshot.prefix_keys == [] and snapshot.policy == "wait_complete"
    assert backup.snapshot().prefix_keys == list(ANCHOR_KEYS)
