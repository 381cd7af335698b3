"""Host-memory byte plumbing of the reference backends: page formats, byte ranges, views and copies.

Pure helpers with no backend state: how a registered pool's page looks as
bytes (``PageFormat``), where a page's bytes sit (``range_lists``,
``flat_order_range_count``), zero-copy views of host memory (``host_bytes``,
``tensor_bytes``, ``contiguous_parts``) and the copy through byte ranges
(``copy_ranges``). See docs/backends.md, "Where reads land".
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from hicache_contracts.host_pool import HostPagePool

__all__ = [
    "MAX_COPY_RANGES",
    "PageFormat",
    "contiguous_parts",
    "copy_ranges",
    "flat_order_range_count",
    "host_bytes",
    "page_ranges",
    "range_lists",
    "tensor_bytes",
]

MAX_COPY_RANGES = 8
"""Most byte ranges per page for which a memmove per range beats one ``set_from_flat_data_page``
(each memmove costs about a microsecond of Python; layer_first pools have 2 x layers ranges)."""


@dataclass(frozen=True)
class PageFormat:
    """How one page of a registered pool looks as bytes."""

    page_size: int
    """Token slots per page."""
    dtype: torch.dtype
    """Element type of a flat page."""
    element_count: int
    """Elements in a flat page."""
    byte_count: int
    """Bytes in a flat page: the exact size of every stored object of this pool (BE-13)."""
    slot_count: Optional[int]
    """Token slots in the pool, when the pool says (``size``); used to reject out-of-range slots."""
    range_count: Optional[int] = None
    """Byte ranges per page when reads may be copied in with memmove (a ``HostPagePool`` with at most
    ``MAX_COPY_RANGES`` of them); None to copy through ``set_from_flat_data_page``."""
    flat_range_count: Optional[int] = None
    """Byte ranges per page when the pool's ``get_page_buffer_meta`` lists them in flat-page order, so a read
    may land in them directly (see ``flat_order_range_count``); None when that order is not known."""

    @classmethod
    def of_pool(cls, pool: Any) -> PageFormat:
        """Read the format from a host pool (ours or SGLang's) through its page helpers."""
        dummy = pool.get_dummy_flat_data_page() if hasattr(pool, "get_dummy_flat_data_page") else None
        if dummy is None:
            dummy = pool.get_data_page(0, flat=True)
        dtype = dummy.dtype
        element_count = int(dummy.numel())
        slot_count = getattr(pool, "size", None)
        range_count = pool.ranges_per_page() if isinstance(pool, HostPagePool) else None
        byte_count = element_count * dummy.element_size()
        return cls(
            page_size=int(pool.page_size),
            dtype=dtype,
            element_count=element_count,
            byte_count=byte_count,
            slot_count=slot_count if isinstance(slot_count, int) else None,
            range_count=range_count if range_count is not None and range_count <= MAX_COPY_RANGES else None,
            flat_range_count=flat_order_range_count(pool, int(pool.page_size), byte_count),
        )


def flat_order_range_count(pool: Any, page_size: int, byte_count: int) -> Optional[int]:
    """Return the byte ranges per page if ``pool.get_page_buffer_meta`` lists them in flat-page order, else None.

    Reading a stored page (a flat page) into those ranges one after the other
    puts every byte where ``set_from_flat_data_page`` would only if they come
    in that order. A ``HostPagePool`` documents it (docs/host_pool.md). Any
    other pool is checked once, on its first page: the addresses of the
    elements of ``get_data_page(0, flat=False)``, taken in flat order, must be
    exactly the bytes of the listed ranges, one range after the other (the
    flat page is taken to be that view flattened, as it is in SGLang's pools
    and ours). A pool whose page is a copy fails the check, and so does
    SGLang's layer_first MHA pool, which lists K and V layer by layer while its
    flat page holds every K layer first; such pools are read through the
    staging buffer.
    """
    if isinstance(pool, HostPagePool):
        return pool.ranges_per_page()
    if not callable(getattr(pool, "get_page_buffer_meta", None)):
        return None
    try:
        page = pool.get_data_page(0, flat=False)
        pointers, sizes = pool.get_page_buffer_meta(torch.arange(page_size, dtype=torch.int64))
        pointers, sizes = [int(pointer) for pointer in pointers], [int(size) for size in sizes]
        element = page.element_size()
        if (
            page.device.type != "cpu"
            or page.numel() * element != byte_count
            or not pointers
            or len(pointers) != len(sizes)
            or sum(sizes) != byte_count
            or any(size <= 0 or size % element for size in sizes)
        ):
            return None
        offsets = torch.zeros((), dtype=torch.int64)
        for length, stride in zip(page.shape, page.stride()):
            offsets = offsets.unsqueeze(-1) + torch.arange(length, dtype=torch.int64) * stride
        viewed = page.data_ptr() + offsets.reshape(-1) * element
        listed = torch.cat(
            [pointer + torch.arange(0, size, element, dtype=torch.int64) for pointer, size in zip(pointers, sizes)]
        )
        return len(pointers) if torch.equal(viewed, listed) else None
    except Exception:  # any surprise from a foreign pool: its order is not known, read through staging
        return None


def range_lists(pool: Any, page_format: PageFormat, slots: Sequence[int], per_page: int) -> tuple[list[int], list[int]]:
    """Return ``get_page_buffer_meta`` of the pages at ``slots`` as two lists of ints, checked.

    Raises unless there are ``per_page`` ranges per page, each of positive
    size, and every page's ranges add up to exactly one page.
    """
    page_size = page_format.page_size
    starts = torch.tensor(list(slots), dtype=torch.int64)
    indices = (starts[:, None] + torch.arange(page_size, dtype=torch.int64)[None, :]).reshape(-1)
    pointers, sizes = pool.get_page_buffer_meta(indices)
    pointers, sizes = list(map(int, pointers)), list(map(int, sizes))
    if len(pointers) != per_page * len(slots) or len(sizes) != len(pointers):
        raise RuntimeError("host pool byte ranges do not match the pages asked for")
    if min(sizes) <= 0 or min(pointers) <= 0:
        raise RuntimeError("host pool byte ranges must have positive addresses and sizes")
    uniform = sizes.count(sizes[0]) == len(sizes) and sizes[0] * per_page == page_format.byte_count
    if not uniform and any(
        sum(sizes[first : first + per_page]) != page_format.byte_count for first in range(0, len(sizes), per_page)
    ):
        raise RuntimeError("host pool byte ranges do not match the page size")
    return pointers, sizes


def page_ranges(
    pool: Any, page_format: PageFormat, slots: Sequence[int], per_page: Optional[int] = None
) -> list[list[tuple[int, int]]]:
    """Return each page's (pointer, size) byte ranges, in flat-page order (``range_lists``, grouped per page).

    ``per_page`` defaults to ``page_format.range_count``.
    """
    if per_page is None:
        assert page_format.range_count is not None  # set for every format a backend copies through ranges
        per_page = page_format.range_count
    pointers, sizes = range_lists(pool, page_format, slots, per_page)
    pairs = list(zip(pointers, sizes))
    return [pairs[first : first + per_page] for first in range(0, len(pairs), per_page)]


def copy_ranges(source: int, ranges: list[tuple[int, int]]) -> bool:
    """Copy one whole page from address ``source`` into its host byte ranges (only those: BE-16)."""
    for pointer, count in ranges:
        ctypes.memmove(pointer, source, count)
        source += count
    return True


_memory_view_of = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)(
    ("PyMemoryView_FromMemory", ctypes.pythonapi)
)
_WRITABLE = 0x200
"""PyBUF_WRITE: the view may be written through."""


def host_bytes(pointer: int, size: int) -> memoryview:
    """Return a writable memoryview of ``size`` bytes at host address ``pointer``, without a copy.

    The view does not keep the memory alive: the pool that owns it must outlive
    it. (``PyMemoryView_FromMemory`` rather than a ctypes array: ctypes keeps
    every array type it makes, one per distinct size, for good.)
    """
    return _memory_view_of(pointer, size, _WRITABLE)


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """Return the bytes of a contiguous CPU tensor as a memoryview, without a copy (and without NumPy).

    The view keeps the tensor alive.
    """
    count = tensor.numel() * tensor.element_size()
    if count == 0:
        return memoryview(b"")
    array = (ctypes.c_ubyte * count).from_address(tensor.data_ptr())
    # The memory belongs to the tensor: keep it alive as long as the view. (ctypes arrays take attributes; the
    # stubs declare none.)
    array.owner = tensor  # type: ignore[attr-defined]
    return memoryview(array).cast("B")


def contiguous_parts(tensor: Any, parts: list) -> None:
    """Append the bytes of ``tensor`` to ``parts`` as views of its largest contiguous blocks, in index order."""
    if tensor.is_contiguous():
        parts.append(tensor_bytes(tensor))
        return
    for index in range(tensor.shape[0]):
        contiguous_parts(tensor[index], parts)
