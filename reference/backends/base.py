"""Page IO shared by the reference backends: every generation built from four object primitives.

A reference backend stores one object per page and pool, named
``storage_name(namespace_for(config), key, pool)`` (NS-6: one scheme for every
call). ``PageStoreBackend`` implements the three generations of the interface
(legacy, zero-copy v1, pool-aware v2) on top of four primitives that a
concrete backend supplies::

    _object_size(name)                    -> int | None     (None: no such object)
    _read_object_into(name, buffer)       -> bool           (fill exactly len(buffer) bytes)
    _write_object(name, data, group)      -> bool           (atomic: all or nothing)
    _clear_namespace()                    -> None           (remove this namespace only)

Each has a batch form (``_object_sizes``, ``_read_objects_into``,
``_write_objects``) whose default loops over the single form; a networked
backend overrides the batch forms to save round trips. Primitives may raise:
the base turns every storage error into False, 0 or None (BE-4, BE-5) and
counts it in the stats.

A backend that can scatter an object straight into host memory (the file
backend, with ``os.readv``) also supplies a fifth primitive and sets
``reads_into_ranges``::

    _read_object_into_ranges(name, views) -> bool           (fill the views in order, exactly)

With ``writes_from_ranges`` set, ``_write_object`` receives a page of such a
pool as the list of its host byte ranges (views of the pool, in flat-page
order) instead of one copied buffer, and sends them as they are.

How the clauses are kept, once for every backend:

- a read lands in its page's own host byte ranges directly when the backend
  reads into ranges and the pool lists its ranges in flat-page order
  (``PageFormat.flat_range_count``); the primitive writes nothing unless the
  object has exactly the page's size, and a page that then fails part way is
  False (its own slots may hold part of it; nothing outside them is touched).
  Otherwise a read lands in a staging buffer and is copied into the host slots
  only after the whole page arrived with exactly the page's size (BE-13,
  BE-15, BE-16);
- a KV-derived sidecar (``indices_from_pool == KV``) is written before its KV
  page, and the KV page is written only if every derived sidecar page of the
  call was; in v2 reads and v2 hit queries a KV page counts only if its derived
  sidecars are present too (BE-22);
- ``extra_info`` is accepted in every shape and never kept (BE-8, PFX-6).

Bad input from the caller (a programming error the engine never makes) raises
``ContractViolation`` before anything is read or written; see docs/backends.md
for the list.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Optional, Sequence

import torch

from hicache_contracts.errors import ContractViolation
from hicache_contracts.host_pool import HostPagePool
from hicache_contracts.models import (
    PoolName,
    PoolTransferResult,
    ReadOnlyMapping,
    validate_host_indices,
    validate_page_keys,
)
from hicache_reference.backends.namespace import namespace_for, storage_name
from hicache_spec import ALL_PAGES, KV, fold_pool_query

__all__ = [
    "BackendStats",
    "PageFormat",
    "PageStoreBackend",
    "PoolResults",
    "flat_order_range_count",
    "host_bytes",
    "pool_key",
    "tensor_bytes",
]


MAX_COPY_RANGES = 8
"""Most byte ranges per page for which a memmove per range beats one ``set_from_flat_data_page``
(each memmove costs about a microsecond of Python; layer_first pools have 2 x layers ranges)."""


# ---------------------------------------------------------------- small values
def pool_key(name: Any) -> str:
    """Return a pool name (our PoolName, SGLang's, or a str) as its plain str value (``"kv"``)."""
    if isinstance(name, Enum):
        return str(name.value)
    return str(name)


class PoolResults(dict):
    """The result of batch_get_v2 / batch_set_v2: pool name → one bool per key. Clause: BE-19.

    Keys are plain str values (``"kv"``); lookups also accept a pool enum
    member (ours or SGLang's), whose hash differs from its value's.
    """

    def __getitem__(self, name: Any) -> list[bool]:
        return dict.__getitem__(self, pool_key(name))

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, pool_key(name))

    def get(self, name: Any, default: Any = None) -> Any:
        return dict.get(self, pool_key(name), default)


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
    def of_pool(cls, pool: Any) -> "PageFormat":
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


@dataclass(frozen=True)
class BackendStats:
    """A snapshot of a backend's counters, returned by ``get_stats()`` (BE-12: an object, never a dict)."""

    pages_read: int = 0
    """Pages that landed in host slots (v1, v2) or were returned (legacy get)."""
    pages_written: int = 0
    """Pages stored."""
    read_misses: int = 0
    """Pages asked for and not found (or found short, BE-13)."""
    write_failures: int = 0
    """Pages whose write did not succeed."""
    storage_errors: int = 0
    """Exceptions from storage turned into False/0/None (BE-5)."""
    bytes_read: int = 0
    """Bytes of the pages read."""
    bytes_written: int = 0
    """Bytes of the pages written."""


class _Counters:
    """Mutable counters behind ``BackendStats``, guarded by one lock (BE-23)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(BackendStats.__dataclass_fields__, 0)

    def add(self, **increments: int) -> None:
        with self._lock:
            for name, value in increments.items():
                self._values[name] += value

    def snapshot(self) -> BackendStats:
        with self._lock:
            return BackendStats(**self._values)


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


_POOL_NAMES = frozenset(member.value for member in PoolName)
"""Every pool name a host pool may be registered under (BE-24)."""


def _transfer_keys(transfer: Any) -> list[str]:
    keys = getattr(transfer, "keys", None)
    return [] if keys is None else list(keys)


def _is_kv_derived(transfer: Any) -> bool:
    source = getattr(transfer, "indices_from_pool", None)
    return source is not None and pool_key(source) == KV


# ---------------------------------------------------------------- the base
class PageStoreBackend:
    """Every generation of the backend interface over four object primitives (see the module docstring).

    Built the SGLang dynamic-backend way: ``Backend(storage_config, extra_config)``,
    then ``register_mem_pool_host(pool)`` once before IO and
    ``register_mem_host_pool_v2(pool, name)`` for every v2 pool (BE-24).
    ``storage_config`` is a ``HiCacheStorageConfig`` or any object with
    SGLang's attribute names; the extra configuration is
    ``storage_config.extra_config`` overlaid with ``extra_config`` (SGLang
    passes an empty dict there). Unknown extra keys are ignored (BE-1).
    """

    hicache_levels: tuple[str, ...] = (
        "core",
        "legacy",
        "v1",
        "v2",
        "prefix",
        "namespacing",
        "concurrency",
        "robustness",
    )
    """The capability levels the backend claims."""

    reads_into_ranges: bool = False
    """Whether the backend supplies ``_read_object_into_ranges``, so reads may land in host memory directly."""

    writes_from_ranges: bool = False
    """Whether ``_write_object`` takes a page as the list of its host byte ranges (views of the pool, in
    flat-page order), so a write sends the pool's own memory without a copy."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        merged = dict(getattr(storage_config, "extra_config", None) or {})
        merged.update(extra_config or {})
        self.storage_config = storage_config
        """The configuration the backend was built with."""
        self.extra_config: dict = merged
        """``storage_config.extra_config`` overlaid with the ``extra_config`` argument, as a private copy.

        SGLang builds a dynamic backend as ``cls(storage_config, {})``: the
        keys arrive in ``storage_config.extra_config``. Unknown keys are kept
        and ignored (BE-1)."""
        self.namespace = namespace_for(storage_config)
        """Who this instance's pages belong to (NS-1..NS-5); the first part of every object name."""
        self.metrics_enabled = bool(getattr(storage_config, "enable_storage_metrics", False))
        """Whether ``get_stats()`` returns a snapshot (True) or None."""
        self._registration_lock = threading.Lock()
        self._pools: dict[str, Any] = {}
        self._formats: dict[str, PageFormat] = {}
        self._derived_pools: set[str] = set()
        self._counters = _Counters()
        self._staging = threading.local()
        self._layouts: dict[int, tuple[Any, Any]] = {}
        self._closed = False
        self.mem_pool_host: Any = None
        """The registered KV host pool, or None (a plain attribute, as SGLang's base class has it)."""

    # ============================================================ primitives
    def _object_size(self, name: str) -> Optional[int]:
        """Return the size in bytes of the object ``name``, or None if there is none."""
        raise NotImplementedError

    def _read_object_into(self, name: str, buffer: memoryview) -> bool:
        """Fill ``buffer`` with the object ``name``; True only if it exists and is exactly ``len(buffer)`` bytes."""
        raise NotImplementedError

    def _write_object(self, name: str, data: memoryview, group: Optional[str]) -> bool:
        """Store ``data`` as ``name``, atomically (BE-7); ``group`` names objects dropped together (BE-22)."""
        raise NotImplementedError

    def _read_object_into_ranges(self, name: str, views: Sequence[memoryview]) -> bool:
        """Fill ``views`` one after the other with the object ``name``; only with ``reads_into_ranges``.

        True only if it exists and is exactly the views' total size. Writes
        nothing unless the size is right; a read that fails after that may
        leave the views partly filled (only the views: BE-16), and is False.
        """
        raise NotImplementedError

    def _clear_namespace(self) -> None:
        """Remove every object of this instance's namespace, and nothing else (NS-8)."""
        raise NotImplementedError

    # Batch forms: override to save round trips. Each entry fails alone.
    def _object_sizes(self, names: Sequence[str]) -> list[Optional[int]]:
        """Return ``_object_size`` of each name; a failing name gives None."""
        return [self._guarded(self._object_size, None, name) for name in names]

    def _read_objects_into(self, names: Sequence[str], buffers: Sequence[memoryview]) -> list[bool]:
        """Return ``_read_object_into`` of each (name, buffer); a failing one gives False."""
        return [self._guarded(self._read_object_into, False, name, buffer) for name, buffer in zip(names, buffers)]

    def _read_objects_into_ranges(self, names: Sequence[str], page_views: Sequence[Sequence[memoryview]]) -> list[bool]:
        """Return ``_read_object_into_ranges`` of each (name, views); a failing one gives False."""
        return [
            self._guarded(self._read_object_into_ranges, False, name, views) for name, views in zip(names, page_views)
        ]

    def _write_objects(
        self, names: Sequence[str], datas: Sequence[Optional[memoryview]], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Return ``_write_object`` of each (name, data, group); a missing data or failing one gives False."""
        return [
            data is not None and self._guarded(self._write_object, False, name, data, group)
            for name, data, group in zip(names, datas, groups)
        ]

    def _guarded(self, primitive: Any, on_error: Any, *arguments: Any) -> Any:
        """Call ``primitive``; turn any exception into ``on_error`` and count it (BE-5)."""
        try:
            return primitive(*arguments)
        except Exception:  # BE-5: a storage error is a failed page, never an exception into the engine
            self._counters.add(storage_errors=1)
            return on_error

    # ============================================================ registration (BE-24)
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Receive the host KV pool, once, before any IO; it also serves v2 KV transfers."""
        if self._already_registered(mem_pool_host, KV, "register_mem_pool_host"):
            return
        self._register(mem_pool_host, KV)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Receive the host pool named ``host_pool_name``; called for every v2 pool, KV included.

        The name must be a ``PoolName`` (or its value). One instance serves one
        host pool per name: registering the same pool again is a no-op, a
        different pool for a name already registered is refused (BE-24), since
        pages would then land in, and be read from, whichever came last.
        """
        name = pool_key(host_pool_name)
        if not isinstance(host_pool_name, (str, Enum)) or name not in _POOL_NAMES:
            raise ContractViolation(
                f"{type(self).__name__}.register_mem_host_pool_v2.host_pool_name",
                "must be a PoolName or its value, such as 'kv' or 'indexer'",
                host_pool_name,
                "BE-24",
            )
        if self._already_registered(host_pool, name, "register_mem_host_pool_v2"):
            return
        self._register(host_pool, name)

    def on_host_pools_registered(self) -> None:
        """The initial registration burst is over (SGLang 0.5.23, once per attach); nothing to finalize here (BE-27)."""

    def _already_registered(self, pool: Any, name: str, method: str) -> bool:
        """Whether ``pool`` is already the host pool of ``name``; raise ContractViolation if another one is (BE-28)."""
        with self._registration_lock:
            known = self._pools.get(name)
        if known is None:
            return False
        if known is pool:
            return True
        raise ContractViolation(
            f"{type(self).__name__}.{method}",
            f"pool {name!r} already has another host pool; one instance serves one host pool "
            "per name (build one instance per controller)",
            type(pool).__name__,
            "BE-28",
        )

    def _register(self, pool: Any, name: str) -> None:
        for helper in ("get_data_page", "set_from_flat_data_page"):
            if not callable(getattr(pool, helper, None)):
                raise ContractViolation(
                    f"{type(self).__name__}.host_pool", f"must provide {helper}()", type(pool).__name__, "BE-24"
                )
        page_format = PageFormat.of_pool(pool)
        with self._registration_lock:
            self._pools[name] = pool
            self._formats[name] = page_format
            if name == KV:
                self.mem_pool_host = pool

    # ============================================================ boundary checks
    def _checked_keys(self, keys: Any) -> list[str]:
        """Return ``keys`` as a new list, or raise ContractViolation naming the bad key (KEY-2)."""
        validate_page_keys(keys, field=f"{type(self).__name__}.keys")
        return list(keys)

    def _page_slots(self, page_format: PageFormat, host_indices: Any, key_count: int) -> list[int]:
        """Return the first slot of each page, or raise ContractViolation before any IO (BE-15, BE-16)."""
        field = f"{type(self).__name__}.host_indices"
        validate_host_indices(host_indices, key_count, page_format.page_size, field=field)
        if key_count == 0:
            return []
        starts = host_indices[:: page_format.page_size].tolist()
        limit = page_format.slot_count
        if limit is not None:
            last = max(starts) + page_format.page_size
            if last > limit:
                raise ContractViolation(
                    field, f"must address slots in [0, {limit}) of the host pool", last - 1, "BE-15"
                )
        return starts

    def _checked_transfers(self, transfers: Any, argument: str) -> list:
        """Return ``transfers`` as a list, or raise ContractViolation naming the entry that is no PoolTransfer."""
        if transfers is None:
            return []
        if isinstance(transfers, (str, bytes, Mapping)) or not isinstance(transfers, Iterable):
            raise ContractViolation(
                f"{type(self).__name__}.{argument}", "must be a list of PoolTransfer", transfers, "BE-19"
            )
        checked = list(transfers)
        for index, transfer in enumerate(checked):
            if isinstance(transfer, Mapping) or not hasattr(transfer, "name") or not hasattr(transfer, "keys"):
                raise ContractViolation(
                    f"{type(self).__name__}.{argument}[{index}]",
                    f"must be a PoolTransfer (an object with name and keys), not a {type(transfer).__name__}",
                    transfer,
                    "BE-19",
                )
        return checked

    def _name(self, key: str, pool: str = KV) -> str:
        return storage_name(self.namespace, key, pool)

    def _names(self, keys: Sequence[str], pool: str) -> list[str]:
        """Return ``_name`` of every key (a backend may compute the batch at once)."""
        return [self._name(key, pool) for key in keys]

    # ============================================================ page IO
    def _read_pages(self, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Read each page into its own host slots; True only for a page that arrived whole (BE-15, BE-16).

        Straight into the page's byte ranges where the backend and the pool
        allow it (``_direct_views``); otherwise into a staging buffer, copied
        into the host slots only once the page arrived whole.
        """
        count = len(keys)
        if count == 0:
            return []
        pool, page_format = self._pools[pool_name], self._formats[pool_name]
        size = page_format.byte_count
        names = self._names(keys, pool_name)
        page_views = self._direct_views(pool, page_format, slots)
        if page_views is not None:
            results = self._flags(self._guarded(self._read_objects_into_ranges, None, names, page_views), count)
        else:
            staging = self._staging_buffer(size * count)
            view = memoryview(staging)
            buffers = [view[index * size : (index + 1) * size] for index in range(count)]
            results = self._flags(self._guarded(self._read_objects_into, None, names, buffers), count)
            if any(results):
                results = self._copy_pages_into_pool(pool, page_format, staging, results, slots)
        return self._count_reads(results, size)

    @staticmethod
    def _flags(arrived: Any, count: int) -> list[bool]:
        """Return a batch primitive's answer as ``count`` bools; anything malformed is all False."""
        if not isinstance(arrived, list) or len(arrived) != count:
            return [False] * count
        return [flag is True for flag in arrived]

    def _direct_views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[list[list[memoryview]]]:
        """Return each page's host byte ranges as writable views in flat-page order, or None to read staged.

        None unless the backend reads into ranges and the pool lists its ranges
        in flat-page order; None too when a page is addressed twice in the call
        (a failed read could then spoil a page that arrived) or the pool's
        ranges do not add up to the page.
        """
        if not self.reads_into_ranges or len(set(slots)) != len(slots):
            return None
        return self._range_views(pool, page_format, slots)

    def _range_views(
        self, pool: Any, page_format: PageFormat, slots: Sequence[int]
    ) -> Optional[list[list[memoryview]]]:
        """Return each page's host byte ranges as writable views in flat-page order, or None when not known.

        None when the pool does not list its ranges in flat-page order or they
        do not add up to the page. The views do not keep the pool alive: the
        registered pool outlives the call.
        """
        per_page = page_format.flat_range_count
        if per_page is None:
            return None
        try:
            layout = self._pool_layout(pool, page_format, per_page)
            if layout is not None:  # a HostPagePool: the ranges by arithmetic, as get_page_buffer_meta lists them
                offsets, slot_bytes, per_page_sizes = layout
                base = pool.kv_buffer.data_ptr()
                pointers = [base + offset + slot * slot_bytes for slot in slots for offset in offsets]
                sizes = per_page_sizes * len(slots)
            else:
                pointers, sizes = self._range_lists(pool, page_format, slots, per_page)
        except Exception:  # the pool could not say where its pages are: go through a copy instead
            return None
        # One view over the call's whole address span, cut into the ranges: a slice costs far less than a view.
        low = min(pointers)
        span = host_bytes(low, max(map(operator.add, pointers, sizes)) - low)
        views = [span[pointer - low : pointer - low + size] for pointer, size in zip(pointers, sizes)]
        return [views[first : first + per_page] for first in range(0, len(views), per_page)]

    def _pool_layout(
        self, pool: Any, page_format: PageFormat, per_page: int
    ) -> Optional[tuple[list[int], int, list[int]]]:
        """Return ``(offsets, slot_bytes, sizes)`` of a ``HostPagePool``, else None (cached per pool).

        ``HostPagePool.get_page_buffer_meta`` lists the ranges of the page at
        slot ``s`` at ``kv_buffer.data_ptr() + offset + s * slot_bytes``
        (docs/host_pool.md); the offsets and the stride are read from its
        answers for the first two pages, so a call need not ask it again.
        """
        if type(pool) is not HostPagePool or "get_page_buffer_meta" in vars(pool) or pool.page_count < 2:
            return None  # only the class itself: a subclass or a patched instance may list other ranges
        cached = self._layouts.get(id(pool))
        if cached is not None and cached[0] is pool:
            return cached[1]
        page_size = page_format.page_size
        first, sizes = self._range_lists(pool, page_format, [0], per_page)
        second, _ = self._range_lists(pool, page_format, [page_size], per_page)
        strides = {(later - earlier) // page_size for earlier, later in zip(first, second)}
        base = pool.kv_buffer.data_ptr()
        layout = ([pointer - base for pointer in first], strides.pop(), sizes) if len(strides) == 1 else None
        self._layouts[id(pool)] = (pool, layout)
        return layout

    def _copy_pages_into_pool(
        self, pool: Any, page_format: PageFormat, staging: bytearray, whole: list[bool], slots: Sequence[int]
    ) -> list[bool]:
        """Copy each page that arrived whole from ``staging`` into its host slots, and nothing else (BE-16)."""
        size = page_format.byte_count
        ranges = None
        if page_format.range_count is not None:
            ranges = self._guarded(self._page_ranges, None, pool, page_format, slots)
        if ranges is not None:  # memmove through the pool's byte ranges: the fast path
            base = ctypes.addressof((ctypes.c_char * len(staging)).from_buffer(staging))
            return [
                flag and self._guarded(self._copy_ranges, False, base + index * size, ranges[index])
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
    def _page_ranges(
        pool: Any, page_format: PageFormat, slots: Sequence[int], per_page: Optional[int] = None
    ) -> list[list[tuple[int, int]]]:
        """Return each page's (pointer, size) byte ranges, in flat-page order.

        ``per_page`` ranges per page (``page_format.range_count`` by default),
        as ``get_page_buffer_meta`` lists them; raises unless every page's
        ranges add up to exactly one page.
        """
        if per_page is None:
            assert page_format.range_count is not None  # set for every format a backend registers
            per_page = page_format.range_count
        pointers, sizes = PageStoreBackend._range_lists(pool, page_format, slots, per_page)
        pairs = list(zip(pointers, sizes))
        return [pairs[first : first + per_page] for first in range(0, len(pairs), per_page)]

    @staticmethod
    def _range_lists(
        pool: Any, page_format: PageFormat, slots: Sequence[int], per_page: int
    ) -> tuple[list[int], list[int]]:
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

    @staticmethod
    def _copy_ranges(source: int, ranges: list[tuple[int, int]]) -> bool:
        """Copy one whole page from address ``source`` into its host byte ranges (only those: BE-16)."""
        for pointer, count in ranges:
            ctypes.memmove(pointer, source, count)
            source += count
        return True

    def _staging_buffer(self, byte_count: int) -> bytearray:
        """Return this thread's staging buffer of at least ``byte_count`` bytes (BE-16: reads land here first).

        One per thread (BE-23), kept between calls: a fresh buffer per call
        would cost a page fault per 4 KiB on every read.
        """
        buffer = getattr(self._staging, "buffer", None)
        if buffer is None or len(buffer) < byte_count:
            buffer = self._staging.buffer = bytearray(byte_count)
        return buffer

    @staticmethod
    def _copy_into_pool(pool: Any, slot: int, page: torch.Tensor) -> bool:
        pool.set_from_flat_data_page(slot, page)
        return True

    def _page_bytes(self, pool: Any, page_format: PageFormat, slot: int) -> Optional[memoryview]:
        """Return the bytes of the host page at ``slot``, or None if it is not exactly one page."""
        page = pool.get_data_page(slot, flat=True).detach()
        raw = page.cpu().contiguous().reshape(-1)
        if raw.numel() * raw.element_size() != page_format.byte_count:
            return None
        return tensor_bytes(raw)

    def _write_pages(
        self, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Optional[str]]
    ) -> list[bool]:
        """Write each host page as the object of its key; True only if it can be read back."""
        count = len(keys)
        if count == 0:
            return []
        pool, page_format = self._pools[pool_name], self._formats[pool_name]
        datas = self._range_views(pool, page_format, slots) if self.writes_from_ranges else None
        if datas is None:
            datas = [self._guarded(self._page_bytes, None, pool, page_format, slot) for slot in slots]
        names = self._names(keys, pool_name)
        written = self._guarded(self._write_objects, None, names, datas, groups)
        return self._count_writes(self._flags(written, count), page_format.byte_count)

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

    def _present(self, pool_name: str, keys: Sequence[str]) -> list[bool]:
        """Return, per key, whether the pool holds a whole page for it (BE-13: short or empty is absent)."""
        if not keys:
            return []
        page_format = self._formats.get(pool_name)
        names = self._names(keys, pool_name)
        sizes = self._guarded(self._object_sizes, None, names)
        if not isinstance(sizes, list) or len(sizes) != len(keys):
            return [False] * len(keys)
        if page_format is None:
            return [isinstance(size, int) and size > 0 for size in sizes]
        return [size == page_format.byte_count for size in sizes]

    def _kv_present(self, keys: Sequence[str], derived: Iterable[str]) -> list[bool]:
        """Return, per key, whether the KV page and every named derived sidecar page are present (BE-22)."""
        present = self._present(KV, keys)
        for pool_name in derived:
            if pool_name not in self._formats:
                return [False] * len(keys)
            present = [mine and theirs for mine, theirs in zip(present, self._present(pool_name, keys))]
        return present

    def _known_derived(self, extra: Iterable[str] = ()) -> set[str]:
        """Return the KV-derived pools to check: those named in the call and those seen before."""
        with self._registration_lock:
            return set(self._derived_pools) | set(extra)

    # ============================================================ legacy generation
    def exists(self, key: str) -> bool:
        """Return whether the KV page of ``key`` is stored whole. Clauses: BE-4, BE-5, BE-13, NS-6."""
        (key,) = self._checked_keys([key])
        if self._closed:
            return False
        return self._present(KV, [key])[0]

    def batch_exists(self, keys: list[str], extra_info: Optional[Any] = None) -> int:
        """Return the leading run of keys whose KV page is stored whole. Clauses: BE-2, BE-3, BE-8, BE-13."""
        keys = self._checked_keys(keys)
        if self._closed or not keys:
            return 0
        present = self._present(KV, keys)
        run = 0
        for flag in present:
            if not flag:
                break
            run += 1
        return run

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Optional[torch.Tensor]:
        """Return the KV page of ``key`` as a flat tensor, or None. Clauses: BE-4, BE-5, BE-9, BE-13.

        A tensor ``target_location`` receives the bytes (only once they all
        arrived) and is returned. Without one, the page comes back in the
        registered pool's dtype, or as raw uint8 when no pool is registered.
        """
        (key,) = self._checked_keys([key])
        if self._closed:
            return None
        return self._get_one(key, target_location)

    def _get_one(self, key: str, target: Any) -> Optional[torch.Tensor]:
        page_format = self._formats.get(KV)
        name = self._name(key)
        if isinstance(target, torch.Tensor):
            size = target.numel() * target.element_size()
        elif page_format is not None:
            size = page_format.byte_count
        else:
            size = self._guarded(self._object_size, None, name)
        if not isinstance(size, int) or size <= 0:
            self._counters.add(read_misses=1)
            return None
        staging = bytearray(size)
        if self._guarded(self._read_object_into, False, name, memoryview(staging)) is not True:
            self._counters.add(read_misses=1)
            return None
        if isinstance(target, torch.Tensor):
            # Counted as read only once the page is in the target (BE-15): a target that refuses it is a miss.
            if not self._guarded(self._copy_into_target, False, target, staging):
                self._counters.add(read_misses=1)
                return None
            self._counters.add(pages_read=1, bytes_read=size)
            return target
        self._counters.add(pages_read=1, bytes_read=size)
        dtype = page_format.dtype if page_format is not None else torch.uint8
        return torch.frombuffer(staging, dtype=dtype)

    @staticmethod
    def _copy_into_target(target: torch.Tensor, staging: bytearray) -> bool:
        """Copy a whole page from ``staging`` into a legacy get's target tensor (of exactly the page's size)."""
        target.copy_(torch.frombuffer(staging, dtype=target.dtype).view(target.shape))
        return True

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        """Store ``value`` (a tensor) as the KV page of ``key``. Clauses: BE-5, BE-6, BE-7, BE-9.

        With a registered pool the value must be exactly one page; otherwise
        the write is refused (False), since a short object is a miss (BE-13).
        """
        (key,) = self._checked_keys([key])
        if self._closed:
            return False
        return self._set_one(key, value)

    def _set_one(self, key: str, value: Any) -> bool:
        if not isinstance(value, torch.Tensor):
            self._counters.add(write_failures=1)
            return False
        raw = self._guarded(lambda: tensor_bytes(value.detach().cpu().contiguous()), None)
        page_format = self._formats.get(KV)
        if raw is None or len(raw) == 0 or (page_format is not None and len(raw) != page_format.byte_count):
            self._counters.add(write_failures=1)
            return False
        name = self._name(key)
        written = self._guarded(self._write_object, False, name, raw, name) is True
        if written:
            self._counters.add(pages_written=1, bytes_written=len(raw))
        else:
            self._counters.add(write_failures=1)
        return written

    def batch_get(self, keys: list[str], target_locations: Any = None, target_sizes: Any = None) -> list:
        """Return one tensor-or-None per key, in key order. Clauses: BE-4, BE-9, BE-10."""
        keys = self._checked_keys(keys)
        targets = list(target_locations) if target_locations is not None else [None] * len(keys)
        if len(targets) != len(keys):
            raise ContractViolation(
                f"{type(self).__name__}.target_locations", "must hold one entry per key", len(targets), "BE-9"
            )
        if self._closed:
            return [None] * len(keys)
        return [self._get_one(key, target) for key, target in zip(keys, targets)]

    def batch_set(
        self, keys: list[str], values: Any = None, target_locations: Any = None, target_sizes: Any = None
    ) -> bool:
        """Store one value per key; True only if every page was stored. Clauses: BE-6, BE-9, BE-10."""
        keys = self._checked_keys(keys)
        values = list(values) if values is not None else [None] * len(keys)
        if len(values) != len(keys):
            raise ContractViolation(f"{type(self).__name__}.values", "must hold one value per key", len(values), "BE-9")
        if self._closed:
            return False
        results = [self._set_one(key, value) for key, value in zip(keys, values)]
        return all(results)

    # ============================================================ zero-copy v1
    def batch_get_v1(self, keys: list[str], host_indices: Any, extra_info: Optional[Any] = None) -> list[bool]:
        """Read page i into host slots ``host_indices[i*page_size:(i+1)*page_size]``.

        Clauses: BE-14, BE-15, BE-16, BE-4, BE-5, BE-8, BE-10. Before
        registration every page is False.
        """
        keys = self._checked_keys(keys)
        page_format = self._formats.get(KV)
        if page_format is None or self._closed:
            return [False] * len(keys)
        slots = self._page_slots(page_format, host_indices, len(keys))
        return self._read_pages(KV, keys, slots)

    def batch_set_v1(self, keys: list[str], host_indices: Any, extra_info: Optional[Any] = None) -> list[bool]:
        """Store host slots ``host_indices[i*page_size:(i+1)*page_size]`` as the page of ``keys[i]``.

        Clauses: BE-14, BE-17, BE-6, BE-7, BE-5, BE-8, BE-10.
        """
        keys = self._checked_keys(keys)
        page_format = self._formats.get(KV)
        if page_format is None or self._closed:
            return [False] * len(keys)
        slots = self._page_slots(page_format, host_indices, len(keys))
        return self._write_pages(KV, keys, slots, self._names(keys, KV))

    # ============================================================ pool-aware v2
    def batch_exists_v2(
        self, keys: list[str], pool_transfers: Optional[list] = None, extra_info: Optional[Any] = None
    ) -> PoolTransferResult:
        """Return the folded hit of ``keys`` over KV and every requested pool. Clauses: BE-21, BE-22, HYB-6, HYB-7."""
        keys = self._checked_keys(keys)
        transfers = self._checked_transfers(pool_transfers, "pool_transfers")
        if self._closed or not keys:
            return PoolTransferResult.empty()
        try:
            return self._exists_v2(keys, transfers)
        except Exception:  # BE-5: never raise into the engine
            self._counters.add(storage_errors=1)
            return PoolTransferResult.empty()

    def _exists_v2(self, keys: list[str], transfers: list) -> PoolTransferResult:
        """Fold presence per the spec (BE-21): each pool is measured against the leading run of KV pages."""
        extra = [transfer for transfer in transfers if pool_key(transfer.name) != KV]
        kv_present = self._present(KV, keys)
        kv_hit = 0
        while kv_hit < len(keys) and kv_present[kv_hit]:
            kv_hit += 1
        kv_flags = (True,) * kv_hit + (False,) * (len(keys) - kv_hit)
        queries = []
        for transfer in extra:
            name = pool_key(transfer.name)
            within = self._present(name, keys[:kv_hit]) if name in self._formats else [False] * kv_hit
            present = tuple(within) + (False,) * (len(keys) - kv_hit)
            policy = pool_key(getattr(transfer, "hit_policy", ALL_PAGES))
            queries.append((name, policy, len(_transfer_keys(transfer)), present))
        folded, entries, restorable = fold_pool_query(kv_flags, tuple(queries))  # BE-21: 0.5.23's fold
        # BE-22: KV-derived sidecars seen before but not asked about still cap the hit, as missing KV would.
        unasked = sorted(self._known_derived() - {query[0] for query in queries})
        if unasked and folded:
            with_sidecars = self._kv_present(keys[:folded], unasked)
            cap = next((index for index, flag in enumerate(with_sidecars) if not flag), folded)
            restorable = tuple(length for length in restorable if length <= cap)
            folded = restorable[-1] if restorable else 0
        # Each pool's own boundary, KV's included; the lengths every pool can restore (BE-26).
        return PoolTransferResult(
            kv_hit_pages=folded,
            extra_pool_hit_pages=ReadOnlyMapping(entries),
            restorable_prefix_pages=tuple(restorable),
        )

    def _plan_v2(self, transfers: list) -> list[tuple[Any, str, list[str], Optional[list[int]]]]:
        """Return (transfer, pool name, keys, first slots or None when the pool cannot be served) per transfer.

        Raises ContractViolation for a malformed transfer before any IO.
        """
        transfers = self._checked_transfers(transfers, "transfers")
        kv_indices = next((getattr(t, "host_indices", None) for t in transfers if pool_key(t.name) == KV), None)
        plan: list[tuple[Any, str, list[str], Optional[list[int]]]] = []
        for transfer in transfers:
            name = pool_key(transfer.name)
            keys = self._checked_keys(_transfer_keys(transfer))
            indices = getattr(transfer, "host_indices", None)
            if indices is None and _is_kv_derived(transfer):
                indices = kv_indices  # a derived sidecar reuses the KV slots of its batch
            page_format = self._formats.get(name)
            if page_format is None or indices is None or self._closed:
                plan.append((transfer, name, keys, None))  # BE-20: nothing to serve, all False
                continue
            plan.append((transfer, name, keys, self._page_slots(page_format, indices, len(keys))))
        return plan

    def batch_get_v2(self, transfers: list, extra_info: Optional[Any] = None) -> PoolResults:
        """Read every transfer; one list of len(keys) bools per pool name. Clauses: BE-19, BE-20, BE-22, BE-15, BE-16."""
        plan = self._plan_v2(transfers)
        results = PoolResults()
        # Derived sidecars first, so the KV page can be judged by them (BE-22).
        for _, name, keys, slots in sorted(plan, key=lambda step: not _is_kv_derived(step[0])):
            results[name] = [False] * len(keys) if slots is None else self._read_pages(name, keys, slots)
        self._couple_kv_group(plan, results, reading=True)
        return results

    def batch_set_v2(self, transfers: list, extra_info: Optional[Any] = None) -> PoolResults:
        """Write every transfer; derived sidecars before their KV page. Clauses: BE-19, BE-20, BE-22, BE-17."""
        plan = self._plan_v2(transfers)
        results = PoolResults()
        derived_steps = [step for step in plan if _is_kv_derived(step[0])]
        with self._registration_lock:
            self._derived_pools.update(name for _, name, _, slots in derived_steps if slots is not None)
        for _, name, keys, slots in derived_steps:
            groups = self._names(keys, KV)
            results[name] = [False] * len(keys) if slots is None else self._write_pages(name, keys, slots, groups)
        for transfer, name, keys, slots in plan:
            if _is_kv_derived(transfer):
                continue
            if slots is None:
                results[name] = [False] * len(keys)
                continue
            if name == KV:
                # BE-22: a KV page is written only if every derived sidecar page of the call was.
                allowed = self._derived_ok(keys, derived_steps, results)
                outcome = [False] * len(keys)
                chosen = [index for index, ok in enumerate(allowed) if ok]
                written = self._write_pages(
                    name, [keys[i] for i in chosen], [slots[i] for i in chosen], [self._name(keys[i]) for i in chosen]
                )
                for index, flag in zip(chosen, written):
                    outcome[index] = flag
                results[name] = outcome
            else:
                results[name] = self._write_pages(name, keys, slots, [None] * len(keys))
        self._couple_kv_group(plan, results, reading=False)
        return results

    @staticmethod
    def _derived_ok(keys: list[str], derived_steps: list, results: PoolResults) -> list[bool]:
        """Per KV key, whether every derived sidecar of the call succeeded for it (matched by key)."""
        allowed = [True] * len(keys)
        for _, name, derived_keys, _ in derived_steps:
            succeeded = {key for key, flag in zip(derived_keys, results[name]) if flag}
            allowed = [ok and key in succeeded for ok, key in zip(allowed, keys)]
        return allowed

    def _couple_kv_group(self, plan: list, results: PoolResults, reading: bool) -> None:
        """Report a KV page and its derived sidecar pages alike: all True or all False (BE-22).

        A KV page whose known derived sidecars are missing counts as missing.
        """
        kv_step = next((step for step in plan if step[1] == KV), None)
        if kv_step is None:
            return
        kv_keys = kv_step[2]
        derived_steps = [step for step in plan if _is_kv_derived(step[0])]
        group_ok = list(results[KV])
        for _, name, keys, _ in derived_steps:
            flags = dict(zip(keys, results[name]))
            group_ok = [ok and flags.get(key, False) for ok, key in zip(group_ok, kv_keys)]
        if reading:
            in_call = {step[1] for step in derived_steps}
            others = sorted(self._known_derived() - in_call)
            if others:
                group_ok = [ok and present for ok, present in zip(group_ok, self._kv_present(kv_keys, others))]
        results[KV] = group_ok
        by_key = dict(zip(kv_keys, group_ok))
        for _, name, keys, _ in derived_steps:
            results[name] = [flag and by_key.get(key, False) for key, flag in zip(keys, results[name])]

    # ============================================================ housekeeping
    def clear(self) -> None:
        """Remove every page of this namespace, and only those; never raise. Clauses: BE-11, NS-8."""
        self._guarded(self._clear_namespace, None)

    def get_stats(self) -> Optional[BackendStats]:
        """Return a ``BackendStats`` snapshot when metrics are enabled, else None. Clause: BE-12."""
        return self._counters.snapshot() if self.metrics_enabled else None

    def close(self) -> None:
        """Stop serving: later reads miss and later writes fail, without raising."""
        self._closed = True
