"""Pages between host slots and stored objects: the page IO every reference backend shares.

``HostPageIO`` moves whole pages of a registered pool between its host slots
and the object primitives (objects.py), and counts them. How the clauses are
kept here, once for every backend:

- a read lands in its page's own host byte ranges directly when the backend
  reads into ranges and the pool lists its ranges in flat-page order
  (``PageFormat.flat_range_count``); the primitive writes nothing unless the
  object has exactly the page's size, and a page that then fails part way is
  False (its own slots may hold part of it; nothing outside them is touched).
  Otherwise a read lands in a staging buffer and is copied into the host slots
  only after the whole page arrived with exactly the page's size (BE-13,
  BE-15, BE-16);
- with ``writes_from_ranges`` set, a write hands the primitive the page's host
  byte ranges (views of the pool) instead of one copied buffer (BE-17).

Where those ranges are is asked of a collaborator built with the backend,
``host_ranges`` (a ``PageRanges``, page_ranges.py, or the variant that
``host_ranges_class`` names). See docs/backends.md, "Where reads land".
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Optional, Sequence

import torch

from hicache_reference.backends.host_bytes import PageFormat, copy_ranges, page_ranges, tensor_bytes
from hicache_reference.backends.objects import ObjectStore
from hicache_reference.backends.page_ranges import PageRanges
from hicache_reference.backends.strategies import BATCHED, PageStrategy

__all__ = ["HostPageIO"]


class HostPageIO(ObjectStore):
    """Reads and writes of whole pages of the registered pools (``_read_pages``, ``_write_pages``, ``_present``)."""

    host_ranges_class: type[PageRanges] = PageRanges
    """The collaborator that finds each page's host byte ranges; a variant of ``PageRanges`` may be named here."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self._pools: dict[str, Any] = {}
        self._formats: dict[str, PageFormat] = {}
        self._staging = threading.local()
        self.host_ranges = self.host_ranges_class()
        """Where the registered pools' pages lie in host memory (``host_ranges_class``, built with the backend)."""

    # ============================================================ whole pages, by the backend's strategy
    strategy: PageStrategy = BATCHED
    """How whole pages move (strategies.py): ``PER_PAGE``, ``BATCHED`` or a backend's own; set by class or instance."""

    def _read_pages(self, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Read each page into its own host slots; True only for a page that arrived whole (BE-15, BE-16)."""
        return self.strategy.read(self, pool_name, keys, slots) if keys else []

    def _write_pages(
        self, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        """Write each host page as the object of its key; True only if it can be read back (BE-7, BE-17)."""
        return self.strategy.write(self, pool_name, keys, slots, groups) if keys else []

    def _present(self, pool_name: str, keys: Sequence[str]) -> list[bool]:
        """Return, per key, whether the pool holds a whole page for it (BE-13: short or empty is absent)."""
        return self.strategy.present(self, pool_name, keys) if keys else []

    @staticmethod
    def _flags(arrived: Any, count: int) -> list[bool]:
        """Return a batch primitive's answer as ``count`` bools; anything malformed is all False."""
        if not isinstance(arrived, list) or len(arrived) != count:
            return [False] * count
        return [flag is True for flag in arrived]

    def _count_reads(self, results: list[bool], byte_count: int) -> list[bool]:
        """Count a read's pages (True: landed whole, False: a miss) in the stats; return ``results``."""
        read = sum(results)
        self._counters.add(pages_read=read, bytes_read=read * byte_count, read_misses=len(results) - read)
        return results

    def _count_writes(self, results: list[bool], byte_count: int) -> list[bool]:
        """Count a write's pages (True: stored, False: failed) in the stats; return ``results``."""
        done = sum(results)
        self._counters.add(pages_written=done, bytes_written=done * byte_count, write_failures=len(results) - done)
        return results

    # ============================================================ where a page's bytes are
    def _direct_views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[Sequence[Sequence[memoryview]]]:
        """Return each page's host byte ranges as writable views in flat-page order, or None to read staged.

        None unless the backend reads into ranges and the pool lists its ranges
        in flat-page order; None too when a page is addressed twice in the call
        (a failed read could then spoil a page that arrived) or the pool's
        ranges do not add up to the page.
        """
        if not self.reads_into_ranges or len(set(slots)) != len(slots):
            return None
        return self.host_ranges.views(pool, page_format, slots)

    def _page_bytes(self, pool: Any, page_format: PageFormat, slot: int) -> Any:
        """Return the bytes of the host page at ``slot``, or None if it is not exactly one page."""
        page = pool.get_data_page(slot, flat=True).detach()
        raw = page.cpu().contiguous().reshape(-1)
        if raw.numel() * raw.element_size() != page_format.byte_count:
            return None
        return tensor_bytes(raw)

    # ============================================================ staged reads
    def _staging_buffer(self, byte_count: int) -> bytearray:
        """Return this thread's staging buffer of at least ``byte_count`` bytes (BE-16: reads land here first).

        One per thread (BE-23), kept between calls: a fresh buffer per call
        would cost a page fault per 4 KiB on every read.
        """
        buffer = getattr(self._staging, "buffer", None)
        if buffer is None or len(buffer) < byte_count:
            buffer = self._staging.buffer = bytearray(byte_count)
        return buffer

    def _copy_pages_into_pool(
        self, pool: Any, page_format: PageFormat, staging: bytearray, whole: list[bool], slots: Sequence[int]
    ) -> list[bool]:
        """Copy each page that arrived whole from ``staging`` into its host slots, and nothing else (BE-16)."""
        size = page_format.byte_count
        ranges = None
        if page_format.range_count is not None:
            ranges = self._guarded(page_ranges, None, pool, page_format, slots)
        if ranges is not None:  # memmove through the pool's byte ranges: the fast path
            base = ctypes.addressof((ctypes.c_char * len(staging)).from_buffer(staging))
            return [
                flag and self._guarded(copy_ranges, False, base + index * size, ranges[index])
                for index, flag in enumerate(whole)
            ]
        return [
            flag
            and self._guarded(
                self._copy_into_pool,
                False,
                pool,
                slot,
                torch.frombuffer(
                    staging, dtype=page_format.dtype, count=page_format.element_count, offset=index * size
                ),
            )
            for index, (flag, slot) in enumerate(zip(whole, slots))
        ]

    @staticmethod
    def _copy_into_pool(pool: Any, slot: int, page: torch.Tensor) -> bool:
        pool.set_from_flat_data_page(slot, page)
        return True
