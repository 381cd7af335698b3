"""The in-memory reference backend: pages as immutable tensors in a dict, one lock, optional LRU capacity.

Several instances can share one ``MemoryStore`` (to serve many ranks and
models of one process, and to test namespacing): ``extra_config["store"]``
names a store in a process-wide registry (a str), or is a ``MemoryStore``
itself. Without it, each instance gets a private store.

``extra_config["capacity_pages"]`` bounds the store in stored objects (one
per page and pool); the least recently used page is evicted first, together
with the pages of its group (a KV page and its KV-derived sidecars, BE-22). A
read after eviction is a miss, never an error.

Each stored page is its own CPU tensor, written once and never again: a
write copies the host page into a fresh tensor and hands it to the store; a
read takes the tensor out of the store and copies it into the host slots.

The fast path. When a host pool's bytes sit where its layout says — a
``HostPagePool`` whose page helpers are ``HostPagePool``'s own — a batch
moves as a whole (``buffer_pages`` gives one view per page of its
``kv_buffer``):

- write: every page of the batch is copied into its own fresh tensor
  (``torch._foreach_clone``), then all of them enter the store under one
  lock; no page is visible before every page was copied whole (BE-7);
- read: every page of the batch is taken from the store under one lock and
  size-checked first (BE-13); then the pages found are copied into their own
  slots (``torch._foreach_copy_``). A page not found or of the wrong size is
  False and its slots are not touched (BE-15, BE-16).

Any other pool (SGLang's, a wrapper, a subclass that hooks its helpers) is
served page by page through its helpers by ``PageStoreBackend``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.base import PageStoreBackend, tensor_bytes
from hicache_reference.backends.namespace import storage_name
from hicache_spec import KV

__all__ = ["MemoryBackend", "MemoryStore", "buffer_pages", "forget_shared_memory_store", "shared_memory_store"]


def _byte_count(page: torch.Tensor) -> int:
    return page.numel() * page.element_size()


# ---------------------------------------------------------------- copying a batch of pages
def _foreach_copy(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """Copy each source page into its target page: one ``torch._foreach_copy_`` where torch has it."""
    if hasattr(torch, "_foreach_copy_"):
        torch._foreach_copy_(list(targets), list(sources))
        return
    for target, source in zip(targets, sources):
        target.copy_(source)


def _foreach_clone(sources: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Return a fresh contiguous copy of each page, each in its own memory: one ``torch._foreach_clone``."""
    if hasattr(torch, "_foreach_clone"):
        copies = list(torch._foreach_clone(list(sources)))
    else:
        copies = [source.clone() for source in sources]
    return [copy if copy.is_contiguous() else copy.contiguous() for copy in copies]


def _reinterpreted(page: torch.Tensor, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
    """Return the bytes of a page as a tensor of ``dtype`` and ``shape`` (a view of a contiguous page)."""
    return page.contiguous().reshape(-1).view(torch.uint8).view(dtype).view(shape)


def _is_capacity(value: Any) -> bool:
    """Whether ``value`` is a valid ``capacity_pages``: None, or an int >= 1 (a bool is not a count)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


# ---------------------------------------------------------------- the store
class MemoryStore:
    """A thread-safe map of object name → immutable CPU tensor, with optional LRU capacity and eviction groups.

    ``put`` copies what it is given; ``put_many`` keeps the tensors it is handed
    (the caller made them and never writes them again). A stored tensor is
    never written: a reader may copy from it after the lock is released, even
    while the object is being replaced, deleted or evicted.
    """

    def __init__(self, capacity_pages: Optional[int] = None) -> None:
        if not _is_capacity(capacity_pages):
            raise ValueError(f"MemoryStore.capacity_pages: must be None or an int >= 1 (got {capacity_pages!r})")
        self.capacity_pages = capacity_pages
        """The most objects held at once; None for no bound."""
        self.evictions = 0
        """Objects evicted so far."""
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._group_of: dict[str, str] = {}
        self._members: dict[str, set[str]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def names(self) -> list[str]:
        """Return the stored names, least recently used first."""
        with self._lock:
            return list(self._objects)

    def size(self, name: str) -> Optional[int]:
        """Return the size of ``name`` in bytes, or None; does not count as a use (BE-3)."""
        return self.sizes([name])[0]

    def sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        """Return the size in bytes of each name (None where absent), under one lock; not a use (BE-3)."""
        with self._lock:
            found = [self._objects.get(name) for name in names]
        return [None if page is None else _byte_count(page) for page in found]

    def get(self, name: str) -> Optional[torch.Tensor]:
        """Return the tensor stored as ``name`` (marking it recently used), or None. Never write it."""
        return self.get_many([name])[0]

    def get_many(self, names: Sequence[str]) -> list[Optional[torch.Tensor]]:
        """Return the tensor of each name (None where absent), marking the found ones used, under one lock."""
        with self._lock:
            objects = self._objects
            found = [objects.get(name) for name in names]
            for name, page in zip(names, found):
                if page is not None:
                    objects.move_to_end(name)
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

    def put_many(self, names: Sequence[str], pages: Sequence[torch.Tensor],
                 groups: Sequence[Optional[str]]) -> list[bool]:
        """Store each contiguous CPU tensor as its name, as it is (no copy), under one lock (BE-7).

        The caller hands the tensors over and never writes them again. Each
        entry is stored as a ``put`` of its own would store it: entry i is True
        if it is still held right after its insertion and the evictions it
        caused.
        """
        held = []
        with self._lock:
            if self.capacity_pages is None:  # nothing is ever evicted: groups need no bookkeeping
                self._objects.update(zip(names, pages))
                return [True] * len(names)
            for name, page, group in zip(names, pages, groups):
                self._unlink(name)
                self._objects[name] = page
                self._objects.move_to_end(name)  # a rewrite is a use: it leaves its old place in the order
                if group is not None:
                    self._group_of[name] = group
                    self._members.setdefault(group, set()).add(name)
                self._evict()
                held.append(name in self._objects)
        return held

    def delete(self, name: str) -> None:
        """Remove ``name`` alone, if present."""
        with self._lock:
            self._objects.pop(name, None)
            self._unlink(name)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose name starts with ``prefix``; return how many."""
        with self._lock:
            doomed = [name for name in self._objects if name.startswith(prefix)]
            for name in doomed:
                del self._objects[name]
                self._unlink(name)
            return len(doomed)

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
                if self._objects.pop(name, None) is not None:
                    self.evictions += 1
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

    hicache_levels = ("core", "v1", "v2", "prefix", "namespacing", "concurrency")

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        capacity = self.extra_config.get("capacity_pages")
        if not _is_capacity(capacity):
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
                f"MemoryBackend.extra_config.store: must be a shared store name (str) or a MemoryStore "
                f"(got {store!r})"
            )
        """Where the pages live; shared with every instance built on the same store."""
        self._name_prefixes: dict[str, tuple[str, str]] = {}
        self._page_views: dict[str, tuple[torch.Tensor, ...]] = {}

    def _name(self, key: str, pool: str = KV) -> str:
        """Return ``storage_name(self.namespace, key, pool)`` (NS-6), without its escaping work for plain keys.

        The scheme leaves a key of ASCII letters and digits (every hex page key)
        as it is, so its name is the pool's prefix followed by the key.
        """
        if key.isascii() and key.encode().isalnum():
            return self._name_prefix(pool) + key
        return storage_name(self.namespace, key, pool)

    def _names(self, keys: Sequence[str], pool: str) -> list[str]:
        """Return ``_name`` of every key, checking the batch for plain keys at once."""
        joined = "".join(keys)
        if joined.isascii() and joined.encode().isalnum():
            prefix = self._name_prefix(pool)
            return [prefix + key for key in keys]
        return [self._name(key, pool) for key in keys]

    def _name_prefix(self, pool: str) -> str:
        """Return the name of the empty key in ``pool``: what precedes every plain key's name (cached)."""
        cached = self._name_prefixes.get(pool)
        if cached is None or cached[0] is not self.namespace:  # the namespace may be set after construction
            cached = self._name_prefixes[pool] = (self.namespace, storage_name(self.namespace, "", pool))
        return cached[1]

    # ============================================================ the four primitives (page by page)
    def _object_size(self, name: str) -> Optional[int]:
        return self.store.size(name)

    def _object_sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        return self.store.sizes(names)  # one lock for the whole batch

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        page = self.store.get(name)
        if page is None or _byte_count(page) != len(buffer):  # BE-13: a short object is a miss
            return False
        buffer[:] = tensor_bytes(page.contiguous())
        return True

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        return self.store.put(name, data, group)  # put copies first: the store never sees a partial page

    def _clear_namespace(self) -> None:
        self.store.delete_prefix(self.namespace + "/")  # NS-8: the trailing slash keeps sibling namespaces

    # ============================================================ the batch primitives of the fast path
    def _get_pages(self, names: Sequence[str]) -> list[Optional[torch.Tensor]]:
        """Return the stored tensor of each name, or None (a use of each found one)."""
        return self.store.get_many(names)

    def _put_pages(self, names: Sequence[str], pages: Sequence[torch.Tensor],
                   groups: Sequence[Optional[str]]) -> list[bool]:
        """Hand fresh page tensors to the store; True for each still held after eviction (BE-17)."""
        return self.store.put_many(names, pages, groups)

    def _copy_into_slots(self, targets: list[torch.Tensor], sources: list[torch.Tensor]) -> bool:
        """Copy the pages found into their host pages, all in one call (BE-15)."""
        _foreach_copy(targets, sources)
        return True

    def _copies_of(self, sources: list[torch.Tensor]) -> list[torch.Tensor]:
        """Return a fresh tensor holding each host page, each in its own memory (BE-17: later host writes stay out)."""
        return _foreach_clone(sources)

    # ============================================================ registration
    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        pages = buffer_pages(pool)
        if pages is not None and _byte_count(pages[0]) != self._formats[name].byte_count:
            pages = None  # the helpers disagree with the buffer: serve the pool through its helpers
        views = None if pages is None else pages.unbind(0)  # one view per page, made once
        with self._registration_lock:
            if views is None:
                self._page_views.pop(name, None)
            else:
                self._page_views[name] = views

    # ============================================================ page IO, a batch at a time
    def _read_pages(self, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Take every page from the store and size-check it, then copy the found ones into their slots at once.

        Clauses: BE-13, BE-15, BE-16. A page addressed twice in the call, or a
        pool whose layout is not known, is read page by page by the base.
        """
        views = self._page_views.get(pool_name)
        if views is None or len(set(slots)) != len(slots):
            return super()._read_pages(pool_name, keys, slots)
        count = len(keys)
        if count == 0:
            return []
        page_format = self._formats[pool_name]
        size, page_size = page_format.byte_count, page_format.page_size
        stored = self._guarded(self._get_pages, None, self._names(keys, pool_name))
        if not isinstance(stored, list) or len(stored) != count:
            stored = [None] * count
        shape, dtype = views[0].shape, views[0].dtype
        results, targets, sources = [], [], []
        for page, slot in zip(stored, slots):
            whole = isinstance(page, torch.Tensor) and page.numel() * page.element_size() == size  # BE-13
            if whole and (page.dtype != dtype or page.shape != shape):  # the same bytes in another geometry
                page = self._guarded(_reinterpreted, None, page, dtype, shape)
                whole = page is not None
            results.append(whole)
            if whole:
                sources.append(page)
                targets.append(views[slot // page_size])  # BE-15: the page's own slots, nothing else (BE-16)
        if targets and not self._guarded(self._copy_into_slots, False, targets, sources):
            results = [False] * count
        return self._count_reads(results, size)

    def _write_pages(
        self, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Copy every host page into its own fresh tensor at once, then hand them all to the store.

        Clauses: BE-7, BE-17. A pool whose layout is not known is written page
        by page by the base.
        """
        views = self._page_views.get(pool_name)
        if views is None:
            return super()._write_pages(pool_name, keys, slots, groups)
        count = len(keys)
        if count == 0:
            return []
        page_format = self._formats[pool_name]
        page_size = page_format.page_size
        copies = self._guarded(self._copies_of, None, [views[slot // page_size] for slot in slots])
        written = None
        if isinstance(copies, list) and len(copies) == count:  # BE-7: every page copied whole before any is visible
            written = self._guarded(self._put_pages, None, self._names(keys, pool_name), copies, list(groups))
        return self._count_writes(self._flags(written, count), page_format.byte_count)


def forget_shared_memory_store(name: str) -> None:
    """Drop the process-wide store called ``name`` from the registry (instances holding it keep it)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)

