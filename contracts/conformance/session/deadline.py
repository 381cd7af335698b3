"""Backend calls under a deadline: a call that blocks fails its clause instead of hanging the run.

Each thread that calls the backend gets one helper thread (a daemon) that
makes the calls for it; the caller waits on the result at most ``timeout_s``
seconds. A call past its deadline leaves its helper blocked inside the
backend: that helper is abandoned (it is a daemon, so it never keeps the
process alive) and the next call gets a fresh one.

    runner = DeadlineRunner()
    finished, value = runner.run(backend.batch_exists, (keys, None), {}, timeout_s=60.0)

The helper drops every reference to a call's arguments and result as soon as
the call returns, so a check that watches whether a backend keeps an object
(PFX-6) sees only what the backend keeps.

A ``KeyboardInterrupt`` is a Ctrl-C, or something a backend raised.
``watching_interrupts()`` tells them apart while it is active: its SIGINT
handler notes each signal, so ``raised_by_backend()`` is True for a
``KeyboardInterrupt`` no signal caused (the runner then fails the check
instead of ending the run). Without it every ``KeyboardInterrupt`` counts as
a Ctrl-C.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from typing import Any, Callable, Iterator, Optional

__all__ = ["DeadlineRunner", "raised_by_backend", "watching_interrupts"]

_watch = {"active": False, "signalled": False}
"""Whether ``watching_interrupts`` is active, and whether a SIGINT arrived since it began."""


def raised_by_backend() -> bool:
    """Whether a ``KeyboardInterrupt`` seen now was raised by a backend: interrupts are watched and no SIGINT came."""
    return _watch["active"] and not _watch["signalled"]


def _on_sigint(signum: int, frame: Any) -> None:
    _watch["signalled"] = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def watching_interrupts() -> Iterator[None]:
    """Note every SIGINT while active (in the main thread only; elsewhere nothing is watched)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _watch.update(active=True, signalled=False)
    try:
        yield
    finally:
        _watch.update(active=False, signalled=False)
        if signal.getsignal(signal.SIGINT) is _on_sigint:
            signal.signal(signal.SIGINT, previous)


class _Job:
    """One call handed to a helper thread, and what came out of it."""

    __slots__ = ("function", "args", "kwargs", "done", "value", "error")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.function: Optional[Callable[..., Any]] = function
        self.args: Optional[tuple[Any, ...]] = args
        self.kwargs: Optional[dict[str, Any]] = kwargs
        self.done = threading.Event()
        self.value: Any = None
        self.error: Optional[BaseException] = None


def _serve(jobs: queue.SimpleQueue[Optional[_Job]]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        function, args, kwargs = job.function, job.args, job.kwargs
        job.function = job.args = job.kwargs = None
        assert function is not None and args is not None and kwargs is not None  # each job is served once
        try:
            job.value = function(*args, **kwargs)
        except BaseException as error:  # handed back to the caller, which decides
            job.error = error
        del function, args, kwargs
        job.done.set()
        del job


class DeadlineRunner:
    """Runs calls on a per-caller helper thread and waits for each at most its deadline."""

    def __init__(self, name: str = "hicache-conform-call") -> None:
        self._name = name
        self._local = threading.local()
        self._count = 0
        self._lock = threading.Lock()

    def _helper(self) -> queue.SimpleQueue[Optional[_Job]]:
        jobs = getattr(self._local, "jobs", None)
        if jobs is None:
            jobs = queue.SimpleQueue()
            with self._lock:
                self._count += 1
                number = self._count
            threading.Thread(target=_serve, args=(jobs,), name=f"{self._name}-{number}", daemon=True).start()
            self._local.jobs = jobs
        return jobs

    def run(
        self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float
    ) -> tuple[bool, Any]:
        """Call ``function(*args, **kwargs)``; return ``(True, value)``, or ``(False, None)`` past ``timeout_s``.

        An exception out of the call is raised here, in the caller's thread; so is the TypeError of a
        ``function`` that is not callable (a backend method set to None, say), at once.
        """
        if not callable(function):
            raise TypeError(f"{function!r} is not callable")
        job = _Job(function, args, kwargs)
        del args, kwargs
        self._helper().put(job)
        if not job.done.wait(timeout_s):
            self._local.jobs = None  # that helper is stuck inside the backend: abandon it
            return False, None
        error, value = job.error, job.value
        job.error = job.value = None
        if error is not None:
            try:
                raise error
            finally:
                del error
        return True, value

    def close(self) -> None:
        """Let the calling thread's helper end (a stuck helper ends when its call does)."""
        jobs = getattr(self._local, "jobs", None)
        if jobs is not None:
            jobs.put(None)
            self._local.jobs = None
