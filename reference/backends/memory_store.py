"""The memory backend's store: a thread-safe map of object name → page, with optional LRU capacity.

Where pages live. Pages written from a ``HostPagePool`` whose bytes sit where
its layout says (the memory backend's fast path) are rows of a slab
(slabs.py): one set of preallocated tensors per page format, grown by
doubling, whose free rows are reused first. A row holds a page's elements in
flat-page order. Memory held: per page format, at most ``max(64, 2 × the most
rows ever live at once)`` rows, a row live while its page is stored or its
write is in flight; the slabs go with the store. Anything else (a page written
through the pool's helpers, a ``put`` of bytes) is a tensor of its own,
written once and never again.

- write (``write_pages``): one free row per page is reserved under the lock;
  the pages are copied into their rows with one ``torch._foreach_copy_``
  outside it, since no one else can see a reserved row; then every name is
  pointed at its row under the lock. No page is visible before it was copied
  whole (BE-7); a rewrite frees the old row.
- read (``read_pages``): under the lock, every page is looked up and
  size-checked (BE-13), then the found ones are copied into their own host
  pages with one ``torch._foreach_copy_``, still under the lock, so no writer
  can reuse a row while a reader copies it: each page a reader gets is one
  whole stored version (BE-23). A page not found or of the wrong size is False
  and its slots are not touched (BE-15, BE-16).

A batch of at least ``SPLIT_BYTES`` is copied in two halves, the second on a
helper thread kept for the process (the foreach copy runs on one thread;
torch releases the GIL while it copies); the call returns once both are over. ``capacity_pages``
bounds the store in stored objects; the least recently used is evicted first,
together with its group (a KV page and its KV-derived sidecars, BE-22). See
docs/backends.md.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence, Union

import torch

from hicache_reference.backends.slabs import (
    ROW_BITS,
    ROW_MASK,
    byte_count,
    is_capacity,
    _reinterpreted,
    _Slab,
)

__all__ = ["MemoryStore", "SPLIT_BYTES", "forget_shared_memory_store", "shared_memory_store"]

# ---------------------------------------------------------------- copying pages
SPLIT_BYTES = 2 << 20
"""A batch of at least this many bytes is copied in two halves on two threads when torch has two or more."""


class _CopyJob:
    """One half of a split batch, copied on the helper thread; ``wait`` returns once it is over."""

    def __init__(self, targets: list[torch.Tensor], sources: list[torch.Tensor]) -> None:
        self.targets, self.sources = targets, sources
        self.error: Optional[BaseException] = None
        self._over = threading.Lock()
        self._over.acquire()  # released by the helper when the copy is over

    def run(self) -> None:
        try:
            torch._foreach_copy_(self.targets, self.sources)
        except BaseException as error:  # raised on the calling thread by its wait
            self.error = error
        finally:
            self._over.release()

    def wait(self) -> Optional[BaseException]:
        """Wait until the copy is over; return what it raised, if anything."""
        self._over.acquire()
        return self.error


class _CopyHelper:
    """The thread that copies the second halves of split batches, for every store of the process.

    Started on first use and kept (a thread started per call cost about a
    tenth of a large batch's copy: 8.4 against 9.4 GB/s for batches of 128
    pages of 64 KiB); started again in a forked child, which inherits this
    object but not its thread. Halves of concurrent calls queue here in turn.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_CopyJob] = queue.SimpleQueue()
        self._pid: Optional[int] = None
        """The process whose helper thread serves ``_jobs`` (None: not started)."""

    def submit(self, targets: list[torch.Tensor], sources: list[torch.Tensor]) -> _CopyJob:
        job = _CopyJob(targets, sources)
        with self._lock:
            if self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(self._jobs,), name=COPY_THREAD, daemon=True).start()
                self._pid = os.getpid()
            self._jobs.put(job)
        return job

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[_CopyJob]) -> None:
        while True:
            jobs.get().run()


COPY_THREAD = "hicache-memory-copy"
"""The name of the helper thread that copies the second half of a split batch."""
_HELPER = _CopyHelper()


def _foreach_copy(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """Copy each source page into its target page: one ``torch._foreach_copy_`` where torch has it.

    ``_foreach_copy_`` runs on the calling thread alone; a large batch is
    cut in two halves, the second copied by the helper thread (``_CopyHelper``)
    while the calling thread copies the first; the call waits for both (each
    page is still copied whole by one thread, and the copy is over when this
    returns). Torch releases the GIL while it copies, so the halves overlap.
    """
    if not targets:
        return
    if not hasattr(torch, "_foreach_copy_"):
        for target, source in zip(targets, sources):
            target.copy_(source)
        return
    count = len(targets)
    if count < 2 or torch.get_num_threads() < 2 or byte_count(targets[0]) * count < SPLIT_BYTES:
        torch._foreach_copy_(list(targets), list(sources))
        return
    half = count // 2
    job = _HELPER.submit(list(targets[half:]), list(sources[half:]))
    try:
        torch._foreach_copy_(list(targets[:half]), list(sources[:half]))
    finally:
        failure = job.wait()  # even when the first half raised: no copy may outlive the call
    if failure is not None:
        raise failure


_Entry = Union[torch.Tensor, int]
"""A stored object: a tensor of its own, or a slab row (an int, see ``ROW_BITS``)."""


# ---------------------------------------------------------------- the store
class MemoryStore:
    """A thread-safe map of object name → page, with optional LRU capacity and eviction groups.

    A page is a row of a slab (written by ``write_pages``) or a tensor of its
    own (``put`` copies what it is given; ``put_many`` keeps the tensors it is
    handed, which the caller never writes again). ``get`` returns a copy of a
    slab row, or the stored tensor itself, which is never written.
    """

    def __init__(self, capacity_pages: Optional[int] = None) -> None:
        if not is_capacity(capacity_pages):
            raise ValueError(f"MemoryStore.capacity_pages: must be None or an int >= 1 (got {capacity_pages!r})")
        self.capacity_pages = capacity_pages
        """The most objects held at once; None for no bound."""
        self.evictions = 0
        """Objects evicted so far."""
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, _Entry] = OrderedDict()
        self._group_of: dict[str, str] = {}
        self._members: dict[str, set[str]] = {}
        self._slabs: dict[tuple, _Slab] = {}
        self._slab_list: list[_Slab] = []
        """Every slab, at its number."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def names(self) -> list[str]:
        """Return the stored names, least recently used first."""
        with self._lock:
            return list(self._objects)

    def held_bytes(self) -> int:
        """Return the bytes of page memory the store holds: every slab's rows, free ones too, and its own tensors."""
        with self._lock:
            own = sum(byte_count(entry) for entry in self._objects.values() if not isinstance(entry, int))
            return own + sum(slab.nbytes() for slab in self._slabs.values())

    def size(self, name: str) -> Optional[int]:
        """Return the size of ``name`` in bytes, or None; does not count as a use (BE-3)."""
        return self.sizes([name])[0]

    def sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        """Return the size in bytes of each name (None where absent), under one lock; not a use (BE-3)."""
        with self._lock:
            found = [self._objects.get(name) for name in names]
        return [None if entry is None else self._entry_bytes(entry) for entry in found]

    def get(self, name: str) -> Optional[torch.Tensor]:
        """Return the page stored as ``name`` (marking it recently used), or None. Never write it."""
        return self.get_many([name])[0]

    def get_many(self, names: Sequence[str]) -> list[Optional[torch.Tensor]]:
        """Return the page of each name (None where absent), marking the found ones used, under one lock.

        A slab row comes back as a copy made under the lock (the row may be
        reused once the lock is released); a tensor of its own as it is.
        """
        with self._lock:
            objects = self._objects
            found = []
            for name in names:
                entry = objects.get(name)
                if entry is not None:
                    objects.move_to_end(name)
                    if isinstance(entry, int):
                        entry = self._slab_list[entry >> ROW_BITS].row(entry & ROW_MASK).clone()
                found.append(entry)
        return found

    def put(self, name: str, data: Any, group: Optional[str] = None) -> bool:
        """Store a copy of ``data`` (bytes-like, or a tensor) as ``name`` whole, in one step (BE-7).

        Returns whether it is still held after eviction.
        """
        if isinstance(data, torch.Tensor):
            page = data.detach().to("cpu", copy=True, memory_format=torch.contiguous_format)
        else:
            copied = bytearray(data)
            page = torch.frombuffer(copied, dtype=torch.uint8) if copied else torch.empty(0, dtype=torch.uint8)
        return self.put_many([name], [page], [group])[0]

    def put_many(
        self, names: Sequence[str], pages: Sequence[torch.Tensor], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Store each contiguous CPU tensor as its name, as it is (no copy), under one lock (BE-7).

        The caller hands the tensors over and never writes them again. Entry i
        is True if it is still held right after its insertion and the
        evictions it caused.
        """
        with self._lock:
            return self._insert_many(names, pages, groups)

    # ------------------------------------------------------------ pages in slabs
    def write_pages(
        self,
        names: Sequence[str],
        groups: Sequence[Optional[str]],
        pages: torch.Tensor,
        numbers: Sequence[int],
        views: Optional[Sequence[torch.Tensor]] = None,
    ) -> list[bool]:
        """Store host page ``numbers[i]`` of ``pages`` (page number first) as ``names[i]``, in slab rows (BE-7).

        Rows are reserved under the lock, filled outside it (no one else can
        see them), then published under the lock; entry i is True as for
        ``put_many``. A copy that raises frees the rows and stores nothing.
        """
        count = len(names)
        if count == 0:
            return []
        key = (pages.dtype, tuple(pages.shape[1:]))
        with self._lock:
            slab = self._slabs.get(key)
            if slab is None:
                slab = self._slabs[key] = _Slab(len(self._slab_list), pages.dtype, key[1])
                self._slab_list.append(slab)
            rows = slab.reserve(count)
        try:  # the rows are reserved: no one else reads or writes them
            sources = [views[number] for number in numbers] if views is not None else [pages[n] for n in numbers]
            _foreach_copy(slab.row_views(rows), sources)
        except BaseException:
            with self._lock:
                slab.free.extend(rows)
            raise
        high = slab.number << ROW_BITS
        with self._lock:
            return self._insert_many(names, [high | row for row in rows], groups)

    def read_pages(
        self,
        names: Sequence[str],
        pages: torch.Tensor,
        numbers: Sequence[int],
        views: Optional[Sequence[torch.Tensor]] = None,
    ) -> list[bool]:
        """Copy the page of ``names[i]`` into host page ``numbers[i]`` of ``pages``; True where it landed whole.

        Under one lock: each found page is a use; a page whose size is not a
        host page's is False and its host page untouched (BE-13, BE-16); the
        copies run before the lock is released, so no row changes under them.
        """
        dtype, shape = pages.dtype, tuple(pages.shape[1:])
        size = byte_count(pages[0]) if pages.shape[0] else 0
        results = []
        with self._lock:
            objects = self._objects
            slab_list = self._slab_list
            by_slab: dict[int, tuple[list[int], list[int]]] = {}
            targets, sources = [], []
            for name, number in zip(names, numbers):
                entry = objects.get(name)
                if entry is None:
                    results.append(False)
                    continue
                objects.move_to_end(name)
                if isinstance(entry, int):
                    slab = slab_list[entry >> ROW_BITS]
                    if slab.dtype == dtype and slab.shape == shape:
                        group = by_slab.get(slab.number)
                        if group is None:
                            group = by_slab[slab.number] = ([], [])
                        group[0].append(entry & ROW_MASK)
                        group[1].append(number)
                        results.append(True)
                        continue
                    page = slab.row(entry & ROW_MASK)
                else:
                    page = entry
                if byte_count(page) != size:  # BE-13: a short or long object is a miss
                    results.append(False)
                    continue
                targets.append(views[number] if views is not None else pages[number])
                sources.append(
                    page if page.dtype == dtype and tuple(page.shape) == shape else _reinterpreted(page, dtype, shape)
                )  # the same bytes in another geometry
                results.append(True)
            for slab_number, (rows, slab_numbers) in by_slab.items():
                if views is not None:
                    targets.extend(views[number] for number in slab_numbers)
                else:
                    targets.extend(pages[number] for number in slab_numbers)
                sources.extend(slab_list[slab_number].row_views(rows))
            _foreach_copy(targets, sources)  # one call for the batch: each host page is copied whole
        return results

    # ------------------------------------------------------------ removal
    def delete(self, name: str) -> None:
        """Remove ``name`` alone, if present."""
        with self._lock:
            self._release(self._objects.pop(name, None))
            self._unlink(name)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose name starts with ``prefix``; return how many."""
        with self._lock:
            doomed = [name for name in self._objects if name.startswith(prefix)]
            for name in doomed:
                self._release(self._objects.pop(name))
                self._unlink(name)
            return len(doomed)

    # ------------------------------------------------------------ under the lock
    def _insert_many(
        self, names: Sequence[str], entries: Sequence[_Entry], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        objects = self._objects
        if self.capacity_pages is None:  # nothing is ever evicted: groups need no bookkeeping
            for name, entry in zip(names, entries):
                self._release(objects.get(name))
                objects[name] = entry
            return [True] * len(names)
        held = []
        for name, entry, group in zip(names, entries, groups):
            self._release(objects.get(name))
            self._unlink(name)
            objects[name] = entry
            objects.move_to_end(name)  # a rewrite is a use: it leaves its old place in the order
            if group is not None:
                self._group_of[name] = group
                self._members.setdefault(group, set()).add(name)
            self._evict()
            held.append(name in objects)
        return held

    def _release(self, entry: Optional[_Entry]) -> None:
        """Give a removed object's slab row back to its slab's free list."""
        if type(entry) is int:
            self._slab_list[entry >> ROW_BITS].free.append(entry & ROW_MASK)

    def _entry_bytes(self, entry: _Entry) -> int:
        return self._slab_list[entry >> ROW_BITS].row_bytes if isinstance(entry, int) else byte_count(entry)

    def _unlink(self, name: str) -> None:
        group = self._group_of.pop(name, None)
        if group is not None:
            members = self._members.get(group)
            if members is not None:
                members.discard(name)
                if not members:
                    del self._members[group]

    def _evict(self) -> None:
        """Drop least recently used objects, each with its whole group, until within capacity (BE-22)."""
        if self.capacity_pages is None:
            return
        while len(self._objects) > self.capacity_pages:
            oldest = next(iter(self._objects))
            group = self._group_of.get(oldest)
            doomed = set(self._members.get(group, ())) | {oldest} if group is not None else {oldest}
            for name in doomed:
                entry = self._objects.pop(name, None)
                if entry is not None:
                    self.evictions += 1
                    self._release(entry)
                self._unlink(name)


_REGISTRY: dict[str, MemoryStore] = {}
_REGISTRY_LOCK = threading.Lock()


def shared_memory_store(name: str, capacity_pages: Optional[int] = None) -> MemoryStore:
    """Return the process-wide store called ``name``, creating it with ``capacity_pages`` on first use.

    Raises ValueError when the store exists with a different capacity.
    """
    with _REGISTRY_LOCK:
        store = _REGISTRY.get(name)
        if store is None:
            store = _REGISTRY[name] = MemoryStore(capacity_pages)
        elif store.capacity_pages != capacity_pages:
            raise ValueError(
                f"MemoryBackend.extra_config.capacity_pages: must match the capacity of shared store {name!r}, "
                f"{store.capacity_pages!r} (got {capacity_pages!r})"
            )
        return store


def forget_shared_memory_store(name: str) -> None:
    """Drop the process-wide store called ``name`` from the registry (instances holding it keep it)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)
