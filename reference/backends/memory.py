"""The in-memory reference backend: pages in preallocated slabs, one lock, optional LRU capacity.

Several instances can share one ``MemoryStore`` (to serve many ranks and
models of one process, and to test namespacing): ``extra_config["store"]``
names a store in a process-wide registry (a str), or is a ``MemoryStore``
itself. Without it, each instance gets a private store.

``extra_config["capacity_pages"]`` bounds the store in stored objects (one
per page and pool); the least recently used page is evicted first, together
with the pages of its group (a KV page and its KV-derived sidecars, BE-22). A
read after eviction is a miss, never an error.

Where pages live. Pages written from a ``HostPagePool`` whose bytes sit where
its layout says (the fast path, below) are rows of a slab: one set of
preallocated tensors per page format (element type and page shape), grown
by doubling, whose free rows are kept on a free list and reused first. A row
holds a page's elements in flat-page order. Memory held: per page format, at
most ``max(64, 2 × the most rows ever live at once)`` rows, a row live while
its page is stored or its write is in flight. A freed row (a page deleted,
evicted or rewritten) is reused before the slab grows; the slabs go with the
store. Anything else (a page written through the pool's helpers, a
``put`` of bytes) is a tensor of its own, written once and never again.

The fast path. When a host pool's bytes sit where its layout says — a
``HostPagePool`` whose page helpers are ``HostPagePool``'s own — a batch
moves as a whole between the pool's pages (``buffer_pages``: one tensor,
page number first) and slab rows:

- write: the store reserves one free row per page under its lock; the pages
  are copied into their rows with one ``torch._foreach_copy_`` outside the
  lock, since no one else can see a reserved row; then every name is pointed
  at its row under the lock. No page is visible before it was copied whole (BE-7); a rewrite
  frees the old row.
- read: under the store's lock, every page is looked up and size-checked
  (BE-13), then the found ones are copied into their own host pages with
  one ``torch._foreach_copy_``. The copy runs under the lock, so no
  writer can reuse a row while a reader copies it: each page a reader gets is
  one whole stored version (BE-23). A page not found or of the wrong size is
  False and its slots are not touched (BE-15, BE-16).

A batch of at least ``SPLIT_BYTES`` is copied in two halves, the second on
a helper thread started and joined within the call (the foreach copy runs on
one thread; torch releases the GIL while it copies).

Page by page, in both directions, rather than one strided copy or
``index_select`` over the pool's page view: on the pool's permuted view those
measured 3-30x slower (``index_select`` and advanced indexing copy the whole
pool first), while a foreach copy costs what the bytes cost. A stored entry
is a plain int (slab number and row), so millions of stored pages add nothing
for the garbage collector to visit.

Any other pool (SGLang's, a wrapper, a subclass that hooks its helpers) is
served page by page through its helpers by ``PageStoreBackend``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence, Union

import torch

from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.base import PageStoreBackend, tensor_bytes
from hicache_reference.backends.namespace import storage_name
from hicache_spec import KV

__all__ = ["MemoryBackend", "MemoryStore", "buffer_pages", "forget_shared_memory_store", "shared_memory_store"]


def _byte_count(page: torch.Tensor) -> int:
    return page.numel() * page.element_size()


# ---------------------------------------------------------------- copying pages
SPLIT_BYTES = 2 << 20
"""A batch of at least this many bytes is copied in two halves on two threads when torch has two or more."""


def _foreach_copy(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """Copy each source page into its target page: one ``torch._foreach_copy_`` where torch has it.

    ``_foreach_copy_`` runs on the calling thread alone; a large batch is
    cut in two halves, the second copied by a helper thread started for the
    call and joined before returning (each page is still copied whole by one
    thread, and the copy is over when this returns). Torch releases the GIL
    while it copies, so the halves overlap.
    """
    if not targets:
        return
    if not hasattr(torch, "_foreach_copy_"):
        for target, source in zip(targets, sources):
            target.copy_(source)
        return
    count = len(targets)
    if count < 2 or torch.get_num_threads() < 2 or _byte_count(targets[0]) * count < SPLIT_BYTES:
        torch._foreach_copy_(list(targets), list(sources))
        return
    half = count // 2
    failures: list[BaseException] = []

    def second_half() -> None:
        try:
            torch._foreach_copy_(list(targets[half:]), list(sources[half:]))
        except BaseException as error:  # raised on the calling thread below
            failures.append(error)

    helper = threading.Thread(target=second_half, name="hicache-memory-copy", daemon=True)
    helper.start()
    try:
        torch._foreach_copy_(list(targets[:half]), list(sources[:half]))
    finally:
        helper.join()
    if failures:
        raise failures[0]


def _reinterpreted(page: torch.Tensor, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """Return the bytes of a page as a tensor of ``dtype`` and ``shape`` (a view of a contiguous page)."""
    return page.contiguous().reshape(-1).view(torch.uint8).view(dtype).view(shape)


def _is_capacity(value: Any) -> bool:
    """Whether ``value`` is a valid ``capacity_pages``: None, or an int >= 1 (a bool is not a count)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


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


_ROW_BITS = 40
"""A slab entry is ``slab.number << _ROW_BITS | row``: a plain int, which the garbage collector never visits."""
_ROW_MASK = (1 << _ROW_BITS) - 1

_Entry = Union[torch.Tensor, int]
"""A stored object: a tensor of its own, or a slab row (an int, see ``_ROW_BITS``)."""


# ---------------------------------------------------------------- the store
class MemoryStore:
    """A thread-safe map of object name → page, with optional LRU capacity and eviction groups.

    A page is a row of a slab (written by ``write_pages``) or a tensor of its
    own (``put`` copies what it is given; ``put_many`` keeps the tensors it is
    handed, which the caller never writes again). ``get`` returns a copy of a
    slab row, or the stored tensor itself, which is never written.
    """

    def __init__(self, capacity_pages: Optional[int] = None) -> None:
        if not _is_capacity(capacity_pages):
            raise ValueError(f"MemoryStore.capacity_pages: must be None or an int >= 1 (got {capacity_pages!r})")
        self.capacity_pages = capacity_pages
        """The most objects held at once; None for no bound."""
        self.evictions = 0
        """Objects evicted so far."""
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, _Entry] = OrderedDict()
        self._group_of: dict[str, str] = {}
        self._members: dict[str, set[str]] = {}
        self._slabs: dict[tuple, _Slab] = {}
        self._slab_list: list[_Slab] = []
        """Every slab, at its number."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def names(self) -> list[str]:
        """Return the stored names, least recently used first."""
        with self._lock:
            return list(self._objects)

    def held_bytes(self) -> int:
        """Return the bytes of page memory the store holds: every slab's rows, free ones too, and its own tensors."""
        with self._lock:
            own = sum(_byte_count(entry) for entry in self._objects.values() if not isinstance(entry, int))
            return own + sum(slab.nbytes() for slab in self._slabs.values())

    def slab_rows(self) -> list[tuple[int, int]]:
        """Return (rows, live rows) of every slab."""
        with self._lock:
            return [(slab.rows, slab.live) for slab in self._slabs.values()]

    def size(self, name: str) -> Optional[int]:
        """Return the size of ``name`` in bytes, or None; does not count as a use (BE-3)."""
        return self.sizes([name])[0]

    def sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        """Return the size in bytes of each name (None where absent), under one lock; not a use (BE-3)."""
        with self._lock:
            found = [self._objects.get(name) for name in names]
        return [None if entry is None else self._entry_bytes(entry) for entry in found]

    def get(self, name: str) -> Optional[torch.Tensor]:
        """Return the page stored as ``name`` (marking it recently used), or None. Never write it."""
        return self.get_many([name])[0]

    def get_many(self, names: Sequence[str]) -> list[Optional[torch.Tensor]]:
        """Return the page of each name (None where absent), marking the found ones used, under one lock.

        A slab row comes back as a copy made under the lock (the row may be
        reused once the lock is released); a tensor of its own as it is.
        """
        with self._lock:
            objects = self._objects
            found = []
            for name in names:
                entry = objects.get(name)
                if entry is not None:
                    objects.move_to_end(name)
                    if isinstance(entry, int):
                        entry = self._slab_list[entry >> _ROW_BITS].row(entry & _ROW_MASK).clone()
                found.append(entry)
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

    def put_many(
        self, names: Sequence[str], pages: Sequence[torch.Tensor], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Store each contiguous CPU tensor as its name, as it is (no copy), under one lock (BE-7).

        The caller hands the tensors over and never writes them again. Entry i
        is True if it is still held right after its insertion and the
        evictions it caused.
        """
        with self._lock:
            return self._insert_many(names, pages, groups)

    # ------------------------------------------------------------ pages in slabs
    def write_pages(
        self,
        names: Sequence[str],
        groups: Sequence[Optional[str]],
        pages: torch.Tensor,
        numbers: Sequence[int],
        views: Optional[Sequence[torch.Tensor]] = None,
    ) -> list[bool]:
        """Store host page ``numbers[i]`` of ``pages`` (page number first) as ``names[i]``, in slab rows (BE-7).

        Rows are reserved under the lock, filled outside it (no one else can
        see them), then published under the lock; entry i is True as for
        ``put_many``. A copy that raises frees the rows and stores nothing.
        """
        count = len(names)
        if count == 0:
            return []
        key = (pages.dtype, tuple(pages.shape[1:]))
        with self._lock:
            slab = self._slabs.get(key)
            if slab is None:
                slab = self._slabs[key] = _Slab(len(self._slab_list), pages.dtype, key[1])
                self._slab_list.append(slab)
            rows = slab.reserve(count)
        try:  # the rows are reserved: no one else reads or writes them
            sources = [views[number] for number in numbers] if views is not None else [pages[n] for n in numbers]
            _foreach_copy(slab.row_views(rows), sources)
        except BaseException:
            with self._lock:
                slab.free.extend(rows)
            raise
        high = slab.number << _ROW_BITS
        with self._lock:
            return self._insert_many(names, [high | row for row in rows], groups)

    def read_pages(
        self,
        names: Sequence[str],
        pages: torch.Tensor,
        numbers: Sequence[int],
        views: Optional[Sequence[torch.Tensor]] = None,
    ) -> list[bool]:
        """Copy the page of ``names[i]`` into host page ``numbers[i]`` of ``pages``; True where it landed whole.

        Under one lock: each found page is a use; a page whose size is not a
        host page's is False and its host page untouched (BE-13, BE-16); the
        copies run before the lock is released, so no row changes under them.
        """
        dtype, shape = pages.dtype, tuple(pages.shape[1:])
        size = _byte_count(pages[0]) if pages.shape[0] else 0
        results = []
        with self._lock:
            objects = self._objects
            slab_list = self._slab_list
            by_slab: dict[int, tuple[list[int], list[int]]] = {}
            targets, sources = [], []
            for name, number in zip(names, numbers):
                entry = objects.get(name)
                if entry is None:
                    results.append(False)
                    continue
                objects.move_to_end(name)
                if isinstance(entry, int):
                    slab = slab_list[entry >> _ROW_BITS]
                    if slab.dtype == dtype and slab.shape == shape:
                        group = by_slab.get(slab.number)
                        if group is None:
                            group = by_slab[slab.number] = ([], [])
                        group[0].append(entry & _ROW_MASK)
                        group[1].append(number)
                        results.append(True)
                        continue
                    page = slab.row(entry & _ROW_MASK)
                else:
                    page = entry
                if _byte_count(page) != size:  # BE-13: a short or long object is a miss
                    results.append(False)
                    continue
                targets.append(views[number] if views is not None else pages[number])
                sources.append(
                    page if page.dtype == dtype and tuple(page.shape) == shape else _reinterpreted(page, dtype, shape)
                )  # the same bytes in another geometry
                results.append(True)
            for slab_number, (rows, slab_numbers) in by_slab.items():
                if views is not None:
                    targets.extend(views[number] for number in slab_numbers)
                else:
                    targets.extend(pages[number] for number in slab_numbers)
                sources.extend(slab_list[slab_number].row_views(rows))
            _foreach_copy(targets, sources)  # one call for the batch: each host page is copied whole
        return results

    # ------------------------------------------------------------ removal
    def delete(self, name: str) -> None:
        """Remove ``name`` alone, if present."""
        with self._lock:
            self._release(self._objects.pop(name, None))
            self._unlink(name)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose name starts with ``prefix``; return how many."""
        with self._lock:
            doomed = [name for name in self._objects if name.startswith(prefix)]
            for name in doomed:
                self._release(self._objects.pop(name))
                self._unlink(name)
            return len(doomed)

    # ------------------------------------------------------------ under the lock
    def _insert_many(
        self, names: Sequence[str], entries: Sequence[_Entry], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        objects = self._objects
        if self.capacity_pages is None:  # nothing is ever evicted: groups need no bookkeeping
            for name, entry in zip(names, entries):
                self._release(objects.get(name))
                objects[name] = entry
            return [True] * len(names)
        held = []
        for name, entry, group in zip(names, entries, groups):
            self._release(objects.get(name))
            self._unlink(name)
            objects[name] = entry
            objects.move_to_end(name)  # a rewrite is a use: it leaves its old place in the order
            if group is not None:
                self._group_of[name] = group
                self._members.setdefault(group, set()).add(name)
            self._evict()
            held.append(name in objects)
        return held

    def _release(self, entry: Optional[_Entry]) -> None:
        """Give a removed object's slab row back to its slab's free list."""
        if type(entry) is int:
            self._slab_list[entry >> _ROW_BITS].free.append(entry & _ROW_MASK)

    def _entry_bytes(self, entry: _Entry) -> int:
        return self._slab_list[entry >> _ROW_BITS].row_bytes if isinstance(entry, int) else _byte_count(entry)

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
                entry = self._objects.pop(name, None)
                if entry is not None:
                    self.evictions += 1
                    self._release(entry)
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

    hicache_levels = ("core", "legacy", "v1", "v2", "prefix", "namespacing", "concurrency", "robustness")

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
                f"MemoryBackend.extra_config.store: must be a shared store name (str) or a MemoryStore (got {store!r})"
            )
        """Where the pages live; shared with every instance built on the same store."""
        self._name_prefixes: dict[str, tuple[str, str]] = {}
        self._page_views: dict[str, _HostPages] = {}

    def _name(self, key: str, pool: str = KV) -> str:
        """Return ``storage_name(self.namespace, key, pool)`` (NS-6), without its escaping work for plain keys.

        The scheme leaves a key of ASCII letters and digits (every hex page key)
        as it is, so its name is the pool's prefix followed by the key.
        """
        if key.isascii() and key.isalnum():  # on ASCII text, isalnum is exactly [A-Za-z0-9]
            cached = self._name_prefixes.get(pool)
            if cached is not None and cached[0] is self.namespace:
                return cached[1] + key
            return self._name_prefix(pool) + key
        return storage_name(self.namespace, key, pool)

    def _names(self, keys: Sequence[str], pool: str) -> list[str]:
        """Return ``_name`` of every key, checking the batch for plain keys at once."""
        joined = "".join(keys)
        if joined.isascii() and joined.isalnum():
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
    def _store_pages(
        self, names: Sequence[str], groups: Sequence[Optional[str]], host: "_HostPages", numbers: Sequence[int]
    ) -> list[bool]:
        """Store host pages ``numbers`` as ``names`` in slab rows; True for each still held after eviction (BE-7, BE-17)."""
        return self.store.write_pages(names, groups, host.pages, numbers, host.views)

    def _load_pages(self, names: Sequence[str], host: "_HostPages", numbers: Sequence[int]) -> list[bool]:
        """Copy the stored page of each name into host page ``numbers[i]``; True where it landed whole (BE-13, BE-15)."""
        return self.store.read_pages(names, host.pages, numbers, host.views)

    # ============================================================ registration
    def _register(self, pool: Any, name: str) -> None:
        super()._register(pool, name)
        pages = buffer_pages(pool)
        if pages is not None and _byte_count(pages[0]) != self._formats[name].byte_count:
            pages = None  # the helpers disagree with the buffer: serve the pool through its helpers
        with self._registration_lock:
            if pages is None:
                self._page_views.pop(name, None)
            else:
                self._page_views[name] = _HostPages(pages)

    # ============================================================ page IO, a batch at a time
    def _read_pages(self, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Copy every found, whole page into its own host page, in one pass under the store's lock.

        Clauses: BE-13, BE-15, BE-16. A page addressed twice in the call, or a
        pool whose layout is not known, is read page by page by the base.
        """
        host = self._page_views.get(pool_name)
        if host is None or len(set(slots)) != len(slots):
            return super()._read_pages(pool_name, keys, slots)
        count = len(keys)
        if count == 0:
            return []
        page_format = self._formats[pool_name]
        page_size = page_format.page_size
        numbers = [slot // page_size for slot in slots]  # BE-15: the page's own slots, nothing else (BE-16)
        results = self._flags(self._guarded(self._load_pages, None, self._names(keys, pool_name), host, numbers), count)
        return self._count_reads(results, page_format.byte_count)

    def _write_pages(
        self, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Gather every host page into its own slab row, then publish them all. Clauses: BE-7, BE-17.

        A pool whose layout is not known is written page by page by the base.
        """
        host = self._page_views.get(pool_name)
        if host is None:
            return super()._write_pages(pool_name, keys, slots, groups)
        count = len(keys)
        if count == 0:
            return []
        page_format = self._formats[pool_name]
        page_size = page_format.page_size
        numbers = [slot // page_size for slot in slots]
        written = self._guarded(self._store_pages, None, self._names(keys, pool_name), list(groups), host, numbers)
        return self._count_writes(self._flags(written, count), page_format.byte_count)


class _HostPages:
    """A host pool's pages as one tensor (page number first) and one view per page, both made at registration."""

    __slots__ = ("pages", "views")

    def __init__(self, pages: torch.Tensor) -> None:
        self.pages = pages
        """``buffer_pages(pool)``: page ``n`` is ``pages[n]``, its elements in flat-page order."""
        self.views = pages.unbind(0)
        """``pages[n]`` for every ``n``, made once (a view costs about a microsecond to make)."""


def forget_shared_memory_store(name: str) -> None:
    """Drop the process-wide store called ``name`` from the registry (instances holding it keep it)."""
    with _REGISTRY_LOCK:
        _REGISTRY.pop(name, None)
