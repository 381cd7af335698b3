"""Slabs of the memory store: preallocated rows for the pages of one format, and the copy into and out of them.

A slab holds the pages of one page format (element type and page shape) as
rows of preallocated tensors, grown by doubling, whose free rows are kept on a
free list and reused first; a stored entry is a plain int (slab number and
row, ``ROW_BITS``). See memory_store.py and docs/backends.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from hicache_spec.values import is_count

__all__ = ["ROW_BITS", "ROW_MASK", "byte_count", "is_capacity"]  # the rest is private to the memory store


def byte_count(page: torch.Tensor) -> int:
    """Bytes held by ``page``."""
    return page.numel() * page.element_size()


def _reinterpreted(page: torch.Tensor, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """Return the bytes of a page as a tensor of ``dtype`` and ``shape`` (a view of a contiguous page)."""
    return page.contiguous().reshape(-1).view(torch.uint8).view(dtype).view(shape)


def is_capacity(value: Any) -> bool:
    """Whether ``value`` is a valid ``capacity_pages``: None, or an int >= 1 (a bool is not a count)."""
    return value is None or is_count(value, 1)


# ---------------------------------------------------------------- slabs
_FIRST_CHUNK_ROWS = 64
"""Rows of a slab's first chunk; each later chunk doubles the slab."""


class _Slab:
    """Preallocated rows for the pages of one format: chunks that double the slab, and a free list.

    Row ``r`` lives in the chunk whose start is the last one not above ``r``;
    ``views[r]`` is a view of it, made with its chunk. Every method runs under the owning store's lock, except
    the copies into rows a writer has reserved.
    """

    __slots__ = ("number", "dtype", "shape", "row_bytes", "chunks", "starts", "rows", "free", "views")

    def __init__(self, number: int, dtype: torch.dtype, shape: tuple) -> None:
        self.number = number
        """The slab's place in its store: the high bits of each of its entries."""
        self.dtype = dtype
        self.shape = shape
        """The shape of one page (its host view without the page dimension)."""
        elements = 1
        for extent in shape:
            elements *= extent
        self.row_bytes = elements * torch.empty((), dtype=dtype).element_size()
        """Bytes of one page."""
        self.chunks: list[torch.Tensor] = []
        self.starts: list[int] = []
        self.rows = 0
        """Rows in every chunk together."""
        self.free: list[int] = []
        """Free rows; the last ones are taken first (a new chunk's lowest rows sit at the end)."""
        self.views: list[torch.Tensor] = []
        """A view of every row (``views[r]`` is row ``r``), made once with its chunk."""

    @property
    def live(self) -> int:
        """Rows held by a stored page or a write in flight."""
        return self.rows - len(self.free)

    def reserve(self, count: int) -> list[int]:
        """Take ``count`` free rows, growing the slab when short; ascending, so a batch gets runs of rows."""
        if len(self.free) < count:
            self._grow(count - len(self.free))
        taken = self.free[len(self.free) - count :]
        del self.free[len(self.free) - count :]
        taken.sort()
        return taken

    def _grow(self, missing: int) -> None:
        rows = max(_FIRST_CHUNK_ROWS, self.rows, missing)  # doubling: at most 2x the rows live at once
        chunk = torch.empty((rows, *self.shape), dtype=self.dtype)
        start = self.rows
        self.chunks.append(chunk)
        self.starts.append(start)
        self.rows += rows
        self.free.extend(range(start + rows - 1, start - 1, -1))
        self.views.extend(chunk.unbind(0))  # made once: a view costs about a microsecond

    def row(self, row: int) -> torch.Tensor:
        """Return a view of ``row`` (page shaped)."""
        return self.views[row]

    def row_views(self, rows: Sequence[int]) -> list[torch.Tensor]:
        """Return a view of each row."""
        views = self.views
        return [views[row] for row in rows]

    def nbytes(self) -> int:
        return self.rows * self.row_bytes


ROW_BITS = 40
"""A slab entry is ``slab.number << ROW_BITS | row``: a plain int, which the garbage collector never visits."""
ROW_MASK = (1 << ROW_BITS) - 1
