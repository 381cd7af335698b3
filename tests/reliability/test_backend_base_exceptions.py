"""Any exception from a backend call is that call's failure at once, ``BaseException`` included (CTL-11).

Scenario: the reference controller over a backend whose batch_get_v1,
batch_exists or batch_set_v1 raises ``asyncio.CancelledError``,
``KeyboardInterrupt``, ``SystemExit`` or ``GeneratorExit`` (a
``RuntimeError`` is the baseline). The calls wait with no deadline at all,
so the operation can end before ``close()`` only if the raise itself ended
the call: there is no deadline path to take. Expected: the operation ends
with its final ack carrying the whole message, no call is abandoned, the
worker threads live on (the next prefetch completes), and a
``KeyboardInterrupt`` or ``SystemExit`` is re-raised by ``close()``, once,
after the acks. The planted call wrapper that catches only ``Exception``
is caught.

Why this matters: with the old wrapper each such prefetch took the whole
30 s deadline and blocked the queue; with no deadline its final ack never
came before ``close()``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional, Union

import pytest

from hicache_reference import CacheController
from hicache_reference import calls as calls_module
from hicache_reference.calls import BackendCaller, CallOutcome
from hicache_reference.operations import BackupOperation, PrefetchOperation
from hicache_reference.settings import ControllerSettings
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    keys_for,
    make_pool,
    memory_backend,
    on_call,
    raising,
    store_pages,
)

KEYS = keys_for(300)
LIVENESS_S = 20.0
"""A bound for waits that only a hang would reach; no assertion depends on how fast a call failed."""
ERRORS = [asyncio.CancelledError, KeyboardInterrupt, SystemExit, GeneratorExit, RuntimeError]
STOPS = (KeyboardInterrupt, SystemExit)


class Raises:
    """A bare backend method that raises ``error`` and counts its calls."""

    def __init__(self, error: type) -> None:
        self.error = error
        self.calls = 0

    def batch_exists(self, keys: Any) -> int:
        self.calls += 1
        raise self.error("planted storage failure")


@pytest.mark.clause("CTL-11")
@pytest.mark.parametrize("error", ERRORS, ids=lambda error: error.__name__)
def test_the_call_wrapper_turns_any_exception_into_the_calls_failure(error: type) -> None:
    backend = Raises(error)
    caller = BackendCaller(backend, call_deadline=None)  # no deadline: only the raise can end the call
    outcome = _bounded(lambda: caller.call("batch_exists", ["a"]))
    assert outcome == CallOutcome(error=f"batch_exists raised {error.__name__}: planted storage failure")
    assert backend.calls == 1 and caller.abandoned_threads() == []
    if error in STOPS:
        assert isinstance(caller.stop_request, error)
        assert isinstance(caller.take_stop_request(), error) and caller.stop_request is None
    else:
        assert caller.stop_request is None
    # the call thread survived: the next call runs on it
    assert _bounded(lambda: caller.call("batch_exists", ["b"])).error is not None and backend.calls == 2
    assert caller.stop_call_threads(LIVENESS_S)


def _bounded(function: Any) -> Any:
    """Run ``function`` on a helper thread; fail (instead of hanging the suite) if it never returns."""
    box: list = []
    thread = threading.Thread(target=lambda: box.append(function()), daemon=True)
    thread.start()
    thread.join(LIVENESS_S)
    assert box, "the call never returned: the exception was treated as a hang"
    return box[0]


EXPECTED_ACK = {
    "batch_get_v1": "batch_get_v1 raised {name}: planted storage failure",
    "batch_exists": "revoked: miss",  # a hit query that fails is a miss (CTL-1)
    "batch_set_v1": "batch_set_v1 raised {name}: planted storage failure",
}


@pytest.mark.clause("CTL-11", "CTL-6")
@pytest.mark.parametrize("method, call_number", [("batch_get_v1", 1), ("batch_exists", 0), ("batch_set_v1", 0)])
@pytest.mark.parametrize("error", ERRORS, ids=lambda error: error.__name__)
def test_a_base_exception_fails_the_call_at_once_and_stops_only_after_the_acks(
    method: str, call_number: int, error: type, call_deadline: Optional[float] = None
) -> None:
    writer = memory_backend()
    store_pages(writer, make_pool(), KEYS)
    recorder = FaultingRecorder(memory_backend(store=writer.store), {method: on_call(call_number, raising(error))})
    pool = make_pool()
    controller = CacheController(
        recorder, pool, settings=ControllerSettings(prefetch_threshold=0, call_deadline=call_deadline)
    )
    operation: Union[BackupOperation, PrefetchOperation]
    try:
        if method == "batch_set_v1":
            operation = controller.backup(KEYS[:4], pool.alloc(4))
        else:
            operation = controller.prefetch(keys=KEYS)
        # before close(): with no deadline, only the raise can have ended the call
        assert operation.wait(LIVENESS_S), f"{error.__name__} from {method} was treated as a hang"
        assert controller.caller.abandoned_threads() == []
        if method == "batch_set_v1":
            assert isinstance(operation, BackupOperation)
            assert operation.error == EXPECTED_ACK[method].format(name=error.__name__)
            assert operation.completed_tokens == 0
        else:
            assert isinstance(operation, PrefetchOperation)
            assert operation.final_ack is not None
            assert operation.final_ack.error == EXPECTED_ACK[method].format(name=error.__name__)
            if method == "batch_get_v1":
                assert operation.loaded_tokens == 128 * PAGE_SIZE  # the slice before the failure stays loaded
        # the threads live on: the next prefetch completes with every page
        recorder.faults.clear()
        again = controller.prefetch(keys=KEYS[:3])
        assert again.wait(LIVENESS_S) and again.loaded_tokens == 3 * PAGE_SIZE
        if error in STOPS:
            assert isinstance(controller.stop_request, error)
            with pytest.raises(error) as raised:
                controller.close(timeout=LIVENESS_S)
            assert str(raised.value) == "planted storage failure"
            assert not controller.running and all(not thread.is_alive() for thread in controller._threads)
        else:
            assert controller.stop_request is None
        assert controller.close(timeout=LIVENESS_S) is True  # re-raised once only
        assert controller.internal_errors == []
    finally:
        recorder.faults.clear()
        try:
            controller.close(timeout=LIVENESS_S)
        except STOPS:
            pass


def _catches_only_exception(self: Any, on_stop_request: Any) -> None:
    """The old wrapper: a BaseException escapes, the call thread dies, the outcome never comes."""
    try:
        outcome = CallOutcome(result=self.function(*self.arguments))
    except Exception as error:
        outcome = CallOutcome(error=f"{self.label} raised {type(error).__name__}: {error}")
    with self.lock:
        self.outcome = outcome
        self.finished.set()


def test_planted_wrapper_catching_only_exception_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls_module._PendingCall, "run", _catches_only_exception)
    monkeypatch.setattr(threading, "excepthook", lambda arguments: None)  # the dying call thread's report
    with pytest.raises(AssertionError) as raised:
        # a short deadline keeps the planted run short: it ends on the deadline path
        test_a_base_exception_fails_the_call_at_once_and_stops_only_after_the_acks(
            "batch_get_v1", 1, asyncio.CancelledError, call_deadline=0.5
        )
    assert "batch_get_v1 missed its deadline of 0.5 s" in str(raised.value)
