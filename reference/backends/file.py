"""The file reference backend: one file per page and pool under one directory, written atomically.

Layout: ``<path>/<namespace>/<pool>/<key>``, the relative part being
``storage_name(namespace_for(config), key, pool)``, so the model and the PP,
CP and TP coordinates each get their own directory (NS-1..NS-4), replicated KV
shares the TP level (NS-5), and the same configuration finds the same files
after a restart (NS-7). A file holds the raw bytes of one flat page and
nothing else.

Writes go to a temporary file in the same directory (its name holds ``%tmp``,
which no escaped key contains), optionally ``fsync``-ed, then
``os.replace``-d over the final name: a page is never visible half written
(BE-7). Reads check with ``fstat`` that the file is exactly one page long (an
empty, short or long file is a miss and touches nothing, BE-13), then
``os.readv`` it straight into the page's host byte ranges when the base
offers them (``reads_into_ranges``), else into the base's staging buffer. A
read that comes up short after that (the file shrank) or fails is False for
its page; only that page's own ranges may hold part of it (BE-15, BE-16).

Extra config: ``path`` (required), ``fsync`` (default False).
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from typing import Any, Optional, Sequence

from hicache_reference.backends.base import PageStoreBackend

__all__ = ["FileBackend"]

_TEMPORARY_MARK = "%tmp"
"""Part of every temporary file name; ``namespace._safe`` escapes '%', so no page file contains it."""


def _most_buffers_per_call() -> int:
    try:
        return max(1, os.sysconf("SC_IOV_MAX"))
    except (AttributeError, ValueError, OSError):
        return 1024


IOV_MAX = _most_buffers_per_call()
"""Most buffers one ``os.readv`` call takes (the system's IOV_MAX)."""


def read_exactly(descriptor: int, views: Sequence[memoryview], byte_count: int) -> bool:
    """Fill ``views`` (``byte_count`` bytes together) one after the other from ``descriptor``.

    Writes only into ``views``. A short ``readv`` is continued where it
    stopped; the file ending before the views are full is False (the views
    may then hold part of the data). OSError propagates.
    """
    filled = count = os.readv(descriptor, views) if len(views) <= IOV_MAX else 0
    pending = views
    while filled < byte_count:
        pending = _after(pending, count)
        count = os.readv(descriptor, pending[:IOV_MAX])
        if count <= 0:
            return False  # the file shrank under us: not a whole page
        filled += count
    return True


def _after(views: Sequence[memoryview], count: int) -> list[memoryview]:
    """Return what is left of ``views`` once their first ``count`` bytes are filled."""
    index = 0
    while index < len(views) and count >= len(views[index]):
        count -= len(views[index])
        index += 1
    rest = list(views[index:])
    if count:
        rest[0] = rest[0][count:]
    return rest


def _check_writable_directory(root: str, given: Any) -> None:
    """Make ``root`` if needed and write a probe file in it; raise ValueError naming ``path`` when that fails."""
    probe = os.path.join(root, f".probe{_TEMPORARY_MARK}.{os.getpid()}.{threading.get_ident()}")
    try:
        os.makedirs(root, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(probe)
    except OSError as error:
        raise ValueError(
            f"FileBackend.extra_config.path: must be a directory the backend can create and write in "
            f"(got {given!r}: {error.strerror or error})"
        ) from error


class FileBackend(PageStoreBackend):
    """Pages as files under ``extra_config["path"]``. Extra config: ``path`` (required), ``fsync`` (default False)."""

    hicache_levels = ("core", "v1", "v2", "prefix", "namespacing", "concurrency", "durability")
    reads_into_ranges = True

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        path = self.extra_config.get("path")
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ValueError(
                f"FileBackend.extra_config.path: required, the directory that holds the pages (got {path!r})"
            )
        fsync = self.extra_config.get("fsync", False)
        if not isinstance(fsync, bool):
            raise ValueError(f"FileBackend.extra_config.fsync: must be true or false (got {fsync!r})")
        self.root = os.path.abspath(os.fspath(path))
        """The directory every namespace lives under."""
        self.fsync = fsync
        """Whether each page (and its directory entry) is flushed to the device before it becomes visible."""
        _check_writable_directory(self.root, path)
        self._made_directories: set[str] = set()
        self._directories_lock = threading.Lock()
        self._temporary_numbers = itertools.count()

    # ------------------------------------------------------------ paths
    def _path(self, name: str) -> str:
        return f"{self.root}{os.sep}{name}"  # os.path.join, without its cost: names are relative

    def _ensure_directory(self, directory: str) -> None:
        if directory in self._made_directories:
            return
        os.makedirs(directory, exist_ok=True)
        with self._directories_lock:
            self._made_directories.add(directory)

    # ------------------------------------------------------------ primitives
    def _object_size(self, name: str) -> Optional[int]:
        try:
            return os.stat(self._path(name)).st_size
        except FileNotFoundError:
            return None

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        return self._read_object_into_ranges(name, [buffer])

    def _read_object_into_ranges(self, name: str, views: Sequence[memoryview]) -> bool:
        try:
            descriptor = os.open(self._path(name), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            byte_count = sum(map(len, views))
            if os.fstat(descriptor).st_size != byte_count:
                return False  # BE-13: empty, short or long is a miss, and nothing is touched
            return read_exactly(descriptor, views, byte_count)
        finally:
            os.close(descriptor)

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        final = self._path(name)
        directory = os.path.dirname(final)
        self._ensure_directory(directory)
        temporary = (
            f"{final}{_TEMPORARY_MARK}.{os.getpid()}.{threading.get_ident()}.{next(self._temporary_numbers)}"
        )
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # the directory was removed by clear(): make it again, once
            with self._directories_lock:
                self._made_directories.discard(directory)
            self._ensure_directory(directory)
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                written = 0
                while written < len(data):
                    written += os.write(descriptor, data[written:])
                if self.fsync:
                    os.fsync(descriptor)
            finally:
                os.close(descriptor)
            os.replace(temporary, final)  # BE-7: the page appears whole or not at all
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
        if self.fsync:
            self._fsync_directory(directory)
        return True

    @staticmethod
    def _fsync_directory(directory: str) -> None:
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def _clear_namespace(self) -> None:
        # NS-8: only this namespace's directory; siblings (other ranks, models) stay.
        shutil.rmtree(self._path(self.namespace), ignore_errors=True)
        with self._directories_lock:
            self._made_directories.clear()
