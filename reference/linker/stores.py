"""Page stores behind the reference linkers: one object per page, all of its layers at once.

A page is published whole or not at all (LNK-8): the memory store swaps the
entry in under a lock; the file store writes a temporary file and renames it
into place, so a reader never sees a page with some layers missing.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading
from pathlib import Path
from typing import Optional

__all__ = ["FileStore", "MemoryStore", "PageStore", "shared_memory_store"]

PageBlob = tuple[bytes, ...]
"""A page's bytes, one entry per layer."""


class PageStore:
    """What a reference linker needs from its store."""

    def put(self, key: str, blob: PageBlob) -> None:
        raise NotImplementedError

    def get(self, key: str) -> Optional[PageBlob]:
        raise NotImplementedError

    def contains(self, key: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the store holds open (the pages stay)."""


class MemoryStore(PageStore):
    """Pages in a dict, shared by every linker that names the same store (one per process)."""

    def __init__(self) -> None:
        self._pages: dict[str, PageBlob] = {}
        self._lock = threading.Lock()

    def put(self, key: str, blob: PageBlob) -> None:
        with self._lock:
            self._pages[key] = tuple(blob)

    def get(self, key: str) -> Optional[PageBlob]:
        with self._lock:
            return self._pages.get(key)

    def contains(self, key: str) -> bool:
        with self._lock:
            return key in self._pages

    def clear(self) -> None:
        with self._lock:
            self._pages.clear()


_SHARED: dict[str, MemoryStore] = {}
_SHARED_LOCK = threading.Lock()


def shared_memory_store(name: str = "default") -> MemoryStore:
    """Return the process's memory store called ``name`` (ranks of one process share it, like a server)."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(name, MemoryStore())


class FileStore(PageStore):
    """One file per page under ``root``, published by an atomic rename."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.root / digest[:2] / f"{digest}.page"

    def put(self, key: str, blob: PageBlob) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = struct.pack("<I", len(blob)) + b"".join(struct.pack("<Q", len(part)) + part for part in blob)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, path)  # LNK-8: the page appears whole
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> Optional[PageBlob]:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        (count,) = struct.unpack_from("<I", data, 0)
        offset, parts = 4, []
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", data, offset)
            offset += 8
            parts.append(data[offset : offset + size])
            offset += size
        return tuple(parts)

    def contains(self, key: str) -> bool:
        return self._path(key).is_file()
