"""Calling a backend the controller cannot trust: errors, bad results and deadlines (CTL-11).

``BackendCaller.call(method, *args)`` returns a ``CallOutcome``: the result,
or why there is none. It never raises for the backend's sake:

- an exception from the backend becomes ``error="batch_get_v1 raised ..."``,
  at once, whatever its class: ``BaseException`` included
  (``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit``,
  ``GeneratorExit``), so a call never waits for its deadline because the
  backend raised something other than an ``Exception``;
- a ``KeyboardInterrupt`` or ``SystemExit`` from the backend asks for the
  process to stop, which no call thread can do: the caller keeps the first
  one (``stop_request``), the operation still ends with its final ack like
  any failed call, and ``CacheController.close()`` re-raises it once every
  operation has its acks and the threads have stopped (raising it from a
  worker or call thread would only kill that thread and lose the acks);
- the call runs on a call thread of the calling thread (reused from call
  to call) and is waited on for ``call_deadline`` seconds
  (``DEFAULT_CALL_DEADLINE`` unless told; None waits for ever); one that
  has not returned in time, or is still running when the controller closes
  (``abandon_calls``), is *abandoned*: the outcome says so, the call thread
  is left to the backend (it ends when the call returns), and the
  operation's ``quiescence`` counts the call until it returns, so that host
  slots it may still write are freed only then (CTL-12).

The validators turn whatever came back into what the controller may count,
from the first entry that is not a confirmed success on (CTL-11):

- ``confirmed_pages(result, count)``: a v1 result must be a ``list`` of
  exactly ``count`` entries; the pages counted are the leading run of
  entries that are a true flag, ``True`` or numpy's (so ``1``, ``"yes"`` or
  ``None`` stop it);
- ``confirmed_exists(result, count)``: ``batch_exists`` must give a count in
  ``[0, count]`` as SGLang reads one (an int, a bool, numpy's integers),
  else 0;
- ``confirmed_pool_pages(result, name, count)``: a v2 result must be a
  mapping with an entry for the pool (by value or enum member) that passes
  ``confirmed_pages``; a missing pool is 0 (HYB-4);
- ``confirmed_kv_hit(result, count)``: ``batch_exists_v2`` must give an
  object whose ``kv_hit_pages`` is an ``int`` in ``[0, count]``, else 0.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Optional

from hicache_contracts.models import pool_value
from hicache_spec.confirmation import confirmed_hit
from hicache_spec.confirmation import confirmed_pages as spec_confirmed_pages

__all__ = [
    "DEFAULT_CALL_DEADLINE",
    "STOP_REQUESTS",
    "BackendCaller",
    "CallOutcome",
    "confirmed_exists",
    "confirmed_kv_hit",
    "confirmed_pages",
    "confirmed_pool_pages",
]


@dataclass(frozen=True)
class CallOutcome:
    """What one backend call gave: its result, or the reason there is none."""

    result: Any = None
    """What the backend returned (None when it raised or missed its deadline)."""
    error: Optional[str] = None
    """None when the call returned; otherwise why its result must not be used."""

    @property
    def returned(self) -> bool:
        return self.error is None


DEFAULT_CALL_DEADLINE = 30.0
"""Seconds a backend call may take before the controller abandons it (CTL-11), unless told otherwise.

SGLang waits for ever; a backend that never returns then holds its thread,
the prefetch never gets its final ack and the controller cannot close. A
healthy call takes milliseconds (a 128-page slice is a few MB to a few
hundred MB); 30 s is ten times the prefetch budget SGLang's default timeout
gives a full slice of 64-token pages (1 s + 8 Ki tokens x 0.25 s), so a slow
but working backend is never cut off, while a hung one costs one deadline,
not the process."""
STOP_REQUESTS = (KeyboardInterrupt, SystemExit)
"""Exceptions from a backend that ask for the process to stop: the call fails, and ``close()`` re-raises the first."""
_CLOSING_POLL_S = 0.05
"""How often a call that is waited on looks whether the controller started closing."""


class _PendingCall:
    """One backend call handed to a ``_CallThread``: its outcome, and what to do if it returns after being abandoned."""

    def __init__(self, function: Callable[..., Any], arguments: tuple, label: str) -> None:
        self.function = function
        self.arguments = arguments
        self.label = label
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.abandoned = False
        self.on_return_after_abandon: Optional[Callable[[], None]] = None
        self.outcome = CallOutcome(error=f"{label} did not return")

    def run(self, on_stop_request: Callable[[BaseException], None]) -> None:
        try:
            outcome = CallOutcome(result=self.function(*self.arguments))
        except BaseException as error:  # CTL-11: any failure is the call's result at once, never a dead thread
            outcome = CallOutcome(error=f"{self.label} raised {type(error).__name__}: {error}")
            if isinstance(error, STOP_REQUESTS):
                on_stop_request(error)  # re-raised by close() once the acks are sent
        with self.lock:
            self.outcome = outcome
            self.finished.set()
            callback = self.on_return_after_abandon if self.abandoned else None
        if callback is not None:
            callback()

    def wait(
        self, deadline: Optional[float], closing: threading.Event, on_return_after_abandon: Callable[[], None]
    ) -> Optional[CallOutcome]:
        """Return the outcome, or None after abandoning a call that missed ``deadline`` seconds (None: no deadline)
        or was still running when the controller started closing."""
        end = None if deadline is None else time.monotonic() + deadline
        while not self.finished.is_set() and not closing.is_set():
            left = _CLOSING_POLL_S if end is None else min(_CLOSING_POLL_S, end - time.monotonic())
            if left <= 0:
                break
            self.finished.wait(left)
        with self.lock:
            if self.finished.is_set():
                return self.outcome
            self.abandoned = True
            self.on_return_after_abandon = on_return_after_abandon
            return None


class _CallThread:
    """A thread that runs one calling thread's backend calls, one at a time, so each can be waited on with a deadline.

    Reused from call to call (a new thread per call would cost more than many
    calls do); once a call on it is abandoned it is the backend's: it finishes
    that call and ends.
    """

    def __init__(self, name: str, on_stop_request: Callable[[BaseException], None]) -> None:
        self._on_stop_request = on_stop_request
        self._queue: queue.SimpleQueue[Optional[_PendingCall]] = queue.SimpleQueue()
        self.stuck = False
        """Whether a call on it was abandoned (it ends once that call returns)."""
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def submit(self, pending: _PendingCall) -> None:
        self._queue.put(pending)

    def stop(self) -> None:
        """Let the thread end once it is idle."""
        self._queue.put(None)

    def _serve(self) -> None:
        while True:
            pending = self._queue.get()
            if pending is None:
                return
            pending.run(self._on_stop_request)
            if pending.abandoned:
                return  # abandoned: its caller has a new thread by now


class BackendCaller:
    """Runs backend methods, turning exceptions and missed deadlines into ``CallOutcome`` errors."""

    def __init__(self, backend: Any, call_deadline: Optional[float] = DEFAULT_CALL_DEADLINE) -> None:
        if call_deadline is not None and (
            isinstance(call_deadline, bool)
            or not isinstance(call_deadline, (int, float))
            or not 0 < call_deadline < float("inf")
        ):
            raise ValueError(
                "CacheController.call_deadline: must be a finite number of seconds > 0, or None to wait "
                f"for ever (got {call_deadline!r})"
            )
        self.backend = backend
        self.call_deadline = call_deadline
        """Seconds a backend call may take before it is abandoned; None waits for ever (as SGLang does)."""
        self._lock = threading.Lock()
        self._abandoned_threads: set[threading.Thread] = set()
        self._call_threads: dict[int, _CallThread] = {}
        self._closing = threading.Event()
        self._stop_request: Optional[BaseException] = None

    @property
    def stop_request(self) -> Optional[BaseException]:
        """The first ``KeyboardInterrupt`` or ``SystemExit`` a backend call raised and nobody re-raised yet (else None)."""
        return self._stop_request

    def _record_stop_request(self, error: BaseException) -> None:
        with self._lock:
            if self._stop_request is None:
                self._stop_request = error

    def take_stop_request(self) -> Optional[BaseException]:
        """Return the recorded stop request and forget it (so it is re-raised once)."""
        with self._lock:
            error, self._stop_request = self._stop_request, None
            return error

    def call(self, method: str, *arguments: Any, quiescence: Any = None) -> CallOutcome:
        """Call ``backend.<method>(*arguments)``; never raise for the backend. Clause: CTL-11.

        ``quiescence`` (an operation's) counts the call while it is abandoned.
        Once ``abandon_calls`` was called, no backend method is called any more.
        """
        function = getattr(self.backend, method, None)
        if function is None or not callable(function):
            return CallOutcome(error=f"backend has no method {method}")
        if self._closing.is_set():
            return CallOutcome(error=f"{method} not called: the controller is closing")
        pending = _PendingCall(function, arguments, method)
        runner = self._call_thread()
        runner.submit(pending)
        if quiescence is not None:
            quiescence.begin_call()  # counted until the call really returns, in time or late

        def returned_late() -> None:
            with self._lock:
                self._abandoned_threads.discard(runner.thread)
            if quiescence is not None:
                quiescence.returned()

        outcome = pending.wait(self.call_deadline, self._closing, returned_late)
        if outcome is None:
            with self._lock:
                runner.stuck = True
                self._call_threads.pop(threading.get_ident(), None)
                if runner.thread.is_alive():
                    self._abandoned_threads.add(runner.thread)
            if self._closing.is_set():
                return CallOutcome(error=f"{method} abandoned: the controller is closing")
            return CallOutcome(error=f"{method} missed its deadline of {self.call_deadline} s")
        if quiescence is not None:
            quiescence.returned()
        return outcome

    def _call_thread(self) -> _CallThread:
        """Return the calling thread's call thread, made on first use."""
        ident = threading.get_ident()
        with self._lock:
            runner = self._call_threads.get(ident)
            if runner is None:
                name = f"hicache-call-{threading.current_thread().name}"
                runner = self._call_threads[ident] = _CallThread(name, self._record_stop_request)
            return runner

    def abandon_calls(self) -> None:
        """Abandon every call under way now, and call nothing from now on (the controller is closing)."""
        self._closing.set()

    def reopen(self) -> None:
        """Call the backend again (after ``abandon_calls``, when the controller starts again)."""
        self._closing.clear()

    def stop_call_threads(self, timeout: Optional[float] = None) -> bool:
        """End every idle call thread; return whether they all ended within ``timeout`` (stuck ones do not count)."""
        with self._lock:
            runners = list(self._call_threads.values())
            self._call_threads.clear()
        for runner in runners:
            runner.stop()
        end = None if timeout is None else time.monotonic() + timeout
        for runner in runners:
            runner.thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return not any(runner.thread.is_alive() for runner in runners)

    def abandoned_threads(self) -> list[threading.Thread]:
        """Threads of abandoned calls that have not returned yet."""
        with self._lock:
            return [thread for thread in self._abandoned_threads if thread.is_alive()]


# ---------------------------------------------------------------- validators
def confirmed_pages(result: Any, count: int) -> int:
    """Return how many leading pages a v1-style result confirms. Clauses: CTL-11, BE-14.

    Anything but a list of exactly ``count`` entries confirms nothing; within
    such a list, counting stops at the first entry that is not a true flag.
    """
    return spec_confirmed_pages(result, count)


def confirmed_exists(result: Any, count: int) -> int:
    """Return the hit a ``batch_exists`` result confirms: a count in [0, count], else 0. Clauses: CTL-11, BE-2."""
    return confirmed_hit(result, count)


def _pool_entry(result: Mapping, name: Any) -> Any:
    value = pool_value(name)
    if value in result:
        return result[value]
    if name in result:
        return result[name]
    for key in result:  # a result keyed by another enum type (SGLang's PoolName)
        if isinstance(key, Enum) and key.value == value:
            return result[key]
    return None


def confirmed_pool_pages(result: Any, name: Any, count: int) -> int:
    """Return how many leading pages a v2 result confirms for pool ``name``; a missing pool is 0. Clauses: CTL-11, HYB-4, BE-19."""
    if not isinstance(result, Mapping):
        return 0
    return confirmed_pages(_pool_entry(result, name), count)


def confirmed_kv_hit(result: Any, count: int) -> int:
    """Return the folded hit a ``batch_exists_v2`` result confirms: ``kv_hit_pages`` in [0, count], else 0. Clauses: CTL-11, BE-21."""
    return confirmed_hit(getattr(result, "kv_hit_pages", None), count)
