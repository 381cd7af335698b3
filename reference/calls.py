"""Calling a backend the controller cannot trust: errors, bad results and deadlines (CTL-11).

``BackendCaller.call(method, *args)`` returns a ``CallOutcome``: the result,
or why there is none. It never raises for the backend's sake:

- an exception from the backend becomes ``error="batch_get_v1 raised ..."``;
- with a deadline (``call_deadline`` seconds), the call runs on its own
  thread; one that has not returned in time is *abandoned*: the outcome says
  it missed its deadline, and the operation's ``quiescence`` counts it until
  it returns, so that host slots it may still write are freed only then
  (CTL-12). Abandoned threads are tracked and joined by ``close``.

The validators turn whatever came back into what the controller may count,
from the first entry that is not a confirmed success on (CTL-11):

- ``confirmed_pages(result, count)``: a v1 result must be a ``list`` of
  exactly ``count`` entries; the pages counted are the leading run of
  entries that are ``True`` itself (so ``1``, ``"yes"`` or ``None`` stop it);
- ``confirmed_exists(result, count)``: ``batch_exists`` must give an ``int``
  (not a ``bool``) in ``[0, count]``, else 0;
- ``confirmed_pool_pages(result, name, count)``: a v2 result must be a
  mapping with an entry for the pool (by value or enum member) that passes
  ``confirmed_pages``; a missing pool is 0 (HYB-4);
- ``confirmed_kv_hit(result, count)``: ``batch_exists_v2`` must give an
  object whose ``kv_hit_pages`` is an ``int`` in ``[0, count]``, else 0.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Optional

from hicache_spec import count_leading_run

__all__ = [
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


class _PendingCall:
    """A backend call on its own thread, which the caller may abandon at its deadline."""

    def __init__(self, function: Callable[..., Any], arguments: tuple, label: str) -> None:
        self._function = function
        self._arguments = arguments
        self._label = label
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._abandoned = False
        self._on_return_after_abandon: Optional[Callable[[], None]] = None
        self.outcome = CallOutcome(error=f"{label} did not return")
        self.thread = threading.Thread(target=self._run, name=f"hicache-call-{label}", daemon=True)

    def _run(self) -> None:
        try:
            outcome = CallOutcome(result=self._function(*self._arguments))
        except Exception as error:  # CTL-11: the backend's failure is a result, never a dead thread
            outcome = CallOutcome(error=f"{self._label} raised {type(error).__name__}: {error}")
        with self._lock:
            self.outcome = outcome
            self._finished.set()
            callback = self._on_return_after_abandon if self._abandoned else None
        if callback is not None:
            callback()

    def wait(self, deadline: float, on_return_after_abandon: Callable[[], None]) -> Optional[CallOutcome]:
        """Return the outcome, or None after abandoning a call that missed ``deadline`` seconds."""
        self._finished.wait(deadline)
        with self._lock:
            if self._finished.is_set():
                return self.outcome
            self._abandoned = True
            self._on_return_after_abandon = on_return_after_abandon
            return None


class BackendCaller:
    """Runs backend methods, turning exceptions and missed deadlines into ``CallOutcome`` errors."""

    def __init__(self, backend: Any, call_deadline: Optional[float] = None) -> None:
        if call_deadline is not None and (
            isinstance(call_deadline, bool) or not isinstance(call_deadline, (int, float)) or not call_deadline > 0
        ):
            raise ValueError(f"CacheController.call_deadline: must be None or a number > 0 (got {call_deadline!r})")
        self.backend = backend
        self.call_deadline = call_deadline
        """Seconds a backend call may take before it is abandoned; None waits for ever."""
        self._lock = threading.Lock()
        self._abandoned_threads: set[threading.Thread] = set()

    def call(self, method: str, *arguments: Any, quiescence: Any = None) -> CallOutcome:
        """Call ``backend.<method>(*arguments)``; never raise for the backend. Clause: CTL-11.

        ``quiescence`` (an operation's) counts the call while it is abandoned.
        """
        function = getattr(self.backend, method, None)
        if function is None or not callable(function):
            return CallOutcome(error=f"backend has no method {method}")
        if self.call_deadline is None:
            try:
                return CallOutcome(result=function(*arguments))
            except Exception as error:  # CTL-11
                return CallOutcome(error=f"{method} raised {type(error).__name__}: {error}")
        pending = _PendingCall(function, arguments, method)
        pending.thread.start()
        if quiescence is not None:
            quiescence.begin_call()  # counted until the call really returns, in time or late

        def returned_late() -> None:
            with self._lock:
                self._abandoned_threads.discard(pending.thread)
            if quiescence is not None:
                quiescence.returned()

        outcome = pending.wait(self.call_deadline, returned_late)
        if outcome is None:
            with self._lock:
                if pending.thread.is_alive():
                    self._abandoned_threads.add(pending.thread)
            return CallOutcome(error=f"{method} missed its deadline of {self.call_deadline} s")
        pending.thread.join()
        if quiescence is not None:
            quiescence.returned()
        return outcome

    def abandoned_threads(self) -> list[threading.Thread]:
        """Threads of abandoned calls that have not returned yet."""
        with self._lock:
            return [thread for thread in self._abandoned_threads if thread.is_alive()]


# ---------------------------------------------------------------- validators
def confirmed_pages(result: Any, count: int) -> int:
    """Return how many leading pages a v1-style result confirms. Clauses: CTL-11, BE-14.

    Anything but a list of exactly ``count`` entries confirms nothing; within
    such a list, counting stops at the first entry that is not ``True``.
    """
    if type(result) is not list or len(result) != count:
        return 0
    return count_leading_run(tuple(entry is True for entry in result))


def confirmed_exists(result: Any, count: int) -> int:
    """Return the hit a ``batch_exists`` result confirms: an int in [0, count], else 0. Clauses: CTL-11, BE-2."""
    if type(result) is int and 0 <= result <= count:
        return result
    return 0


def _pool_entry(result: Mapping, name: Any) -> Any:
    value = name.value if isinstance(name, Enum) else name
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
    hit = getattr(result, "kv_hit_pages", None)
    if type(hit) is int and 0 <= hit <= count:
        return hit
    return 0
