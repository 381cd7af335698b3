"""Planted backend faults: the controller degrades to a shorter load, never to garbage, a dead thread or a lost ack.

Each scenario stores 300 pages (three slices: 128, 128, 44), then makes one
backend call misbehave — raise, return None, a short or over-long list,
non-bool entries, or hang past the call deadline — and checks the acks
(CTL-5, CTL-6), that no read follows a short slice (CTL-4), that nothing
unconfirmed is counted (CTL-11), and that every host page is freed exactly
once or kept by the caller (CTL-12).
"""

from __future__ import annotations

import threading

import numpy
import pytest

from hicache_reference import CacheController
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE
from tests.reference.controller_checks import (
    check_backup,
    check_frees,
    check_loaded_bytes,
    check_prefetch_acks,
    check_reads_stop,
)
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    on_call,
    raising,
    returning,
    short_by,
    wait_all,
)

PAGES = 300
KEYS = keys_for(PAGES)


def stored_backend():
    """A memory backend holding KEYS, written from a random pool; returns (backend, source pool, source slots)."""
    source = make_pool()
    fill_random(source)
    backend = memory_backend()
    backend.register_mem_pool_host(source)
    slots = source.alloc(PAGES)
    for start in range(0, PAGES, STORAGE_BATCH_SIZE):
        end = min(start + STORAGE_BATCH_SIZE, PAGES)
        assert all(backend.batch_set_v1(list(KEYS[start:end]), slots[start * PAGE_SIZE : end * PAGE_SIZE]))
    return backend, source, slots


def prefetch_with(faults, *, call_deadline=None):
    backend, source, source_slots = stored_backend()
    recorder = FaultingRecorder(memory_backend(store=backend.store), faults)
    pool = make_pool()
    controller = CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, call_deadline=call_deadline)
    )
    operation = controller.prefetch(keys=KEYS)
    return controller, recorder, pool, operation, source, source_slots


# Per fault on the read of one slice: (fault, pages loaded per slice read).
READ_FAULTS = {
    "raises on slice 1": (on_call(1, raising()), (128, 0)),
    "raises NotImplementedError": (on_call(0, raising(NotImplementedError)), (0,)),
    "returns None": (on_call(1, returning(None)), (128, 0)),
    "returns a bare True": (on_call(0, returning(True)), (0,)),
    "short by 3 on slice 0": (on_call(0, short_by(3)), (125,)),
    "short by 1 on the last slice": (on_call(2, short_by(1)), (128, 128, 43)),
    "2N results": (on_call(0, lambda call, run: run() + run()), (0,)),
    "N-1 results": (on_call(1, lambda call, run: run()[:-1]), (128, 0)),
    "an int among the bools": (on_call(0, lambda call, run: (lambda got: got[:5] + [1] + got[6:])(run())), (5,)),
    "a tuple, not a list": (on_call(0, lambda call, run: tuple(run())), (0,)),
}


@pytest.mark.clause("CTL-4", "CTL-5", "CTL-6", "CTL-11", "CTL-12")
@pytest.mark.parametrize("name", list(READ_FAULTS))
def test_read_fault_freezes_progress_and_keeps_threads(name, threads_before):
    fault, loaded_pages = READ_FAULTS[name]
    controller, recorder, pool, operation, source, source_slots = prefetch_with({"batch_get_v1": fault})
    wait_all(operation)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=loaded_pages)
    check_reads_stop(recorder.calls)
    loaded = sum(loaded_pages)
    assert operation.loaded_tokens == loaded * PAGE_SIZE
    check_loaded_bytes(source, source_slots, pool, operation.loaded_host_indices, loaded)
    check_frees(pool, operation.loaded_host_indices)
    # the IO thread survived: the next prefetch on the same controller completes
    recorder.faults.clear()
    again = controller.prefetch(keys=KEYS[:3])
    wait_all(again)
    assert again.loaded_tokens == 3 * PAGE_SIZE
    assert controller.close()
    assert controller.internal_errors == []


@pytest.mark.clause("CTL-6", "CTL-11")
def test_error_of_a_raising_read_is_on_the_final_ack():
    controller, recorder, pool, operation, *_ = prefetch_with({"batch_get_v1": on_call(1, raising())})
    wait_all(operation)
    controller.close()
    assert operation.final_ack.error == "batch_get_v1 raised RuntimeError: planted storage failure"


EXISTS_FAULTS = {
    "raises": raising(),
    "None": returning(None),
    "more than asked": returning(10**6),
    "negative": returning(-1),
    "numpy's bool": returning(numpy.True_),  # no count: a slice refuses it (a bool counts as its int, BE-2)
    "a float": returning(128.0),
}


@pytest.mark.clause("CTL-11", "CTL-6", "RANK-1")
@pytest.mark.parametrize("name", list(EXISTS_FAULTS))
def test_hit_query_fault_is_a_miss(name, threads_before):
    controller, recorder, pool, operation, *_ = prefetch_with({"batch_exists": EXISTS_FAULTS[name]})
    wait_all(operation)
    controller.close()
    assert operation.hit_pages == 0 and operation.revoked
    assert recorder.calls_of("batch_get_v1") == []
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE)
    check_frees(pool, operation.loaded_host_indices)


@pytest.mark.clause("CTL-11", "CTL-12", "CTL-5", "CTL-6")
def test_hung_read_is_abandoned_and_its_pages_freed_only_after_it_returns(threads_before):
    release = threading.Event()
    entered = threading.Event()

    def hang(call, run):
        entered.set()
        release.wait(30)
        return run()  # a late read still writes its host slots: they must not have been reused

    controller, recorder, pool, operation, source, source_slots = prefetch_with(
        {"batch_get_v1": on_call(1, hang)}, call_deadline=0.3
    )
    wait_all(operation)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128, 0))
    assert operation.final_ack.error == "batch_get_v1 missed its deadline of 0.3 s"
    assert entered.is_set()
    # the unloaded tail waits for the hung call: nothing it may write is reused
    assert pool.used_pages() == PAGES
    release.set()
    assert operation.quiescence.wait(10)
    check_frees(pool, operation.loaded_host_indices)
    check_loaded_bytes(source, source_slots, pool, operation.loaded_host_indices, 128)
    assert controller.close()


@pytest.mark.clause("CTL-11", "CTL-1")
def test_hung_hit_query_is_a_miss(threads_before):
    release = threading.Event()
    controller, recorder, pool, operation, *_ = prefetch_with(
        {"batch_exists": on_call(0, lambda call, run: release.wait(30) and run())}, call_deadline=0.2
    )
    wait_all(operation)
    assert operation.revoked and operation.hit_pages == 0
    release.set()
    assert controller.close()


# ---------------------------------------------------------------- backup
WRITE_FAULTS = {
    "raises on slice 1": (on_call(1, raising()), 128),
    "None on slice 0": (on_call(0, returning(None)), 0),
    "one False on slice 2": (on_call(2, short_by(1)), 256),
    "2N results": (on_call(0, lambda call, run: run() + run()), 0),
    "bare True": (on_call(1, returning(True)), 128),
}


@pytest.mark.clause("CTL-7", "CTL-11", "CTL-13")
@pytest.mark.parametrize("name", list(WRITE_FAULTS))
def test_backup_fault_stops_at_the_failed_slice(name, threads_before):
    fault, completed_pages = WRITE_FAULTS[name]
    pool = make_pool()
    fill_random(pool)
    recorder = FaultingRecorder(memory_backend(), {"batch_set_v1": fault})
    slots = pool.alloc(PAGES)
    with CacheController(recorder, pool) as controller:
        backup = controller.backup(KEYS, slots)
        wait_all(backup)
        check_backup(recorder.calls, backup, PAGE_SIZE, STORAGE_BATCH_SIZE)
        assert backup.completed_tokens == completed_pages * PAGE_SIZE
        recorder.faults.clear()
        wait_all(again := controller.backup(KEYS[:2], slots[: 2 * PAGE_SIZE]))
        assert again.completed_tokens == 2 * PAGE_SIZE
    assert pool.used_pages() == PAGES  # backup never frees the caller's slots


@pytest.mark.clause("CTL-7", "CTL-11")
def test_hung_backup_write_counts_as_failed(threads_before):
    release = threading.Event()
    pool = make_pool()
    recorder = FaultingRecorder(
        memory_backend(), {"batch_set_v1": on_call(1, lambda c, run: release.wait(30) and run())}
    )
    with CacheController(recorder, pool, settings=ControllerSettings(call_deadline=0.2)) as controller:
        backup = controller.backup(KEYS, pool.alloc(PAGES))
        wait_all(backup)
        assert backup.completed_tokens == 128 * PAGE_SIZE
        assert backup.error == "batch_set_v1 missed its deadline of 0.2 s"
        assert not backup.wait_quiescent(0.05)
        release.set()
        assert backup.wait_quiescent(10)
