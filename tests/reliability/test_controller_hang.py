"""A backend call that never returns holds neither a prefetch's final ack nor ``close()`` (CTL-11).

Scenario: the reference controller with its default settings over a
backend whose batch_get_v1 (or batch_exists, or batch_set_v1) blocks until
the test lets it go. Expected: the default per-call deadline is finite;
``close(timeout)`` returns True within the timeout, every operation has its
final ack (carrying the error), the controller's own threads have ended,
and the one thread left inside the backend ends as soon as the backend
returns. The planted controller keeps the old waiting-for-ever close and is
caught.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hicache_reference import CacheController
from hicache_reference.calls import DEFAULT_CALL_DEADLINE, BackendCaller
from hicache_reference.workers import Workers
from hicache_reference.settings import ControllerSettings
from tests.reference.controller_helpers import PAGE_SIZE, FaultingRecorder, keys_for, make_pool, memory_backend, on_call

KEYS = keys_for(300)


def hang_until(release: threading.Event, entered: threading.Event) -> Any:
    def hang(call: Any, run: Any) -> Any:
        entered.set()
        release.wait(60)
        return run()

    return hang


def stored(store: str) -> None:
    writer = memory_backend(store=store)
    pool = make_pool()
    writer.register_mem_pool_host(pool)
    slots = pool.alloc(len(KEYS))
    for start in range(0, len(KEYS), 128):
        end = min(start + 128, len(KEYS))
        assert all(writer.batch_set_v1(list(KEYS[start:end]), slots[start * PAGE_SIZE : end * PAGE_SIZE]))


def test_the_default_call_deadline_is_finite() -> None:
    controller = CacheController(memory_backend(), make_pool(), start=False)
    assert controller.caller.call_deadline == DEFAULT_CALL_DEADLINE == 30.0
    with pytest.raises(ValueError) as raised:
        BackendCaller(object(), float("inf"))
    assert str(raised.value) == (
        "CacheController.call_deadline: must be a finite number of seconds > 0, or None to wait for ever (got inf)"
    )


@pytest.mark.clause("CTL-11", "CTL-6")
@pytest.mark.parametrize("method, call_number", [("batch_get_v1", 1), ("batch_exists", 0), ("batch_set_v1", 0)])
@pytest.mark.parametrize("call_deadline", [DEFAULT_CALL_DEADLINE, None])
def test_a_hung_call_holds_neither_the_final_ack_nor_close(
    method: str, call_number: int, call_deadline: Any, tmp_path: Any, controller_class: type = CacheController
) -> None:
    store = f"hang-{tmp_path.name}-{method}-{call_deadline}"
    stored(store)
    release, entered = threading.Event(), threading.Event()
    recorder = FaultingRecorder(
        memory_backend(store=store), {method: on_call(call_number, hang_until(release, entered))}
    )
    pool = make_pool()
    before = set(threading.enumerate())
    controller = controller_class(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, call_deadline=call_deadline)
    )
    try:
        if method == "batch_set_v1":
            operation = controller.backup(KEYS[:4], pool.alloc(4))
        else:
            operation = controller.prefetch(keys=KEYS)
        assert entered.wait(10)
        started = time.monotonic()
        assert controller.close(timeout=2.0) is True
        assert time.monotonic() - started < 2.5
        if method == "batch_set_v1":
            assert operation.wait(1) and operation.error == "batch_set_v1 abandoned: the controller is closing"
            assert operation.completed_tokens == 0
        else:
            assert operation.final_ack is not None
            expected = "revoked: miss" if method == "batch_exists" else f"{method} abandoned: the controller is closing"
            assert operation.final_ack.error == expected  # a hit query that never answers is a miss (CTL-1)
        left = [thread for thread in set(threading.enumerate()) - before if thread.is_alive()]
        assert [thread.name for thread in left] == [
            f"hicache-call-{name}"
            for name in (
                {
                    "batch_get_v1": "hicache-prefetch-io",
                    "batch_exists": "hicache-hit-query",
                    "batch_set_v1": "hicache-backup",
                }[method],
            )
        ]  # only the call still inside the backend
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(thread.is_alive() for thread in set(threading.enumerate()) - before):
        time.sleep(0.01)
    assert [thread for thread in set(threading.enumerate()) - before if thread.is_alive()] == []


class JoinsForEver(Workers):
    """The old close(): joins the workers for the whole timeout and never abandons a call."""

    def close(self, timeout: Any = 10.0) -> bool:
        threads = self._stop_accepting()
        if threads is None:
            return True
        for thread in threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in threads)


WaitsForEver = CacheController.with_parts(JoinsForEver, name="WaitsForEver")


def test_planted_close_that_waits_for_the_hung_call_is_caught(tmp_path: Any) -> None:
    with pytest.raises(AssertionError):
        test_a_hung_call_holds_neither_the_final_ack_nor_close(
            "batch_get_v1", 1, DEFAULT_CALL_DEADLINE, tmp_path, controller_class=WaitsForEver
        )
