"""The file reference backend: one file per page and pool under one directory, written atomically.

``FileBackend`` holds a ``FileStore``, the page files under the root (its
object store: a file's size, a read into memory, an atomic write, a
namespace's removal, the reclaiming of stale temporary files), and supplies
the object primitives of ``PageStoreBackend`` over it in one line each.

Layout: ``<path>/<namespace>/<pool>/<key>``, the relative part being the
page's ``ObjectName`` with each escaped part made one safe path component
(``_file_component``), so the model and the PP, CP and TP coordinates each
get their own directory (NS-1..NS-4), replicated KV shares the TP level
(NS-5), and the same configuration finds the same files after a restart
(NS-7). A file holds the raw bytes of one flat page and nothing else.

Writes send the page's host byte ranges with one ``os.writev`` (no copy out
of the pool, ``writes_from_ranges``) to a temporary file in the same
directory (its name holds ``%tmp``, which no escaped key contains),
optionally ``fsync``-ed, then
``os.replace``-d over the final name: a page is never visible half written
(BE-7). Reads take the file's size from ``lseek`` to its end (two cheap calls
where ``fstat`` builds a whole status object) and go on only when it is
exactly one page (an empty, short or long file, or one that cannot seek, is a
miss and touches nothing, BE-13); then ``os.readv`` lands it straight in the
page's host byte ranges when the base offers them (``reads_into_ranges``),
else in the base's staging buffer. A read that comes up short after that (the
file shrank) or fails is False for its page; only that page's own ranges may
hold part of it (BE-15, BE-16).

The batch forms (``FileStore.read_many_into``, ``write_many``: the
``BATCHED`` strategy, strategies.py) run the per-page steps in one loop:
names are checked, directories made and link checks looked up once per call,
not once per page. The ``PER_PAGE`` strategy goes through the single-page
forms (``read_into``, ``write``) instead; a subclass that replaces a
single-page primitive names it.

The root is the backend's, not the cleaner's: when it was deleted (a tmp
cleaner, an operator), the next write makes it again (logged once per
recreation, counted in ``roots_recreated``) instead of failing for ever.

A writer killed between its temporary file and the rename leaves that file
behind. Opening the backend and ``clear()`` reclaim such files under this
namespace (and stale probe files in the root): a temporary file is stale
when the process its name records no longer runs on this host, or when it
is older than ``temporary_grace`` seconds (a whole page write takes
milliseconds; a writer on another host sharing the directory that is still
inside one after that grace loses only that write: its rename fails and the
page is not stored). Only names holding ``%tmp`` are ever reclaimed, and no
published page's name holds it. Reclaimed files are counted in
``temporaries_reclaimed``.

Extra config: ``path`` (required), ``fsync`` (default False),
``temporary_grace`` (seconds, default 60).
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import logging
import os
import shutil
import stat
import threading
import time
from typing import Any, Iterable, Optional, Sequence

from hicache_reference.backends.base import PageStoreBackend
from hicache_reference.backends.namespace import ObjectName
from hicache_reference.backends.values import Counters

__all__ = ["DEFAULT_TEMPORARY_GRACE_S", "DIRECTORY_MODE", "FILE_MODE", "FileBackend", "FileStore", "NAME_MAX_BYTES"]

_log = logging.getLogger(__name__)

_TEMPORARY_MARK = "%tmp"
"""Part of every temporary file name; ``namespace._safe`` escapes '%', so no page file contains it."""
NAME_MAX_BYTES = 200
"""Longest path component the backend writes, in bytes: below the usual NAME_MAX of 255, leaving room for the
temporary suffix (``%tmp.<pid>.<thread>.<n>``)."""
FILE_MODE = 0o600
"""Mode page files are created with (before the umask): pages hold users' data."""
DIRECTORY_MODE = 0o700
"""Mode directories are created with (before the umask)."""
_OPEN_FOR_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
"""A page is opened without following a link (and without blocking on a FIFO someone put there)."""
_NOT_A_PAGE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ESPIPE, errno.EISDIR, errno.EINVAL})
"""Errors of a read that mean "no page file here" (a miss), not a failing storage."""
DEFAULT_TEMPORARY_GRACE_S = 60.0
"""Age in seconds after which a temporary file is stale whoever wrote it: a page write takes milliseconds."""
_OPEN_FOR_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


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


def write_all(descriptor: int, parts: Sequence[memoryview], byte_count: int) -> None:
    """Write ``parts`` (``byte_count`` bytes together) one after the other to ``descriptor`` with ``os.writev``.

    A short ``writev`` is continued where it stopped. OSError propagates.
    """
    written = os.writev(descriptor, parts) if len(parts) <= IOV_MAX else 0
    while written < byte_count:
        count = os.writev(descriptor, _after(parts, written)[:IOV_MAX])
        if count <= 0:
            raise OSError(errno.EIO, "writev wrote nothing")
        written += count


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


def _file_component(text: str) -> str:
    """Return an escaped name (``namespace._safe`` output) as one safe path component: see the module docstring."""
    if text == "." or text == "..":
        return text.replace(".", "%2e")
    if len(text) > NAME_MAX_BYTES:  # _safe output is ASCII: characters are bytes
        return "%h" + hashlib.sha256(text.encode()).hexdigest()
    return text


def _check_namespace(namespace: str, config: Any) -> None:
    """Raise ValueError naming ``model_name`` when a part of ``namespace`` is no usable directory name."""
    for part in namespace.split("/"):
        if part in ("", ".", "..") or len(part) > NAME_MAX_BYTES or "\0" in part:
            model_name = getattr(config, "model_name", None)
            shown = repr(model_name) if len(repr(model_name)) <= 80 else repr(model_name)[:77] + "..."
            raise ValueError(
                f"FileBackend.storage_config.model_name: must give a directory name that is not '.' or '..' and at "
                f"most {NAME_MAX_BYTES} bytes once escaped (got {shown}, {len(str(model_name))} characters)"
            )


def _check_writable_directory(root: str, given: Any) -> None:
    """Make ``root`` if needed and write a probe file in it; raise ValueError naming ``path`` when that fails."""
    probe = os.path.join(root, f".probe{_TEMPORARY_MARK}.{os.getpid()}.{threading.get_ident()}")
    try:
        os.makedirs(root, mode=DIRECTORY_MODE, exist_ok=True)
        os.close(os.open(probe, _OPEN_FOR_WRITE, FILE_MODE))
        os.unlink(probe)
    except OSError as error:
        raise ValueError(
            f"FileBackend.extra_config.path: must be a directory the backend can create and write in "
            f"(got {given!r}: {error.strerror or error})"
        ) from error


def _writer_pid(name: str) -> Optional[int]:
    """Return the process id a temporary file name records (``...%tmp.<pid>.<thread>[.<n>...]``), else None."""
    fields = name.rpartition(_TEMPORARY_MARK)[2].split(".")
    if len(fields) < 3 or fields[0] != "" or not fields[1].isdigit():
        return None
    return int(fields[1])


def _process_runs(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one we may not signal runs too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or a number we cannot ask about: assume a live writer
    return True


def _is_stale_temporary(path: str, name: str, grace: float, now: float) -> bool:
    """Whether ``name`` (in ``path``'s directory) is a temporary file no live writer owns: see the module docstring."""
    if _TEMPORARY_MARK not in name:
        return False  # a published page, or anything else: never touched
    try:
        status = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(status.st_mode):
        return False
    if now - status.st_mtime >= grace:
        return True
    pid = _writer_pid(name)
    return pid is not None and not _process_runs(pid)


class PlainNames(list):
    """The names of a batch of plain keys (``ObjectStore._plain``): ``prefix`` followed by each key."""

    def __init__(self, names: Iterable[str], prefix: str) -> None:
        super().__init__(names)
        self.prefix = prefix
        """The name of the empty key of the batch's pool: the directory its pages lie in, and a '/'."""


class FileStore:
    """Page files under one root directory: the file backend's object store (module docstring).

    Objects are named by relative paths (``<namespace>/<pool>/<key>``);
    every operation stays under the root and never follows a link. Storage
    errors it meets without raising are counted in ``counters`` (BE-5).
    """

    def __init__(self, root: str, fsync: bool, temporary_grace: float, counters: Counters) -> None:
        self.root = root
        """The directory every namespace lives under."""
        self.fsync = fsync
        """Whether each page (and its directory entry) is flushed to the device before it becomes visible."""
        self.temporary_grace = temporary_grace
        """Age in seconds after which a temporary file is reclaimed whoever wrote it."""
        self.closed = False
        """Set when the backend closes: a write still under way then leaves nothing behind."""
        self._counters = counters
        self._root_prefix = root.rstrip(os.sep) + os.sep
        self._made_directories: set[str] = set()
        self._checked_directories: set[str] = set()
        self._directories_lock = threading.Lock()
        self._temporary_numbers = itertools.count()
        self._safe_prefixes: set[str] = set()
        self.roots_recreated = 0
        """How many times the root was found deleted and made again."""
        self.temporaries_reclaimed = 0
        """How many stale temporary files (of killed writers) were removed, on open and by ``clear()``."""

    # ------------------------------------------------------------ paths
    def path(self, name: str) -> str:
        """Return the absolute path of ``name``; raise ValueError unless it lies under the root."""
        if name[:1] in ("", ".", "/") or "/." in name or "//" in name or "\0" in name:  # rare: look closer
            parts = name.split("/")
            if any(part in ("", ".", "..") or "\0" in part for part in parts):
                raise ValueError(f"FileBackend: object name {name[:80]!r} does not lie under the root {self.root!r}")
        return f"{self._root_prefix}{name}"  # os.path.join, without its cost: names are relative

    def _path_or_nothing(self, name: str) -> str:
        """Return ``path(name)``, or "" (counted as a storage error, BE-5) for a name that does not lie under the root."""
        try:
            return self.path(name)
        except Exception:
            self._counters.add(storage_errors=1)
            return ""

    def paths(self, names: Sequence[str]) -> list[str]:
        """Return ``_path`` of every name ("" for one that does not lie under the root, counted as a storage
        error), the link check of each directory among them looked up once."""
        if type(names) is PlainNames and self._safe_prefix(names.prefix):  # one directory, every name safe
            directory = self._root_prefix + names.prefix[:-1]
            try:
                self._check_no_links(directory)
            except (FileNotFoundError, NotADirectoryError):
                pass  # not there (yet): its pages are misses when opened, and it is checked again next time
            return list(map(self._root_prefix.__add__, names))
        joined = "/".join(names)  # an empty name, or one that starts with '.' or '/', shows as "//" or "/." here
        if joined[:1] not in ("", ".", "/") and joined[-1:] != "/" and not ("/." in joined or "//" in joined):
            paths = [self._root_prefix + name for name in names] if "\0" not in joined else []
        else:
            paths = []
        if not paths:  # some name needs a closer look (or there are none); one that fails it fails alone
            paths = [self._path_or_nothing(name) for name in names]
        for directory in {path[: path.rindex("/")] for path in paths if path}:
            try:
                self._check_no_links(directory)
            except (FileNotFoundError, NotADirectoryError):
                pass  # not there (yet): its pages are misses when opened, and it is checked again next time
        return paths

    def _safe_prefix(self, prefix: str) -> bool:
        """Whether ``prefix`` + any plain key is a path under the root, in the directory ``prefix`` names."""
        if prefix in self._safe_prefixes:
            return True
        if not prefix.endswith("/") or self._path_or_nothing(prefix + "0") != self._root_prefix + prefix + "0":
            return False
        self._safe_prefixes.add(prefix)
        return True

    def _check_no_links(self, directory: str) -> None:
        """Raise OSError if ``directory`` or any directory between it and the root is a link (checked once each)."""
        if directory in self._checked_directories:
            return
        current = directory
        while len(current) > len(self.root):
            if stat.S_ISLNK(os.lstat(current).st_mode):
                raise OSError(errno.ELOOP, "a directory under the root is a symbolic link", current)
            current = os.path.dirname(current)
        with self._directories_lock:
            self._checked_directories.add(directory)

    def _make_directories(self, directory: str) -> None:
        """Make ``directory`` and its parents below the root one by one, refusing to go through a link."""
        current = self.root
        for part in directory[len(self._root_prefix) :].split("/"):
            current = f"{current}{os.sep}{part}"
            try:
                os.mkdir(current, DIRECTORY_MODE)
            except FileExistsError:
                pass
            if not stat.S_ISDIR(os.lstat(current).st_mode):  # a link (or a file) where a directory belongs
                raise OSError(errno.ELOOP, "a directory under the root is a symbolic link or a file", current)

    def _ensure_directory(self, directory: str) -> None:
        if directory in self._made_directories:
            return
        if self.closed:
            raise OSError(errno.ESHUTDOWN, "the backend is closed", directory)
        try:
            self._make_directories(directory)
        except FileNotFoundError:  # a parent was removed by a concurrent clear(), or the root was deleted
            self._recreate_root()
            self._make_directories(directory)
        with self._directories_lock:
            self._checked_directories.add(directory)
            self._made_directories.add(directory)

    def _recreate_root(self) -> None:
        """Make the root again if it was deleted; log and count each time it had to be made."""
        if os.path.isdir(self.root):
            return
        os.makedirs(self.root, mode=DIRECTORY_MODE, exist_ok=True)
        with self._directories_lock:
            self._made_directories.clear()
            self._checked_directories.clear()
            self.roots_recreated += 1
        _log.warning("FileBackend: the root directory %s was deleted; made it again", self.root)

    # ------------------------------------------------------------ stale temporary files
    def reclaim_temporaries(self, namespace: Optional[str]) -> int:
        """Remove the stale temporary files under ``namespace`` (none when it is None) and the stale probes in
        the root; return how many.

        Never raises: a directory that cannot be listed is skipped. Links are
        never followed, and only names holding ``%tmp`` are looked at.
        """
        now, grace, removed = time.time(), self.temporary_grace, 0
        directories = [self.path(namespace)] if namespace is not None else []
        try:
            with os.scandir(self.root) as entries:  # probes of killed openers
                root_names = [entry.name for entry in entries if entry.name.startswith(".probe" + _TEMPORARY_MARK)]
        except OSError:
            root_names = []
        candidates = [(os.path.join(self.root, name), name) for name in root_names]
        while directories:
            directory = directories.pop()
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            directories.append(entry.path)
                        elif _TEMPORARY_MARK in entry.name:
                            candidates.append((entry.path, entry.name))
            except OSError:
                continue
        for path, name in candidates:
            if _is_stale_temporary(path, name, grace, now):
                try:
                    os.unlink(path)
                except OSError:
                    continue
                removed += 1
        if removed:
            with self._directories_lock:
                self.temporaries_reclaimed += removed
            _log.info("FileBackend: removed %d stale temporary files of killed writers under %s", removed, self.root)
        return removed

    # ------------------------------------------------------------ objects
    def size(self, name: str) -> Optional[int]:
        """Return the size of the page file ``name``, or None when there is none (a link or a FIFO is none)."""
        path = self.path(name)
        try:
            status = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(status.st_mode):
            return None  # a link, a directory, a FIFO: not a page
        self._check_no_links(os.path.dirname(path))
        return status.st_size

    def read_into(self, name: str, views: Sequence[memoryview]) -> bool:
        """Read the page file ``name`` into ``views``, in order; True only if it is exactly their size and filled
        them (BE-13: nothing is touched otherwise). The plain form of ``read_many_into``."""
        path = self.path(name)
        try:
            self._check_no_links(path[: path.rindex("/")])  # a link on the way raises: a storage error (BE-5)
        except (FileNotFoundError, NotADirectoryError):
            return False  # no directory, so no page
        try:
            descriptor = os.open(path, _OPEN_FOR_READ)  # never through a link
        except OSError as error:
            return self._not_a_page(error)
        try:
            byte_count = sum(map(len, views))
            if os.lseek(descriptor, 0, os.SEEK_END) != byte_count:
                return False  # BE-13: empty, short or long is a miss, and nothing is touched
            os.lseek(descriptor, 0, os.SEEK_SET)
            return read_exactly(descriptor, views, byte_count)  # BE-15: True only once every view is full
        except OSError as error:
            return self._not_a_page(error)
        finally:
            os.close(descriptor)

    def read_many_into(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        """Read each page file into its views, in one loop; names and links are checked once per call.

        Per page: open (not following a link), the size from ``lseek`` to the
        end, and only when it is exactly the page's, one ``preadv`` from the
        start (``readv`` after seeking back where there is no ``preadv``),
        continued by ``read_exactly`` if it comes up short.
        """
        results: list[bool] = []
        readv, lseek, end, start = os.readv, os.lseek, os.SEEK_END, os.SEEK_SET  # looked up per call: tests patch os
        preadv, opening, closing, flags, most = getattr(os, "preadv", None), os.open, os.close, _OPEN_FOR_READ, IOV_MAX
        note = results.append
        for path, views in zip(self.paths(names), page_views):
            if not path:
                note(False)
                continue
            try:
                descriptor = opening(path, flags)
            except OSError as error:
                note(self._not_a_page(error))
                continue
            try:
                byte_count = sum(map(len, views))
                if lseek(descriptor, 0, end) != byte_count:
                    note(False)  # BE-13: empty, short or long is a miss, and nothing is touched
                    continue
                if len(views) > most:
                    filled = 0  # read_exactly takes them IOV_MAX at a time
                    lseek(descriptor, 0, start)
                elif preadv is not None:  # from the start, the offset left where it is
                    filled = preadv(descriptor, views, 0)
                    if filled != byte_count:
                        lseek(descriptor, filled, start)  # read_exactly goes on from where it stopped
                else:
                    lseek(descriptor, 0, start)
                    filled = readv(descriptor, views)
                note(filled == byte_count or read_exactly(descriptor, _after(views, filled), byte_count - filled))
            except OSError as error:
                note(self._not_a_page(error))
            finally:
                closing(descriptor)
        return results

    def _not_a_page(self, error: OSError) -> bool:
        """Return False for a page whose read raised ``error``; count it as a storage error (BE-5) unless the
        file is simply no page: missing, a link (not followed), or a FIFO, directory or device (cannot seek)."""
        if error.errno not in _NOT_A_PAGE:
            self._counters.add(storage_errors=1)
        return False

    def write(self, name: str, data: Any) -> bool:
        """Write ``data`` (a buffer, or a page's list of host ranges) as the file ``name``, atomically (BE-7)."""
        return self._write_file(self.path(name), data, self._temporary_suffix())

    def write_many(self, names: Sequence[str], datas: Sequence[Any]) -> list[bool]:
        """Write each page as its file: the single-page write in one loop, with one temporary-name stem per call."""
        suffix, write, results = self._temporary_suffix(), self._write_file, []
        for number, (name, data) in enumerate(zip(names, datas)):
            try:
                results.append(data is not None and write(self.path(name), data, f"{suffix}.{number}"))
            except Exception:  # BE-5: this page failed; the others go on
                self._counters.add(storage_errors=1)
                results.append(False)
        return results

    def _temporary_suffix(self) -> str:
        """Return a suffix no other write uses: the mark, the process, the thread and a number of this instance."""
        return f"{_TEMPORARY_MARK}.{os.getpid()}.{threading.get_ident()}.{next(self._temporary_numbers)}"

    def _write_file(self, final: str, data: Any, suffix: str) -> bool:
        """Write ``data`` (a buffer or the page's list of ranges) to ``final + suffix``, then rename it to ``final``."""
        directory = final[: final.rindex("/")]  # os.path.dirname, without its cost
        self._ensure_directory(directory)
        temporary = final + suffix
        try:
            descriptor = os.open(temporary, _OPEN_FOR_WRITE, FILE_MODE)
        except FileNotFoundError:  # the directory was removed by clear(): make it again, once
            with self._directories_lock:
                self._made_directories.discard(directory)
                self._checked_directories.discard(directory)
            self._ensure_directory(directory)
            descriptor = os.open(temporary, _OPEN_FOR_WRITE, FILE_MODE)
        try:
            try:
                parts = [data] if isinstance(data, memoryview) else data  # the page's ranges in the pool
                write_all(descriptor, parts, sum(part.nbytes for part in parts))
                if self.fsync:
                    os.fsync(descriptor)
            finally:
                os.close(descriptor)
            if self.closed:  # closed (and cleared) while writing: leave nothing behind
                raise OSError(errno.ESHUTDOWN, "the backend was closed during the write", final)
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

    def clear(self, namespace: str, base_namespace: str) -> None:
        """Remove the directory of ``namespace`` and nothing else (NS-8); a link in place of it, or of a
        directory of ``base_namespace`` below the shared ones, is removed, never followed."""
        # NS-8: only this namespace's directory; siblings (other ranks, models) stay.
        self.reclaim_temporaries(None)  # the root's stale probes; the namespace's go with it below
        directory = self.path(namespace)
        removed = directory  # what goes: the namespace directory, or the link in place of one of its parents
        try:
            link = self._first_link(directory)
            if link is not None:
                # A link in place of the namespace, or of a directory of this configuration above its format
                # part (NS-9): removed, never followed. One shared with other configurations is left alone.
                if len(link) < len(self.path(base_namespace)):
                    raise OSError(errno.ELOOP, "a directory shared with other namespaces is a symbolic link", link)
                os.unlink(link)
                removed = link
            else:
                shutil.rmtree(directory, ignore_errors=True)  # rmtree never follows links below it
        finally:
            with self._directories_lock:
                self._made_directories.clear()
                self._checked_directories.clear()
        self._remove_empty_parents(os.path.dirname(removed))

    def _first_link(self, directory: str) -> Optional[str]:
        """Return the first directory from the root down to ``directory`` that is a symbolic link, else None."""
        current = self.root
        for part in directory[len(self._root_prefix) :].split("/"):
            current = f"{current}{os.sep}{part}"
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    return current
            except (FileNotFoundError, NotADirectoryError):
                return None
        return None

    def _remove_empty_parents(self, directory: str) -> None:
        """Remove ``directory`` and its parents up to (not including) the root while they are empty."""
        while len(directory) > len(self.root) and directory.startswith(self._root_prefix):
            try:
                os.rmdir(directory)  # only an empty directory goes; another instance's pages keep theirs
            except OSError:
                return
            directory = os.path.dirname(directory)


class FileBackend(PageStoreBackend):
    """Pages as files under ``extra_config["path"]``. Extra config: ``path`` (required), ``fsync`` (default False),
    ``temporary_grace`` (default 60 s)."""

    hicache_levels = (*PageStoreBackend.hicache_levels, "durability")
    reads_into_ranges = True
    writes_from_ranges = True
    _longest_plain_key = NAME_MAX_BYTES  # a longer key's file name is its hash (``_file_component``)
    store_class: type[FileStore] = FileStore
    """The object store the backend builds (``files``); a variant of ``FileStore`` may be named here."""

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
        grace = self.extra_config.get("temporary_grace", DEFAULT_TEMPORARY_GRACE_S)
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not 0 <= grace < float("inf"):
            raise ValueError(
                f"FileBackend.extra_config.temporary_grace: must be a finite number of seconds >= 0 (got {grace!r})"
            )
        root = os.path.abspath(os.fspath(path))
        _check_namespace(self.namespace, storage_config)
        _check_writable_directory(root, path)
        self.files = self.store_class(root, fsync, float(grace), self._counters)
        """The page files under the root (``FileStore``): the object store the primitives below use."""
        self.reclaim_temporaries()

    @property
    def root(self) -> str:
        """The directory every namespace lives under."""
        return self.files.root

    @property
    def fsync(self) -> bool:
        """Whether each page (and its directory entry) is flushed to the device before it becomes visible."""
        return self.files.fsync

    @property
    def temporary_grace(self) -> float:
        """Age in seconds after which a temporary file is reclaimed whoever wrote it."""
        return self.files.temporary_grace

    @property
    def roots_recreated(self) -> int:
        """How many times the root was found deleted and made again."""
        return self.files.roots_recreated

    @property
    def temporaries_reclaimed(self) -> int:
        """How many stale temporary files (of killed writers) were removed, on open and by ``clear()``."""
        return self.files.temporaries_reclaimed

    def reclaim_temporaries(self, namespace: bool = True) -> int:
        """Remove the stale temporary files under this namespace (unless ``namespace`` is False) and the stale
        probes in the root; return how many. Never raises."""
        return self.files.reclaim_temporaries(self.namespace if namespace else None)

    # ------------------------------------------------------------ names (NS-6)
    def _render(self, name: ObjectName) -> str:
        # NS-6: one scheme for every call; each part made a safe path component (module docstring).
        return name.to_str(_file_component)

    def _names(self, keys: Sequence[str], pool: str) -> list[Any]:
        """Return ``_name`` of every key; plain keys as ``PlainNames``, which ``_paths`` need not look into."""
        if self._plain(keys) and all(keys):
            prefix = self._name_prefix(pool)
            return PlainNames(map(prefix.__add__, keys), prefix)
        return [self._name(key, pool) for key in keys]

    # ------------------------------------------------------------ primitives, over the page files
    def _object_size(self, name: str) -> Optional[int]:
        return self.files.size(name)

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        return self.files.read_into(name, [buffer])

    def _read_object_into_ranges(self, name: str, views: Sequence[memoryview]) -> bool:
        return self.files.read_into(name, views)

    def _read_objects_into_ranges(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        return self.files.read_many_into(names, page_views)

    def _write_object(self, name: str, data: Any, group: Optional[str]) -> bool:
        return self.files.write(name, data)  # ``group`` needs no work: a KV page and its sidecars go by name

    def _write_objects(self, names: Sequence[str], datas: Sequence[Any], groups: Sequence[Optional[str]]) -> list[bool]:
        return self.files.write_many(names, datas)

    def _clear_namespace(self, namespace: str) -> None:
        base = (
            self.base_namespace if namespace == self.namespace else getattr(self.base_namespace, "per_rank", namespace)
        )
        self.files.clear(namespace, base)  # NS-8

    def close(self) -> None:
        """Stop serving; a write still under way then leaves nothing behind (its temporary file is removed)."""
        super().close()
        self.files.closed = True
