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
            self.threads = [
                threading.Thread(target=self._hit_query_loop, name="hicache-hit-query", daemon=True),
                threading.Thread(target=self._io_loop, name="hicache-prefetch-io", daemon=True),
                threading.Thread(target=self._backup_loop, name="hicache-backup", daemon=True),
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

    def close(self, timeout: Optional[float] = 10.0) -> bool:
        """Finish every submitted operation and stop; abandon hung calls in the last quarter (at most 1 s). Clause: CTL-11."""
        with self._state_lock:
            if not self._running:
                return True
            self._running = False
            self._hit_queue.put(STOP)
            self._backup_queue.put(STOP)
            threads = list(self.threads)
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

    def _hit_query_loop(self) -> None:
        while True:
            operation = self._hit_queue.get()
            if operation is STOP:
                self._io_queue.put(STOP)
                return
            self.hit_stage(operation)
            self._io_queue.put(operation)

    def _io_loop(self) -> None:
        while True:
            operation = self._io_queue.get()
            if operation is STOP:
                return
            self.io_stage(operation)

    def _backup_loop(self) -> None:
        while True:
            operation = self._backup_queue.get()
            if operation is STOP:
                return
            self.backup_stage(operation)
