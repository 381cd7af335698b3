"""The host page pool: the host-memory KV cache that storage backends read and write.

``HostPagePool`` mimics the parts of SGLang's host KV cache that storage
backends use (``page_size``, ``size_per_token``, ``kv_buffer``, ``layout``,
``get_data_page``, ``set_from_flat_data_page``, ``get_dummy_flat_data_page``,
``get_page_buffer_meta``), plus whole-page allocation for the controller.

Addressing (BE-15): a page is ``page_size`` consecutive token slots and is
addressed by the host slot index of its first token, which is always a
multiple of ``page_size``. Every index is checked before anything is read or
written; a bad one raises ``ContractViolation`` naming the field and writes
nothing (BE-16). The byte layout of a page, per layout and kind, is in
``docs/host_pool.md``.
"""

from __future__ import annotations

import operator
import threading
from collections import deque
from typing import Any, Sequence

import torch

from hicache_contracts.errors import FieldErrors
from hicache_spec.values import is_count

__all__ = ["KINDS", "LAYOUTS", "HostPagePool"]

KINDS: dict[str, int] = {"mha": 2, "mla": 1}
"""Attention kinds and their component count: MHA stores K and V, MLA one latent."""

LAYOUTS: tuple[str, ...] = ("layer_first", "page_first")
"""Buffer layouts: ``layer_first`` is ``[component, layer, slot, head, dim]``,
``page_first`` is ``[component, slot, layer, head, dim]``."""

_CLASS = "HostPagePool"


_ERRORS = FieldErrors(_CLASS)
"""The pool's errors: a broken rule names its clause; a bad constructor argument (the pool's own geometry) none."""


def _positive_int(field: str, value: Any) -> int:
    if not is_count(value, 1):
        raise _ERRORS.bad(field, "must be a positive int", value)
    return int(value)


class HostPagePool:
    """A host-memory KV pool of ``page_count`` pages, allocated and addressed in whole pages.

    ``kind="mha"`` holds K and V (two components), ``kind="mla"`` one latent
    per token (one component; ``head_num`` is usually 1). The buffer lives in
    pinned memory when the platform can pin (``pin_memory=None`` pins exactly
    when ``torch.cuda.is_available()``) and in plain memory otherwise; a box
    without an accelerator never fails here. Allocation is thread-safe; reads
    and writes of distinct pages may run concurrently.
    """

    def __init__(
        self,
        page_count: int,
        page_size: int,
        layer_num: int,
        head_num: int,
        head_dim: int,
        dtype: torch.dtype = torch.float16,
        kind: str = "mha",
        layout: str = "layer_first",
        pin_memory: bool | None = None,
    ) -> None:
        self.page_count = _positive_int("page_count", page_count)
        """Number of pages in the pool."""
        self.page_size = _positive_int("page_size", page_size)
        """Tokens per page; the unit of allocation and of L3 storage."""
        self.layer_num = _positive_int("layer_num", layer_num)
        """Attention layers held per token."""
        self.head_num = _positive_int("head_num", head_num)
        """Heads per layer per component (1 for MLA)."""
        self.head_dim = _positive_int("head_dim", head_dim)
        """Elements per head (the latent width for MLA)."""
        if not isinstance(dtype, torch.dtype):
            raise _ERRORS.bad("dtype", "must be a torch.dtype", dtype)
        self.dtype = dtype
        """Element type of the buffer and of every flat page."""
        if kind not in KINDS:
            raise _ERRORS.bad("kind", f"must be one of {sorted(KINDS)}", kind)
        self.kind = kind
        """``"mha"`` (K and V) or ``"mla"`` (one latent)."""
        if layout not in LAYOUTS:
            raise _ERRORS.bad("layout", f"must be one of {list(LAYOUTS)}", layout)
        self.layout = layout
        """``"layer_first"`` or ``"page_first"``; SGLang backends read this name."""
        if pin_memory is not None and not isinstance(pin_memory, bool):
            raise _ERRORS.bad("pin_memory", "must be None, True or False", pin_memory)

        self.component_count = KINDS[kind]
        """2 for MHA (K then V), 1 for MLA."""
        self.size = self.page_count * self.page_size
        """Token slots in the pool."""
        self.device = "cpu"
        """The pool lives in host memory."""
        element_size = torch.empty((), dtype=dtype).element_size()
        self.element_size = element_size
        """Bytes per element of ``dtype``."""
        self.size_per_token = self.component_count * self.layer_num * self.head_num * self.head_dim * element_size
        """Bytes per token across all components and layers."""
        self.page_bytes = self.size_per_token * self.page_size
        """Bytes per page; the size of a flat page in bytes."""
        self.kv_buffer = self._allocate_buffer(pin_memory)
        """The whole pool: ``[component, layer, slot, head, dim]`` (layer_first) or
        ``[component, slot, layer, head, dim]`` (page_first)."""

        self._lock = threading.Lock()
        self._free_pages: deque[int] = deque(range(self.page_count))
        self._page_in_use = [False] * self.page_count

    # ------------------------------------------------------------------ memory
    def _buffer_shape(self) -> tuple[int, ...]:
        if self.layout == "layer_first":
            return (self.component_count, self.layer_num, self.size, self.head_num, self.head_dim)
        return (self.component_count, self.size, self.layer_num, self.head_num, self.head_dim)

    def _allocate_buffer(self, pin_memory: bool | None) -> torch.Tensor:
        shape = self._buffer_shape()
        want_pinned = torch.cuda.is_available() if pin_memory is None else pin_memory
        if want_pinned:
            try:
                return torch.zeros(shape, dtype=self.dtype, pin_memory=True)
            except RuntimeError:
                pass  # no accelerator to pin for: plain memory serves the same bytes
        return torch.zeros(shape, dtype=self.dtype)

    @property
    def pinned(self) -> bool:
        """Whether the buffer is in page-locked (pinned) memory."""
        return bool(self.kv_buffer.is_pinned())

    def get_size_per_token(self) -> int:
        """Return ``size_per_token`` (SGLang's accessor)."""
        return self.size_per_token

    def get_ksize_per_token(self) -> int:
        """Return bytes per token of one component (K alone for MHA, the latent for MLA)."""
        return self.size_per_token // self.component_count

    # -------------------------------------------------------------- allocation
    def available_pages(self) -> int:
        """Return the number of free pages."""
        with self._lock:
            return len(self._free_pages)

    def used_pages(self) -> int:
        """Return the number of allocated pages."""
        with self._lock:
            return self.page_count - len(self._free_pages)

    def available_size(self) -> int:
        """Return the number of free token slots (SGLang's accessor)."""
        return self.available_pages() * self.page_size

    def alloc(self, page_count: int) -> torch.Tensor | None:
        """Allocate ``page_count`` whole pages; return their token slots, or None when short.

        The result is a 1-D int64 tensor of ``page_count * page_size`` slots:
        page by page, each page's slots consecutive and starting at a multiple
        of ``page_size``. Pages need not be adjacent to each other.
        """
        if not is_count(page_count):
            raise _ERRORS.bad("page_count", "must be an int >= 0", page_count)
        with self._lock:
            if page_count > len(self._free_pages):
                return None
            pages = [self._free_pages.popleft() for _ in range(page_count)]
            for page in pages:
                self._page_in_use[page] = True
        return self._slots_of_pages(pages)

    def free(self, indices: torch.Tensor | Sequence[int]) -> int:
        """Free the pages whose token slots are ``indices`` (as ``alloc`` returned them).

        Every page must be whole, allocated and named once; otherwise nothing
        is freed and ``ContractViolation`` names the rule. Returns the number
        of pages freed.
        """
        starts = self._page_starts("indices", indices)
        pages = [start // self.page_size for start in starts]
        if len(set(pages)) != len(pages):
            repeated = next(start for start, page in zip(starts, pages) if pages.count(page) > 1)
            raise _ERRORS.violation("indices", "must name each page once (this page start repeats)", repeated, "BE-16")
        with self._lock:
            for start, page in zip(starts, pages):
                if not self._page_in_use[page]:
                    raise _ERRORS.violation(
                        "indices",
                        "must name allocated pages only (double free of the page at this slot)",
                        start,
                        "BE-16",
                    )
            for page in pages:
                self._page_in_use[page] = False
                self._free_pages.append(page)
        return len(pages)

    def _slots_of_pages(self, pages: list[int]) -> torch.Tensor:
        if not pages:
            return torch.empty(0, dtype=torch.int64)
        starts = torch.tensor(pages, dtype=torch.int64) * self.page_size
        offsets = torch.arange(self.page_size, dtype=torch.int64)
        return (starts[:, None] + offsets[None, :]).reshape(-1)

    # -------------------------------------------------------------- addressing
    def _page_start(self, field: str, index: Any) -> int:
        """Return ``index`` as the first slot of a page, or raise naming ``field`` (BE-15)."""
        if isinstance(index, bool) or (isinstance(index, torch.Tensor) and index.is_floating_point()):
            raise _ERRORS.violation(field, "must be an int slot index", index, "BE-15")
        try:
            start = operator.index(index)
        except TypeError:
            raise _ERRORS.violation(field, "must be an int slot index", index, "BE-15") from None
        if not 0 <= start < self.size:
            raise _ERRORS.violation(field, f"must be a slot in [0, {self.size})", start, "BE-15")
        if start % self.page_size != 0:
            raise _ERRORS.violation(
                field, f"must be page-aligned, a multiple of page_size {self.page_size}", start, "BE-15"
            )
        return start

    def _page_starts(self, field: str, indices: Any) -> list[int]:
        """Return the first slot of each page in ``indices`` (all slots of whole pages), or raise."""
        if isinstance(indices, torch.Tensor):
            if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
                raise _ERRORS.violation(field, "must hold integer slot indices", indices.dtype, "BE-15")
            if indices.dim() != 1:
                raise _ERRORS.violation(field, "must be 1-D", tuple(indices.shape), "BE-15")
            slots = indices.to(device="cpu", dtype=torch.int64)
        else:
            try:
                slots = torch.tensor([operator.index(value) for value in indices], dtype=torch.int64)
            except TypeError:
                raise _ERRORS.violation(
                    field,
                    "must be a 1-D tensor or sequence of int slot indices",
                    indices,
                    "BE-15",
                ) from None
        if slots.numel() % self.page_size != 0:
            raise _ERRORS.violation(
                field,
                f"must hold whole pages, a multiple of page_size {self.page_size} slots",
                slots.numel(),
                "BE-15",
            )
        if slots.numel() == 0:
            return []
        if int(slots.min()) < 0 or int(slots.max()) >= self.size:
            bad = next(v for v in slots.tolist() if not 0 <= v < self.size)
            raise _ERRORS.violation(field, f"must hold slots in [0, {self.size})", bad, "BE-15")
        pages = slots.reshape(-1, self.page_size)
        starts = pages[:, 0]
        misaligned = (starts % self.page_size) != 0
        if bool(misaligned.any()):
            raise _ERRORS.violation(
                field,
                f"must start each page at a multiple of page_size {self.page_size}",
                int(starts[misaligned][0]),
                "BE-15",
            )
        expected = starts[:, None] + torch.arange(self.page_size, dtype=torch.int64)[None, :]
        broken = (pages != expected).any(dim=1)
        if bool(broken.any()):
            raise _ERRORS.violation(
                field,
                "must hold each page's slots consecutively (the page at this slot does not)",
                int(starts[broken][0]),
                "BE-15",
            )
        return starts.tolist()

    # ------------------------------------------------------------- page access
    def _page_view(self, start: int) -> torch.Tensor:
        """The page at slot ``start`` as a view into ``kv_buffer``."""
        if self.layout == "layer_first":
            return self.kv_buffer[:, :, start : start + self.page_size]
        return self.kv_buffer[:, start : start + self.page_size]

    @property
    def page_shape(self) -> tuple[int, ...]:
        """Shape of a structured page: ``[component, layer, token, head, dim]`` for layer_first,
        ``[component, token, layer, head, dim]`` for page_first."""
        if self.layout == "layer_first":
            return (self.component_count, self.layer_num, self.page_size, self.head_num, self.head_dim)
        return (self.component_count, self.page_size, self.layer_num, self.head_num, self.head_dim)

    @property
    def page_element_count(self) -> int:
        """Elements per page (the length of a flat page)."""
        return self.page_bytes // self.element_size

    def get_data_page(self, index: Any, flat: bool = True) -> torch.Tensor:
        """Return the page at slot ``index``: a 1-D copy when ``flat``, else a structured view.

        The flat copy lists elements in ``page_shape`` order (docs/host_pool.md);
        the view shares memory with the pool, so writing it writes the pool.
        """
        start = self._page_start("index", index)
        page = self._page_view(start)
        if not flat:
            return page
        flat_page = torch.empty(self.page_element_count, dtype=self.dtype)
        flat_page.view(self.page_shape).copy_(page)
        return flat_page

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        """Return a zero flat page: 1-D, ``dtype``, ``page_element_count`` elements."""
        return torch.zeros(self.page_element_count, dtype=self.dtype)

    def set_from_flat_data_page(self, index: Any, data: torch.Tensor) -> None:
        """Write the flat page ``data`` into the page at slot ``index``, and nothing else.

        ``data`` must be a tensor of ``dtype`` with exactly ``page_element_count``
        elements, in flat-page order; otherwise nothing is written.
        """
        start = self._page_start("index", index)
        if not isinstance(data, torch.Tensor):
            raise _ERRORS.violation("data", "must be a torch.Tensor", type(data).__name__, "BE-15")
        if data.dtype != self.dtype:
            raise _ERRORS.violation("data", f"must have the pool dtype {self.dtype}", data.dtype, "BE-15")
        if data.numel() != self.page_element_count:
            raise _ERRORS.violation(
                "data",
                f"must hold exactly one page, {self.page_element_count} elements",
                data.numel(),
                "BE-15",
            )
        self._page_view(start).copy_(data.reshape(self.page_shape))

    def get_page_buffer_meta(self, indices: torch.Tensor | Sequence[int]) -> tuple[list[int], list[int]]:
        """Return ``(pointers, sizes)`` of the contiguous byte ranges of the pages in ``indices``.

        ``indices`` holds every token slot of whole pages, page by page, as the
        engine passes ``host_indices`` (every ``page_size``-th slot starts a
        page). For each page, in that order, the ranges are listed so that
        reading them one after the other yields exactly the flat page:
        page_first gives one range per component, layer_first one per
        component per layer (component-major). Pointers are host addresses
        valid while the pool lives.
        """
        starts = torch.tensor(self._page_starts("indices", indices), dtype=torch.int64)
        head_bytes = self.head_num * self.head_dim * self.element_size
        if self.layout == "page_first":  # one range per component: all layers of P tokens
            token_bytes = self.layer_num * head_bytes
            range_offsets = torch.arange(self.component_count, dtype=torch.int64) * self.size * token_bytes
        else:  # one range per (component, layer): P tokens of one layer, component-major
            token_bytes = head_bytes
            range_offsets = (
                torch.arange(self.component_count * self.layer_num, dtype=torch.int64) * self.size * token_bytes
            )
        pointers = self.kv_buffer.data_ptr() + starts[:, None] * token_bytes + range_offsets[None, :]
        sizes = [self.page_size * token_bytes] * pointers.numel()
        return pointers.reshape(-1).tolist(), sizes

    def ranges_per_page(self) -> int:
        """Return how many contiguous byte ranges one page occupies in ``kv_buffer``."""
        if self.layout == "page_first":
            return self.component_count
        return self.component_count * self.layer_num

    def __repr__(self) -> str:
        return (
            f"HostPagePool(page_count={self.page_count}, page_size={self.page_size}, "
            f"layer_num={self.layer_num}, head_num={self.head_num}, head_dim={self.head_dim}, "
            f"dtype={self.dtype}, kind={self.kind!r}, layout={self.layout!r})"
        )
