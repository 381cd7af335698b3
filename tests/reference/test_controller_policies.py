"""Prefetch policies with a hand-moved clock: best_effort, wait_complete and timeout (CTL-9, CTL-10, CTL-14).

Termination is requested, or the clock moved, from inside a backend call, so
each scenario is deterministic: the controller checks its policy before
every slice it reads.
"""

from __future__ import annotations

import threading

import pytest

from hicache_reference import CacheController
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE, compute_prefetch_timeout
from tests.reference.controller_checks import check_frees, check_prefetch_acks
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FakeClock,
    FaultingRecorder,
    keys_for,
    make_pool,
    memory_backend,
    wait_all,
)

PAGES = 300
KEYS = keys_for(PAGES)
TOKENS = PAGES * PAGE_SIZE


def stored_store():
    pool = make_pool()
    backend = memory_backend()
    backend.register_mem_pool_host(pool)
    slots = pool.alloc(PAGES)
    for start in range(0, PAGES, STORAGE_BATCH_SIZE):
        end = min(start + STORAGE_BATCH_SIZE, PAGES)
        backend.batch_set_v1(list(KEYS[start:end]), slots[start * PAGE_SIZE : end * PAGE_SIZE])
    return backend.store


def run_policy(policy, on_read, clock=None, **settings):
    """Prefetch KEYS under ``policy``; ``on_read(operation, clock)`` runs inside every KV read."""
    clock = clock or FakeClock()
    holder = {}

    def read(call, run):
        on_read(holder["operation"], clock)
        return run()

    recorder = FaultingRecorder(memory_backend(store=stored_store()), {"batch_get_v1": read})
    pool = make_pool()
    gate = threading.Event()
    recorder.faults["batch_exists"] = lambda call, run: gate.wait(10) and run()
    with CacheController(
        recorder, pool, clock=clock, settings=ControllerSettings(prefetch_threshold=0, **settings)
    ) as controller:
        operation = controller.prefetch(keys=KEYS, policy=policy)
        holder["operation"] = operation
        gate.set()
        wait_all(operation)
    check_frees(pool, operation.loaded_host_indices)
    return operation, recorder


def terminate_on_first_read(operation, clock):
    operation.terminate()


@pytest.mark.clause("CTL-9", "CTL-5", "CTL-6")
def test_best_effort_stops_before_the_next_slice():
    operation, recorder = run_policy("best_effort", terminate_on_first_read)
    assert len(recorder.calls_of("batch_get_v1")) == 1
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128,))
    assert operation.terminated and operation.final_ack.error == "terminated"


@pytest.mark.clause("CTL-9")
def test_wait_complete_ignores_termination():
    operation, recorder = run_policy("wait_complete", terminate_on_first_read)
    assert len(recorder.calls_of("batch_get_v1")) == 3
    assert operation.loaded_tokens == TOKENS and not operation.terminated
    assert operation.final_ack.error is None


@pytest.mark.clause("CTL-9", "CTL-10")
def test_timeout_ignores_requests_before_the_deadline():
    operation, recorder = run_policy("timeout", terminate_on_first_read)
    assert operation.loaded_tokens == TOKENS and not operation.terminated


@pytest.mark.clause("CTL-9", "CTL-14")
@pytest.mark.parametrize("step,reads", [(0.3, 3), (0.5, 3), (1.0, 2), (1.5, 1), (2.1, 1)])
def test_timeout_terminates_once_the_timeout_passed(step, reads):
    """Each read moves the clock by ``step``; the default timeout of a 600-token span is 1.0 + 0.25 * 600 / 1024 s."""
    operation, recorder = run_policy("timeout", lambda operation, clock: clock.advance(step))
    timeout = compute_prefetch_timeout(TOKENS)
    assert timeout == pytest.approx(1.0 + 0.25 * TOKENS / 1024)  # CTL-14: no maximum
    assert operation.deadline == pytest.approx(operation.submitted_at + timeout)
    assert len(recorder.calls_of("batch_get_v1")) == reads
    assert operation.terminated is (reads < 3)
    check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE, loaded_pages=(128, 128, 44)[:reads])


@pytest.mark.clause("CTL-10", "CTL-14")
@pytest.mark.parametrize(
    "base,per_ki,maximum",
    [(1.0, 2.0, 3.0), (1.0, 2.0, 1.5), (0.0, 0.0, 0.0), (2.0, 0.1, 30.0), (1.0, 2.0, None), (0.5, 0.0, None)],
)
def test_timeout_setting_gives_the_deadline(base, per_ki, maximum):
    """The deadline follows the requested span; a maximum (0.5.20's cap) bounds it, None (0.5.21+) does not."""
    operation, _ = run_policy(
        "timeout",
        lambda operation, clock: None,
        prefetch_timeout_base=base,
        prefetch_timeout_per_ki_token=per_ki,
        prefetch_timeout_max=maximum,
    )
    linear = base + per_ki * TOKENS / 1024
    assert operation.deadline == pytest.approx(linear if maximum is None else min(maximum, linear))


@pytest.mark.clause("CTL-14")
def test_timeout_follows_the_requested_span_not_the_hit():
    """Half the span stored: the deadline is still that of the whole requested span."""
    recorder = FaultingRecorder(memory_backend(store=stored_store()))
    with CacheController(
        recorder, make_pool(), clock=FakeClock(), settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        longer = keys_for(PAGES * 2)
        assert longer[:PAGES] == KEYS
        operation = controller.prefetch(keys=longer, policy="timeout")
        wait_all(operation)
    assert operation.hit_pages == PAGES
    assert operation.deadline == pytest.approx(operation.submitted_at + compute_prefetch_timeout(2 * TOKENS))


@pytest.mark.clause("CTL-9", "RANK-1")
def test_best_effort_termination_before_the_hit_query_revokes():
    release = threading.Event()
    recorder = FaultingRecorder(memory_backend(store=stored_store()))
    recorder.faults["batch_exists"] = lambda call, run: release.wait(10) and run()
    pool = make_pool()
    with CacheController(recorder, pool, settings=ControllerSettings(prefetch_threshold=0)) as controller:
        first = controller.prefetch(keys=KEYS[:1])
        second = controller.prefetch(keys=KEYS)
        second.terminate()
        release.set()
        wait_all(first, second)
    assert second.revoked and second.hit_pages == 0
    assert [call.keys for call in recorder.calls_of("batch_exists")] == [KEYS[:1]]
    check_prefetch_acks(second, PAGE_SIZE, STORAGE_BATCH_SIZE)


def test_bad_timeout_setting_is_rejected():
    with pytest.raises(
        ValueError, match=r"ControllerSettings.prefetch_timeout_base: must be a number >= 0 \(got -1\) \[CTL-14\]"
    ):
        CacheController(
            memory_backend(), make_pool(), start=False, settings=ControllerSettings(prefetch_timeout_base=-1)
        )
