"""Small values of the reference backends: pool names, v2 results and the stats counters."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from hicache_contracts.models import pool_value

__all__ = ["BackendStats", "Counters", "PoolResults"]


class PoolResults(dict):
    """The result of batch_get_v2 / batch_set_v2: pool name → one bool per key. Clause: BE-19.

    Keys are plain str values (``"kv"``); lookups also accept a pool enum
    member (ours or SGLang's), whose hash differs from its value's.
    """

    def __getitem__(self, name: Any) -> list[bool]:
        return dict.__getitem__(self, pool_value(name))

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, pool_value(name))

    def get(self, name: Any, default: Any = None) -> Any:
        return dict.get(self, pool_value(name), default)


@dataclass(frozen=True)
class BackendStats:
    """A snapshot of a backend's counters, returned by ``get_stats()`` (BE-12: an object, never a dict)."""

    pages_read: int = 0
    """Pages that landed in host slots (v1, v2) or were returned (legacy get)."""
    pages_written: int = 0
    """Pages stored."""
    read_misses: int = 0
    """Pages asked for and not found (or found short, BE-13)."""
    write_failures: int = 0
    """Pages whose write did not succeed."""
    storage_errors: int = 0
    """Exceptions from storage turned into False/0/None (BE-5)."""
    bytes_read: int = 0
    """Bytes of the pages read."""
    bytes_written: int = 0
    """Bytes of the pages written."""


class Counters:
    """Mutable counters behind ``BackendStats``, guarded by one lock (BE-23)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(BackendStats.__dataclass_fields__, 0)

    def add(self, **increments: int) -> None:
        with self._lock:
            for name, value in increments.items():
                self._values[name] += value

    def snapshot(self) -> BackendStats:
        with self._lock:
            return BackendStats(**self._values)
