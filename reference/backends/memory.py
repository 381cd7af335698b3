"""The in-memory reference backend: pages in a ``MemoryStore`` (memory_store.py), one lock, optional LRU capacity.

Several instances can share one ``MemoryStore`` (to serve many ranks and
models of one process, and to test namespacing): ``extra_config["store"]``
names a store in a process-wide registry (a str), or is a ``MemoryStore``
itself. Without it, each instance gets a private store.
``extra_config["capacity_pages"]`` bounds the store in stored objects (one
per page and pool); a read after eviction is a miss, never an error.

The fast path. When a host pool's bytes sit where its layout says — a
``HostPagePool`` whose page helpers are ``HostPagePool``'s own — a batch
moves as a whole between the pool's pages (``buffer_pages``: one tensor,
page number first) and the store's slab rows (``write_pages`` /
``read_pages``), page by page in one ``torch._foreach_copy_`` rather than one
strided copy or ``index_select`` over the pool's page view (those measured
3-30x slower: ``index_select`` and advanced indexing copy the whole pool
first). That is the ``SLAB_ROWS`` strategy (strategies.py). Any other pool
(SGLang's, a wrapper, a subclass that hooks its helpers) is served through
its helpers, ``BATCHED``.
See docs/backends.md.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.base import PageStoreBackend
from hicache_reference.backends.host_bytes import tensor_bytes
from hicache_reference.backends.memory_store import (
    MemoryStore,
    forget_shared_memory_store,
    shared_memory_store,
)
from hicache_reference.backends.strategies import SLAB_ROWS
from hicache_reference.backends.slabs import byte_count, is_capacity

__all__ = ["MemoryBackend", "MemoryStore", "buffer_pages", "forget_shared_memory_store", "shared_memory_store"]


_PAGE_HELPERS = ("get_data_page", "set_from_flat_data_page", "get_dummy_flat_data_page", "get_page_buffer_meta")
"""The helpers through which backends reach host pages; a pool overriding one is served through them."""


def buffer_pages(pool: Any) -> Optional[torch.Tensor]:
    """Return the pool's ``kv_buffer`` as one view per page (page number first), or None when its layout is not known.

    Known: a ``HostPagePool`` whose page helpers are ``HostPagePool``'s own
    (a subclass that overrides one may hook, move or fail page IO, so it is
    served through its helpers), with a contiguous CPU buffer in one of its two
    layouts. Page ``n`` is ``result[n]``: ``[component, layer, page_size *
    head_num * head_dim]`` for layer_first, ``[component, page_size * layer_num
    * head_num * head_dim]`` for page_first; read in order, its elements are
    the flat page (``get_data_page(n * page_size)``, docs/host_pool.md).
    """
    if not isinstance(pool, HostPagePool):
        return None
    if any(getattr(type(pool), helper, None) is not getattr(HostPagePool, helper) for helper in _PAGE_HELPERS):
        return None
    buffer = pool.kv_buffer
    if not isinstance(buffer, torch.Tensor) or buffer.device.type != "cpu" or not buffer.is_contiguous():
        return None
    components, pages = pool.component_count, pool.page_count
    if buffer.numel() != components * pool.size * pool.layer_num * pool.head_num * pool.head_dim:
        return None
    if pool.layout == "layer_first":  # [component, layer, slot, head, dim]
        return buffer.view(components, pool.layer_num, pages, -1).permute(2, 0, 1, 3)
    if pool.layout == "page_first":  # [component, slot, layer, head, dim]
        return buffer.view(components, pages, -1).permute(1, 0, 2)
    return None


class MemoryBackend(PageStoreBackend):
    """Pages in process memory. Extra config: ``store`` (shared store name or object), ``capacity_pages``."""

    hicache_levels = ("core", "legacy", "v1", "v2", "prefix", "namespacing", "concurrency", "robustness", "format")
    strategy = SLAB_ROWS
    """Known-layout pools move as batches between host pages and slab rows; ``PER_PAGE`` is the plain path."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        capacity = self.extra_config.get("capacity_pages")
        if not is_capacity(capacity):
            raise ValueError(
                f"MemoryBackend.extra_config.capacity_pages: must be null or an int >= 1 (got {capacity!r})"
            )
        store = self.extra_config.get("store")
        if isinstance(store, MemoryStore):
            if capacity is not None and capacity != store.capacity_pages:
                raise ValueError(
                    f"MemoryBackend.extra_config.capacity_pages: must match the capacity of the store given, "
                    f"{store.capacity_pages!r} (got {capacity!r})"
                )
            self.store = store
        elif isinstance(store, str):
            self.store = shared_memory_store(store, capacity)
        elif store is None:
            self.store = MemoryStore(capacity)
        else:
            raise ValueError(
                f"MemoryBackend.extra_config.store: must be a shared store name (str) or a MemoryStore (got {store!r})"
            )
        """Where the pages live; shared with every instance built on the same store."""
        self._page_views: dict[str, _HostPages] = {}

    # ============================================================ the four primitives (page by page)
    def _object_size(self, name: str) -> Optional[int]:
        return self.store.size(name)

    def _object_sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        return self.store.sizes(names)  # one lock for the whole batch

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        page = self.store.get(name)
        if page is None or byte_count(page) != len(buffer):  # BE-13: a short object is a miss
            return False
        buffer[:] = tensor_bytes(page.contiguous())
        return True

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        return self.store.put(name, data, group)  # put copies first: the store never sees a partial page

    def _clear_namespace(self, namespace: str) -> None:
        self.store.delete_prefix(namespace + "/")  # NS-8: the trailing slash keeps sibling namespaces

    # ============================================================ the batch primitives of the fast path
    def _store_pages(
        self, names: Sequence[str], groups: Sequence[Optional[str]], host: _HostPages, numbers: Sequence[int]
    ) -> list[bool]:
        """Store host pages ``numbers`` as ``names`` in slab rows; True for each still held after eviction (BE-7, BE-17)."""
        return self.store.write_pages(names, groups, host.pages, numbers, host.views)

    def _load_pages(self, names: Sequence[str], host: _HostPages, numbers: Sequence[int]) -> list[bool]:
        """Copy the stored page of each name into host page ``numbers[i]``; True where it landed whole (BE-13, BE-15)."""
        return self.store.read_pages(names, host.pages, numbers, host.views)

    # ============================================================ registration
    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        pages = buffer_pages(pool)
        if pages is not None and byte_count(pages[0]) != self._formats[name].byte_count:
            pages = None  # the helpers disagree with the buffer: serve the pool through its helpers
        with self._registration_lock:
            if pages is None:
                self._page_views.pop(name, None)
            else:
                self._page_views[name] = _HostPages(pages)


class _HostPages:
    """A host pool's pages as one tensor (page number first) and one view per page, both made at registration."""

    __slots__ = ("pages", "views")

    def __init__(self, pages: torch.Tensor) -> None:
        self.pages = pages
        """``buffer_pages(pool)``: page ``n`` is ``pages[n]``, its elements in flat-page order."""
        self.views = pages.unbind(0)
        """``pages[n]`` for every ``n``, made once (a view costs about a microsecond to make)."""
