"""Backdoor hooks for the reference backends, for the vendor suite's checks that need them.

Each goes to the backend's store directly (the memory store, the files, the
Redis hash of a page), under the name the backend gives a page
(``storage_name(namespace, key, pool)``), never through the backend's page
methods. They are test fixtures, kept out of the backends' own API:

    BackendFactory(MemoryBackend, {"store": name}, backdoor=MemoryBackdoor())
"""

from __future__ import annotations

import os
from typing import Any, Optional

import torch

from hicache_reference.backends import storage_name

__all__ = ["FileBackdoor", "MemoryBackdoor", "RedisBackdoor"]


class MemoryBackdoor:
    """Plants, peeks and removes objects of a ``MemoryBackend``'s store."""

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        backend.store.put(storage_name(backend.namespace, key, pool), bytes(data))

    def peek(self, backend: Any, key: str, pool: str) -> Optional[bytes]:
        page = backend.store.get(storage_name(backend.namespace, key, pool))
        if page is None:
            return None
        return (
            bytes(page) if not isinstance(page, torch.Tensor) else page.reshape(-1).view(torch.uint8).numpy().tobytes()
        )

    def remove(self, backend: Any, key: str, pool: str) -> None:
        backend.store.delete(storage_name(backend.namespace, key, pool))


class FileBackdoor:
    """Plants, peeks and removes the files of a ``FileBackend``."""

    def path(self, backend: Any, key: str, pool: str) -> str:
        return os.path.join(backend.root, storage_name(backend.namespace, key, pool))

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        target = self.path(backend, key, pool)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)

    def peek(self, backend: Any, key: str, pool: str) -> Optional[bytes]:
        try:
            with open(self.path(backend, key, pool), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def remove(self, backend: Any, key: str, pool: str) -> None:
        try:
            os.unlink(self.path(backend, key, pool))
        except FileNotFoundError:
            pass


class RedisBackdoor:
    """Plants, peeks and removes fields of a ``RedisBackend``'s page hashes through ``client`` (a redis-py client)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        """A client of the same servers (a ``RedisCluster`` for a cluster), built by the caller."""

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        self.client.hset(*backend.storage_location(key, pool), bytes(data))

    def peek(self, backend: Any, key: str, pool: str) -> Optional[bytes]:
        return self.client.hget(*backend.storage_location(key, pool))

    def remove(self, backend: Any, key: str, pool: str) -> None:
        self.client.hdel(*backend.storage_location(key, pool))
