"""Where the pages of a registered pool lie in host memory: the views reads land in and writes send from.

``PageRanges`` is the page IO's collaborator (page_io.py): one per backend,
built with it, asked for the byte ranges of a call's pages and handed the
pool, its ``PageFormat`` and the slots. For a ``HostPagePool`` it reads the
pool's layout once (``layout``: where ``get_page_buffer_meta`` puts the
ranges of a page, as offsets and a stride) and keeps it, with one view over
the pool's whole buffer, so that a call's views are slices of that view; any
other pool is asked through ``get_page_buffer_meta`` on every call. A variant
(a test's, say) subclasses it and is named by the backend's
``host_ranges_class``. See docs/backends.md, "Where reads land".
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.host_bytes import PageFormat, host_bytes, range_lists

__all__ = ["CACHED_VIEWS", "PageRanges", "PoolLayout"]

CACHED_VIEWS = 1 << 16
"""Most page views kept per pool between calls (about 200 bytes each); past it they are dropped and cut again."""


@dataclass(frozen=True)
class PoolLayout:
    """The ranges of the page at token slot ``s``: ``offsets[i] + s * slot_bytes``, ``sizes[i]`` bytes each."""

    offsets: tuple[int, ...]
    """Byte offset of each range of the page at slot 0 from the start of the pool's buffer, in flat-page order."""
    slot_bytes: int
    """How far the ranges move per token slot."""
    sizes: tuple[int, ...]
    """Bytes in each range."""


class PageRanges:
    """Each page's host byte ranges as writable views in flat-page order; per pool, what it learnt once."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, Optional[PoolLayout], Optional[memoryview], int, dict[int, Any]]] = {}
        self._lock = threading.Lock()

    def views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[Sequence[Sequence[memoryview]]]:
        """Return the views of the pages at ``slots`` (first token slots), or None when they are not known.

        None when the pool does not list its ranges in flat-page order, or
        they do not add up to the page. The views do not keep the pool alive:
        the registered pool outlives the call. A ``HostPagePool``'s pages come
        as tuples, kept for later calls: nobody may change them.
        """
        per_page = page_format.flat_range_count
        if per_page is None or not slots:
            return None
        try:
            _, layout, whole, kept = self._learnt(pool, page_format)
            if layout is not None and whole is not None:
                try:
                    return list(map(kept.__getitem__, slots))  # every page cut by an earlier call
                except KeyError:
                    pass
                cut = self._cut(layout, whole, slots)
                if cut is not None:
                    if (len(kept) + len(slots)) * per_page > CACHED_VIEWS:
                        kept.clear()
                    kept.update(zip(slots, cut))
                return cut
            pointers, sizes = range_lists(pool, page_format, slots, per_page)
        except Exception:  # the pool could not say where its pages are: the caller goes through a copy instead
            return None
        # One view over the call's whole address span, cut into the ranges: a slice costs far less than a view.
        low = min(pointers)
        span = host_bytes(low, max(map(operator.add, pointers, sizes)) - low)
        ranges = [span[pointer - low : pointer - low + size] for pointer, size in zip(pointers, sizes)]
        return [ranges[first : first + per_page] for first in range(0, len(ranges), per_page)]

    def layout(self, pool: Any, page_format: PageFormat) -> Optional[PoolLayout]:
        """Return the layout of a ``HostPagePool`` read from its answers for its first two pages, else None.

        ``HostPagePool.get_page_buffer_meta`` lists the ranges of the page at
        slot ``s`` at ``kv_buffer.data_ptr() + offset + s * slot_bytes``
        (docs/host_pool.md). Only the class itself: a subclass or a patched
        instance may list other ranges.
        """
        per_page = page_format.flat_range_count
        if (
            per_page is None
            or type(pool) is not HostPagePool
            or "get_page_buffer_meta" in vars(pool)
            or pool.page_count < 2
        ):
            return None
        page_size = page_format.page_size
        first, sizes = range_lists(pool, page_format, [0], per_page)
        second, _ = range_lists(pool, page_format, [page_size], per_page)
        strides = {(later - earlier) // page_size for earlier, later in zip(first, second)}
        if len(strides) != 1 or min(strides) <= 0:
            return None
        base = pool.kv_buffer.data_ptr()
        return PoolLayout(tuple(pointer - base for pointer in first), strides.pop(), tuple(sizes))

    def _learnt(
        self, pool: Any, page_format: PageFormat
    ) -> tuple[Any, Optional[PoolLayout], Optional[memoryview], dict[int, Any]]:
        """Return (pool, its layout or None, a view of its whole buffer or None, the page views kept so far by
        first slot), read once per pool and again when its buffer was replaced."""
        known = self._known.get(id(pool))
        if known is not None and known[0] is pool:
            whole = known[2]
            if whole is None or known[3] == pool.kv_buffer.data_ptr():  # the same buffer: not replaced since
                return known[0], known[1], whole, known[4]
        layout = self.layout(pool, page_format)
        whole, base = None, 0
        if layout is not None:
            buffer = pool.kv_buffer
            base = buffer.data_ptr()
            whole = host_bytes(base, buffer.numel() * buffer.element_size())
        kept: dict[int, Any] = {}
        with self._lock:
            self._known[id(pool)] = (pool, layout, whole, base, kept)
        return pool, layout, whole, kept

    @staticmethod
    def _cut(layout: PoolLayout, whole: memoryview, slots: Sequence[int]) -> Optional[list[tuple[memoryview, ...]]]:
        """Slice the views of the pages at ``slots`` out of ``whole``; None when one would reach past its end."""
        offsets, stride, sizes = layout.offsets, layout.slot_bytes, layout.sizes
        last = max(slots) * stride + max(map(operator.add, offsets, sizes))
        if min(slots) < 0 or min(offsets) < 0 or last > whole.nbytes:
            return None  # never a view cut short by the end of the buffer: read through a copy instead
        starts = list(map(stride.__mul__, slots))
        # Range by range over every page, then regrouped per page: far fewer Python frames than page by page.
        columns = [
            [whole[start : start + size] for start in [offset + first for first in starts]]
            for offset, size in zip(offsets, sizes)
        ]
        return list(zip(*columns))
