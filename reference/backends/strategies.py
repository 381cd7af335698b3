"""How whole pages move between host slots and stored objects: the plain per-page path and the batched fast paths.

Every reference backend moves pages with one of these named strategies, held
in its ``strategy`` attribute and chosen explicitly (a class sets its
default; an instance or a subclass may name another):

- ``PER_PAGE`` (``PerPage``): one page at a time through the single-object
  primitives (``_object_size``, ``_read_object_into``, ``_write_object``).
  The plain path: it reads like the clauses, and any backend that supplies
  the primitives gets it right. A subclass that replaces a single-object
  primitive and wants every call to go through it names this strategy.
- ``BATCHED`` (``Batched``): the whole call through the store's batch forms
  (``_object_sizes``, ``_read_objects_into``, ``_read_objects_into_ranges``,
  ``_write_objects``): one loop per call for files, one pipeline per node for
  Redis; reads land in the page's own host byte ranges where the backend and
  the pool allow it.
- ``SLAB_ROWS`` (``SlabRows``, memory.py's default): pools whose bytes sit
  where their layout says move as a batch between host pages and the memory
  store's slab rows, in one foreach copy; any other pool goes ``BATCHED``.

The strategies keep the same clauses, so the vendor suite gives the same
verdicts with each (tests/reference/test_strategies.py runs it on every
reference backend with every strategy); benchmarks/bench_strategies.py
measures each fast path against ``PER_PAGE`` in the same run.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

__all__ = ["BATCHED", "PER_PAGE", "SLAB_ROWS", "Batched", "PageStrategy", "PerPage", "SlabRows"]


class PageStrategy:
    """How a backend reads, writes and finds whole pages of a registered pool (see the module docstring).

    Each method gets the backend (its primitives, pools, formats and
    counters), the pool's name and the call's keys; it returns one bool per
    key and counts the pages in the backend's stats.
    """

    name: str = ""
    """The strategy's name, as reports and benchmarks show it."""

    def present(self, backend: Any, pool_name: str, keys: Sequence[str]) -> list[bool]:
        """Return, per key, whether the pool holds a whole page for it (BE-13)."""
        raise NotImplementedError

    def read(self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Read each page into the host slots from ``slots[i]`` on; True only for a page that landed whole."""
        raise NotImplementedError

    def write(
        self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        """Store the host page at each slot as its key's object; True only if it can be read back."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<page strategy {self.name}>"


def _direct_views(backend: Any, pool: Any, page_format: Any, slots: Sequence[int]) -> Any:
    """Each page's own host byte ranges to read into, where the backend reads into ranges; else None (staged)."""
    return backend.host_pages.direct_views(pool, page_format, slots) if backend.reads_into_ranges else None


def _page_bytes(backend: Any, pool: Any, page_format: Any, slot: int) -> Any:
    """The bytes a write of the host page at ``slot`` sends (None: not exactly one page, it is not stored)."""
    return backend._guarded(backend.host_pages.page_bytes, None, pool, page_format, slot, backend.writes_from_ranges)


def _flags(arrived: Any, count: int) -> list[bool]:
    """A batch primitive's answer as ``count`` bools; anything malformed is all False."""
    if not isinstance(arrived, list) or len(arrived) != count:
        return [False] * count
    return [flag is True for flag in arrived]


def _count_reads(backend: Any, results: list[bool], byte_count: int) -> list[bool]:
    """Count a read's pages (True: landed whole, False: a miss) in the backend's stats (BE-12); return them."""
    read = sum(results)
    backend._counters.add(pages_read=read, bytes_read=read * byte_count, read_misses=len(results) - read)
    return results


def _count_writes(backend: Any, results: list[bool], byte_count: int) -> list[bool]:
    """Count a write's pages (True: stored, False: failed) in the backend's stats (BE-12); return them."""
    done = sum(results)
    backend._counters.add(pages_written=done, bytes_written=done * byte_count, write_failures=len(results) - done)
    return results


def _whole_page(size: Any, pool_format: Any) -> bool:
    """BE-13: an object is a page only when it has exactly the page's size (any size > 0 with no pool registered)."""
    if pool_format is None:
        return isinstance(size, int) and size > 0
    return size == pool_format.byte_count


class PerPage(PageStrategy):
    """One page at a time through the single-object primitives: the plain path, clause by clause."""

    name = "per-page"

    def present(self, backend: Any, pool_name: str, keys: Sequence[str]) -> list[bool]:
        page_format = backend._formats.get(pool_name)
        return [
            # BE-5: a failing size is no page; BE-13: a short or empty object is a miss.
            _whole_page(backend._guarded(backend._object_size, None, backend._name(key, pool_name)), page_format)
            for key in keys
        ]

    def read(self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        pool, page_format = backend._pools[pool_name], backend._formats[pool_name]
        # Each page's own host byte ranges, where the backend reads into ranges and the pool lists them in
        # flat-page order (None otherwise, or when the call addresses a page twice: see ``_direct_views``).
        page_views = _direct_views(backend, pool, page_format, slots) or [None] * len(keys)
        results = [
            self._read_page(backend, pool, page_format, backend._name(key, pool_name), slot, views)
            for key, slot, views in zip(keys, slots, page_views)
        ]
        return _count_reads(backend, results, page_format.byte_count)

    @staticmethod
    def _read_page(backend: Any, pool: Any, page_format: Any, name: Any, slot: int, views: Any) -> bool:
        """Read one page: straight into its own byte ranges, or into a buffer of its own and then its slots."""
        # BE-13: the primitives fill nothing unless the object has exactly the page's size;
        # BE-5: a storage error is a miss.
        if views is not None:
            # BE-15, BE-16: only this page's own ranges are written; True only once all of them are full.
            return backend._guarded(backend._read_object_into_ranges, False, name, views) is True
        staging = bytearray(page_format.byte_count)
        # BE-16: the page lands here first, so a read that fails touches no host slot.
        if backend._guarded(backend._read_object_into, False, name, memoryview(staging)) is not True:
            return False
        # BE-15: the whole page goes into the slots of this page, and only those, through the pool's own helper.
        page = torch.frombuffer(staging, dtype=page_format.dtype, count=page_format.element_count)
        return backend._guarded(backend.host_pages.copy_into_pool, False, pool, slot, page) is True

    def write(
        self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        pool, page_format = backend._pools[pool_name], backend._formats[pool_name]
        results = []
        for key, slot, group in zip(keys, slots, groups):
            # The host page's bytes, or None when the pool does not give exactly one page (then it is not stored).
            data = _page_bytes(backend, pool, page_format, slot)
            # BE-7: the primitive stores the page whole or not at all; BE-17: True only if it can be read back;
            # BE-22: ``group`` names the objects that go together (a KV page and its derived sidecars).
            stored = data is not None and backend._guarded(
                backend._write_object, False, backend._name(key, pool_name), data, group
            )
            results.append(stored is True)
        return _count_writes(backend, results, page_format.byte_count)


class Batched(PageStrategy):
    """The whole call through the store's batch forms; reads straight into host byte ranges where allowed."""

    name = "batched"

    def present(self, backend: Any, pool_name: str, keys: Sequence[str]) -> list[bool]:
        page_format = backend._formats.get(pool_name)
        sizes = backend._guarded(backend._object_sizes, None, backend._names(keys, pool_name))
        if not isinstance(sizes, list) or len(sizes) != len(keys):
            return [False] * len(keys)
        return [_whole_page(size, page_format) for size in sizes]

    def read(self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Straight into each page's byte ranges where the backend and the pool allow it (``_direct_views``);
        otherwise into a staging buffer, copied into the host slots only once the page arrived whole."""
        count = len(keys)
        pool, page_format = backend._pools[pool_name], backend._formats[pool_name]
        size = page_format.byte_count
        names = backend._names(keys, pool_name)
        page_views = _direct_views(backend, pool, page_format, slots)
        if page_views is not None:
            arrived = backend._guarded(backend._read_objects_into_ranges, None, names, page_views)
            results = _flags(arrived, count)
        else:
            staging = backend.host_pages.staging_buffer(size * count)
            view = memoryview(staging)
            buffers = [view[index * size : (index + 1) * size] for index in range(count)]
            results = _flags(backend._guarded(backend._read_objects_into, None, names, buffers), count)
            if any(results):
                results = backend.host_pages.copy_pages_into_pool(pool, page_format, staging, results, slots)
        return _count_reads(backend, results, size)

    def write(
        self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        """The host pages as their byte ranges (``writes_from_ranges``) or as copies, in one batch write."""
        count = len(keys)
        pool, page_format = backend._pools[pool_name], backend._formats[pool_name]
        datas = backend.host_pages.write_views(pool, page_format, slots) if backend.writes_from_ranges else None
        if datas is None:
            datas = [_page_bytes(backend, pool, page_format, slot) for slot in slots]
        written = backend._guarded(backend._write_objects, None, backend._names(keys, pool_name), datas, groups)
        return _count_writes(backend, _flags(written, count), page_format.byte_count)


class SlabRows(Batched):
    """Memory backend: known-layout pools as one batch between host pages and slab rows; others ``Batched``.

    A pool is known when the memory backend found its pages at registration
    (``MemoryBackend._page_views``: a ``HostPagePool`` with its own helpers and
    a contiguous CPU buffer). A read that addresses a page twice goes
    ``Batched`` too.
    """

    name = "slab-rows"

    def read(self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        host = backend._page_views.get(pool_name)
        if host is None or len(set(slots)) != len(slots):
            return super().read(backend, pool_name, keys, slots)
        page_format = backend._formats[pool_name]
        numbers = [slot // page_format.page_size for slot in slots]  # BE-15: the page's own slots (BE-16)
        loaded = backend._guarded(backend._load_pages, None, backend._names(keys, pool_name), host, numbers)
        return _count_reads(backend, _flags(loaded, len(keys)), page_format.byte_count)

    def write(
        self, backend: Any, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        host = backend._page_views.get(pool_name)
        if host is None:
            return super().write(backend, pool_name, keys, slots, groups)
        page_format = backend._formats[pool_name]
        numbers = [slot // page_format.page_size for slot in slots]
        names = backend._names(keys, pool_name)
        stored = backend._guarded(backend._store_pages, None, names, list(groups), host, numbers)  # BE-7, BE-17
        return _count_writes(backend, _flags(stored, len(keys)), page_format.byte_count)


PER_PAGE = PerPage()
"""The plain path: one page at a time through the single-object primitives."""
BATCHED = Batched()
"""The store's batch forms: one loop, one pipeline per node, reads into host byte ranges."""
SLAB_ROWS = SlabRows()
"""The memory backend's slab rows for known-layout pools, ``BATCHED`` for the others."""
