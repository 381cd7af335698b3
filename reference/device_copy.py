"""L2 ⇄ L1 copies: whole pages between the host page pool and a device KV buffer.

``PageCopier(host_pool, device_buffer)`` copies pages between the host pool's
``kv_buffer`` and a device buffer of the same layout and geometry (only the
slot count may differ)::

    copier = PageCopier.allocate(host_pool, device_page_count, device="cuda")
    handle = copier.load(host_indices, device_indices)    # host → device (L2 → L1)
    handle = copier.store(device_indices, host_indices)   # device → host (L1 → L2)
    handle.wait()                                        # or handle.done()

Indices are token slots of whole pages, page by page, as the host pool's
``alloc`` returns them; both sides are checked before anything is copied
(``ContractViolation`` naming the argument, BE-15 shape rules).

With CUDA, a copy runs on the copier's own stream: the host side is gathered
into pinned staging memory (or scattered from it) page by page, one
asynchronous transfer moves the bytes, and the device side is gathered or
scattered with page-indexed kernels; the handle holds a CUDA event and the staging buffer until
``wait``. ``load`` returns when the work is queued; ``store`` finishes its
host scatter in ``wait``. Without CUDA (a CPU device buffer) the same API
copies at once: for each run of consecutive target pages, one block copy
when the source pages are consecutive too, else one gather of whole pages
straight into the run (no temporary).
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch

from hicache_contracts import ContractViolation, validate_host_indices
from hicache_contracts.host_pool import HostPagePool
from hicache_spec.values import is_count

__all__ = ["CopyHandle", "PageCopier"]

_CLASS = "PageCopier"


class CopyHandle:
    """One copy in flight: ``wait()`` until it completed, ``done()`` to ask."""

    def __init__(self, event: Any = None, finish: Any = None, keep: tuple = ()) -> None:
        self._event = event
        self._finish = finish
        self._keep = keep  # staging and index tensors must live until the copy completed
        self._completed = event is None and finish is None

    def done(self) -> bool:
        """Whether the copy completed (a device → host copy completes in ``wait``)."""
        if self._completed:
            return True
        if self._finish is not None:
            return False
        return bool(self._event.query())

    def wait(self) -> None:
        """Block until the copy completed; the destination holds the pages afterwards."""
        if self._completed:
            return
        if self._event is not None:
            self._event.synchronize()
        if self._finish is not None:
            self._finish()
        self._completed = True
        self._keep = ()


class PageCopier:
    """Copies whole pages between a host pool and a device buffer of the same layout (see the module docstring)."""

    def __init__(self, host_pool: HostPagePool, device_buffer: torch.Tensor, *, stream: Optional[Any] = None) -> None:
        host = host_pool.kv_buffer
        slot_dim = 2 if host_pool.layout == "layer_first" else 1
        expected = list(host.shape)
        expected[slot_dim] = device_buffer.shape[slot_dim] if device_buffer.dim() == host.dim() else -1
        if device_buffer.dim() != host.dim() or list(device_buffer.shape) != expected:
            raise ContractViolation(
                f"{_CLASS}.device_buffer",
                f"must have the host pool's shape {tuple(host.shape)} except in dimension {slot_dim} (slots)",
                tuple(device_buffer.shape),
                "BE-15",
            )
        if device_buffer.dtype != host.dtype:
            raise ContractViolation(
                f"{_CLASS}.device_buffer", f"must have the host pool's dtype {host.dtype}", device_buffer.dtype, "BE-15"
            )
        if device_buffer.shape[slot_dim] % host_pool.page_size:
            raise ContractViolation(
                f"{_CLASS}.device_buffer",
                f"must hold whole pages of {host_pool.page_size} slots",
                device_buffer.shape[slot_dim],
                "BE-15",
            )
        self.host_pool = host_pool
        self.device_buffer = device_buffer
        self.page_size = host_pool.page_size
        self.slot_dim = slot_dim
        """The dimension of ``kv_buffer`` that indexes token slots."""
        self.device_slots = device_buffer.shape[slot_dim]
        self.uses_cuda = device_buffer.is_cuda
        """Whether copies run asynchronously on a CUDA stream."""
        self.stream = stream
        if self.uses_cuda and self.stream is None:
            self.stream = torch.cuda.Stream(device=device_buffer.device)

    @classmethod
    def allocate(
        cls, host_pool: HostPagePool, device_page_count: int, device: Union[str, torch.device, None] = None
    ) -> PageCopier:
        """Return a copier with a new zeroed device buffer of ``device_page_count`` pages (CUDA when present)."""
        if not is_count(device_page_count, 1):
            raise ValueError(f"{_CLASS}.device_page_count: must be an int >= 1 (got {device_page_count!r})")
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        shape = list(host_pool.kv_buffer.shape)
        slot_dim = 2 if host_pool.layout == "layer_first" else 1
        shape[slot_dim] = device_page_count * host_pool.page_size
        return cls(host_pool, torch.zeros(shape, dtype=host_pool.dtype, device=device))

    # ------------------------------------------------------------ checks
    def _checked(self, host_indices: Any, device_indices: Any) -> tuple[torch.Tensor, torch.Tensor]:
        for name, indices in (("host_indices", host_indices), ("device_indices", device_indices)):
            if not isinstance(indices, torch.Tensor):
                raise ContractViolation(f"{_CLASS}.{name}", "must be a 1-D integer torch.Tensor", indices, "BE-15")
        pages = host_indices.numel() // self.page_size
        if host_indices.numel() != device_indices.numel():
            raise ContractViolation(
                f"{_CLASS}.device_indices",
                f"must hold as many slots as host_indices ({host_indices.numel()})",
                device_indices.numel(),
                "BE-15",
            )
        validate_host_indices(host_indices, pages, self.page_size, field=f"{_CLASS}.host_indices")
        validate_host_indices(device_indices, pages, self.page_size, field=f"{_CLASS}.device_indices")
        for name, indices, limit in (
            ("host_indices", host_indices, self.host_pool.size),
            ("device_indices", device_indices, self.device_slots),
        ):
            if pages and int(indices.max()) >= limit:
                raise ContractViolation(
                    f"{_CLASS}.{name}", f"must address slots in [0, {limit})", int(indices.max()), "BE-15"
                )
        return host_indices.to("cpu", torch.int64), device_indices.to("cpu", torch.int64)

    # ------------------------------------------------------------ copies
    def load(self, host_indices: torch.Tensor, device_indices: torch.Tensor) -> CopyHandle:
        """Copy host pages (L2) into device pages (L1); return when queued (CUDA) or done (CPU)."""
        return self._move(host_indices, device_indices, to_device=True)

    def store(self, device_indices: torch.Tensor, host_indices: torch.Tensor) -> CopyHandle:
        """Copy device pages (L1) into host pages (L2); the host holds them after ``wait``."""
        return self._move(host_indices, device_indices, to_device=False)

    def _move(self, host_indices: Any, device_indices: Any, *, to_device: bool) -> CopyHandle:
        host_slots, device_slots = self._checked(host_indices, device_indices)
        if not host_slots.numel():
            return CopyHandle()
        if self.uses_cuda:
            return self._move_cuda(host_slots, device_slots, to_device=to_device)
        host, device = self.host_pool.kv_buffer, self.device_buffer
        if to_device:
            self._copy_cpu(host, host_slots, device, device_slots)
        else:
            self._copy_cpu(device, device_slots, host, host_slots)
        return CopyHandle()

    def _pages_view(self, buffer: torch.Tensor) -> torch.Tensor:
        """``buffer`` with its slot dimension split into (pages, page_size): one index per page."""
        shape = list(buffer.shape)
        slots = shape[self.slot_dim]
        shape[self.slot_dim : self.slot_dim + 1] = [slots // self.page_size, self.page_size]
        return buffer.view(shape)

    def _pages(self, slots: torch.Tensor) -> torch.Tensor:
        return slots[:: self.page_size] // self.page_size

    def _copy_pages(
        self, source: torch.Tensor, source_pages: torch.Tensor, target: torch.Tensor, target_pages: torch.Tensor
    ) -> None:
        """Copy page ``source_pages[i]`` of ``source`` to page ``target_pages[i]`` of ``target`` (same device).

        Per run of consecutive target pages: one block copy when the source
        pages are consecutive too, else one gather straight into the run.
        """
        source_view, target_view = self._pages_view(source), self._pages_view(target)
        dim = self.slot_dim
        count = target_pages.numel()
        if count > 1:
            target_breaks = target_pages[1:] - target_pages[:-1] != 1
            source_breaks = (source_pages[1:] - source_pages[:-1] != 1).to(torch.int64).cumsum(0)
            starts = [0] + (target_breaks.nonzero().flatten() + 1).tolist()
        else:
            source_breaks = torch.zeros(0, dtype=torch.int64)
            starts = [0]
        ends = starts[1:] + [count]
        for first, last in zip(starts, ends):
            run = last - first
            target_run = target_view.narrow(dim, int(target_pages[first]), run)
            breaks_inside = (
                0 if run == 1 else int(source_breaks[last - 2]) - (int(source_breaks[first - 1]) if first else 0)
            )
            if breaks_inside == 0:
                target_run.copy_(source_view.narrow(dim, int(source_pages[first]), run))
            else:
                torch.index_select(source_view, dim, source_pages[first:last].to(source.device), out=target_run)

    def _copy_cpu(
        self, source: torch.Tensor, source_slots: torch.Tensor, target: torch.Tensor, target_slots: torch.Tensor
    ) -> None:
        self._copy_pages(source, self._pages(source_slots), target, self._pages(target_slots))

    def _staging(self, pages: int) -> torch.Tensor:
        shape = list(self.host_pool.kv_buffer.shape)
        shape[self.slot_dim] = pages * self.page_size
        return torch.empty(shape, dtype=self.host_pool.dtype, pin_memory=True)

    def _move_cuda(self, host_slots: torch.Tensor, device_slots: torch.Tensor, *, to_device: bool) -> CopyHandle:
        """Queue one copy on the copier's stream through pinned staging; ``to_device`` gives the direction.

        Host → device: gather on the host into staging, one transfer, a
        page-indexed scatter on the device. Device → host: a page-indexed
        gather on the device, one transfer into staging, and the scatter on
        the host in ``wait``.
        """
        host_pages, device_pages = self._pages(host_slots), self._pages(device_slots)
        staging = self._staging(host_pages.numel())
        host, device = self.host_pool.kv_buffer, self.device_buffer
        if to_device:  # gather on the host, into pinned memory
            torch.index_select(self._pages_view(host), self.slot_dim, host_pages, out=self._pages_view(staging))
        device_index = device_pages.pin_memory()
        event = torch.cuda.Event()
        stream = self.stream
        assert stream is not None  # made in __init__ for a CUDA buffer
        stream.wait_stream(torch.cuda.current_stream(device.device))  # after earlier device work
        with torch.cuda.stream(stream):
            if to_device:
                moved = staging.to(device.device, non_blocking=True)
                index = device_index.to(device.device, non_blocking=True)
                self._pages_view(device).index_copy_(self.slot_dim, index, self._pages_view(moved))
            else:
                index = device_index.to(device.device, non_blocking=True)
                moved = self._pages_view(device).index_select(self.slot_dim, index)
                self._pages_view(staging).copy_(moved, non_blocking=True)
            event.record(stream)
        keep = (staging, device_index, moved, index)
        if to_device:
            return CopyHandle(event=event, keep=keep)
        staged_pages = torch.arange(host_pages.numel())

        def scatter_on_host() -> None:
            self._copy_pages(staging, staged_pages, host, host_pages)

        return CopyHandle(event=event, finish=scatter_on_host, keep=keep)
