"""The reference controller's threads: hit query, prefetch IO and backup, each fed by its own queue.

Operations are processed in submission order, so every rank runs the same
collectives in the same order. See docs/controller.md.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Optional

from hicache_reference.calls import BackendCaller

__all__ = ["STOP", "Workers"]

STOP = object()
"""Queue sentinel: the worker that reads it exits."""

Stage = Callable[[Any], None]


class Workers:
    """Start, feed and stop the three worker threads; each stage is a callable that never raises."""

    def __init__(self, caller: BackendCaller, hit_stage: Stage, io_stage: Stage, backup_stage: Stage) -> None:
        self.caller = caller
        self.hit_stage = hit_stage
        self.io_stage = io_stage
        self.backup_stage = backup_stage
        self.threads: list[threading.Thread] = []
        self._hit_queue: queue.Queue = queue.Queue()
        self._io_queue: queue.Queue = queue.Queue()
        self._backup_queue: queue.Queue = queue.Queue()
        self._state_lock = threading.Lock()
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Start the threads (again after ``close``)."""
        with self._state_lock:
            if self._running:
                return
            self.caller.reopen()
            self._hit_queue = queue.Queue()
            self._io_queue = queue.Queue()
            self._backup_queue = queue.Queue()
            loops = {
                "hicache-hit-query": (self._hit_queue, self.hit_stage, self._io_queue),
                "hicache-prefetch-io": (self._io_queue, self.io_stage),
                "hicache-backup": (self._backup_queue, self.backup_stage),
            }
            self.threads = [
                threading.Thread(target=self._serve, args=args, name=name, daemon=True) for name, args in loops.items()
            ]
            for thread in self.threads:
                thread.start()
            self._running = True

    def submit_prefetch(self, operation: Any) -> None:
        self._submit(self._hit_queue, operation, "prefetch")

    def submit_backup(self, operation: Any) -> None:
        self._submit(self._backup_queue, operation, "backup")

    def _submit(self, target: queue.Queue, operation: Any, what: str) -> None:
        with self._state_lock:
            if not self._running:
                raise RuntimeError(f"CacheController.{what}: the controller is closed; call start() first")
            target.put(operation)

    def close(self, timeout: Optional[float]) -> bool:
        """Finish every submitted operation and stop; abandon hung calls in the last quarter (at most 1 s). Clause: CTL-11.

        The default timeout is ``CacheController.close``'s; None waits for ever.
        """
        threads = self._stop_accepting()
        if threads is None:
            return True
        end = None if timeout is None else time.monotonic() + timeout
        grace = 0.0 if timeout is None else min(1.0, timeout / 4)
        for thread in threads:
            thread.join(None if end is None else max(0.0, end - grace - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            self.caller.abandon_calls()  # CTL-11: a hung call no longer holds its operation, nor close()
            for thread in threads:
                thread.join(None if end is None else max(0.0, end - time.monotonic()))
        stopped = not any(thread.is_alive() for thread in threads)
        self.caller.stop_call_threads(None if end is None else max(0.0, end - time.monotonic()))
        return stopped

    def _stop_accepting(self) -> Optional[list[threading.Thread]]:
        """Refuse new operations and send the workers STOP; return their threads, or None when already closed."""
        with self._state_lock:
            if not self._running:
                return None
            self._running = False
            self._hit_queue.put(STOP)
            self._backup_queue.put(STOP)
            return list(self.threads)

    def _serve(self, inbox: queue.Queue, stage: Stage, outbox: Optional[queue.Queue] = None) -> None:
        """Run ``stage`` on each operation from ``inbox`` in order and pass it on to ``outbox``; STOP ends the loop."""
        while True:
            operation = inbox.get()
            if operation is not STOP:
                stage(operation)
            if outbox is not None:
                outbox.put(operation)  # the hit query hands on to the IO thread, STOP included
            if operation is STOP:
                return
