"""Host pages as bytes: the host-page IO helper every reference backend holds (``backend.host_pages``).

``HostPages`` knows where a registered pool's page lies and how its bytes
get in and out; it keeps no page and decides nothing about objects. The
strategies (strategies.py) use it to move pages between host slots and the
backend's object primitives:

- ``direct_views``: each page's host byte ranges as writable views in
  flat-page order, for a backend that reads straight into them
  (``reads_into_ranges``): where the pool lists its ranges in flat-page order
  (``PageFormat.flat_range_count``) and no page is addressed twice in the
  call (a failed read could then spoil a page that arrived). The primitive
  writes nothing unless the object has exactly the page's size, and a page
  that then fails part way is False: its own slots may hold part of it,
  nothing outside them is touched (BE-13, BE-15, BE-16);
- ``staging_buffer`` and ``copy_pages_into_pool``: otherwise a read lands in
  a per-thread staging buffer and is copied into its host slots only after
  the whole page arrived (BE-16);
- ``page_bytes``: the bytes a write sends, a copy of the flat page or, for a
  backend whose primitives take a page as its list of host byte ranges
  (``writes_from_ranges``), views of the pool itself (BE-17).

Where the ranges are is asked of a collaborator built with the helper,
``ranges`` (a ``PageRanges``, page_ranges.py, or the variant that the
backend's ``host_ranges_class`` names). See docs/backends.md, "Where reads
land".
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Optional, Sequence

import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.host_bytes import PageFormat, contiguous_parts, copy_ranges, page_ranges, tensor_bytes
from hicache_reference.backends.page_ranges import PageRanges

__all__ = ["HostPages"]


class HostPages:
    """Where a registered pool's pages lie and how their bytes get in and out; one per backend."""

    def __init__(self, ranges: PageRanges, guard: Callable[..., Any]) -> None:
        self.ranges = ranges
        """Where each page's host byte ranges are (``PageRanges`` or a variant), learnt once per pool."""
        self._guard = guard  # the backend's ``_guarded``: an exception is a failed page, counted (BE-5)
        self._staging = threading.local()

    # ============================================================ reading
    def direct_views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[Sequence[Sequence[memoryview]]]:
        """Return each page's host byte ranges as writable views in flat-page order, or None to read staged.

        None when a page is addressed twice in the call (a failed read could
        then spoil a page that arrived), or the pool's ranges are not in
        flat-page order or do not add up to the page.
        """
        if len(set(slots)) != len(slots):
            return None
        return self.ranges.views(pool, page_format, slots)

    def staging_buffer(self, byte_count: int) -> bytearray:
        """Return this thread's staging buffer of at least ``byte_count`` bytes (BE-16: reads land here first).

        One per thread (BE-23), kept between calls: a fresh buffer per call
        would cost a page fault per 4 KiB on every read.
        """
        buffer = getattr(self._staging, "buffer", None)
        if buffer is None or len(buffer) < byte_count:
            buffer = self._staging.buffer = bytearray(byte_count)
        return buffer

    def copy_pages_into_pool(
        self, pool: Any, page_format: PageFormat, staging: bytearray, whole: list[bool], slots: Sequence[int]
    ) -> list[bool]:
        """Copy each page that arrived whole from ``staging`` into its host slots, and nothing else (BE-16)."""
        size = page_format.byte_count
        ranges = None
        if page_format.range_count is not None:
            ranges = self._guard(page_ranges, None, pool, page_format, slots)
        if ranges is not None:  # memmove through the pool's byte ranges: the fast path
            base = ctypes.addressof((ctypes.c_char * len(staging)).from_buffer(staging))
            return [
                flag and self._guard(copy_ranges, False, base + index * size, ranges[index])
                for index, flag in enumerate(whole)
            ]
        return [
            flag
            and self._guard(
                self.copy_into_pool,
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
    def copy_into_pool(pool: Any, slot: int, page: torch.Tensor) -> bool:
        """Copy a whole flat page into the host slots from ``slot`` on, through the pool's own helper (BE-15)."""
        pool.set_from_flat_data_page(slot, page)
        return True

    # ============================================================ writing
    def write_views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[Sequence[Sequence[memoryview]]]:
        """Return each page's host byte ranges in flat-page order, to be sent as they are; None when not known."""
        return self.ranges.views(pool, page_format, slots)

    @staticmethod
    def page_bytes(pool: Any, page_format: PageFormat, slot: int, as_ranges: bool = False) -> Any:
        """Return the bytes of the host page at ``slot``, or None if it is not exactly one page.

        A copy of the flat page; with ``as_ranges``, a ``HostPagePool``'s page
        as the list of its contiguous parts in flat-page order, uncopied
        (views of the pool, which stays allocated until the write returns).
        """
        if as_ranges and isinstance(pool, HostPagePool):
            parts: list[memoryview] = []
            contiguous_parts(pool.get_data_page(slot, flat=False), parts)
            return parts if sum(part.nbytes for part in parts) == page_format.byte_count else None
        page = pool.get_data_page(slot, flat=True).detach()
        raw = page.cpu().contiguous().reshape(-1)
        if raw.numel() * raw.element_size() != page_format.byte_count:
            return None
        return tensor_bytes(raw)
