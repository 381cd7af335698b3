"""The reference backends' interface: every generation of it, over object primitives, page IO and a strategy.

``PageStoreBackend`` implements the three generations of the interface
(legacy, zero-copy v1, pool-aware v2) once for every reference backend. It
holds what it is built from rather than inheriting it:

- the object primitives a concrete backend supplies (declared in objects.py:
  an object's size, a read into memory, an atomic write, the namespace's
  removal), with the names of objects (namespace.py, ``ObjectName``);
- ``host_pages``, the host-page IO helper (page_io.py): where a registered
  pool's pages lie and how their bytes get in and out;
- ``strategy``, how whole pages move between the two (strategies.py):
  ``PER_PAGE``, the plain path that reads like the clauses, or a batched fast
  path, ``BATCHED`` or the memory store's ``SLAB_ROWS``; the vendor suite
  gives the same verdicts with each.

What this module keeps, once for every backend:

- the key check every generation shares (KEY-2) and the legacy calls' page
  rules (BE-9, BE-10, BE-13);
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

import threading
from collections.abc import Mapping
from enum import Enum
from typing import Any, Iterable, Optional, Sequence

import torch

from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import (
    PoolName,
    PoolTransferResult,
    ReadOnlyMapping,
    host_page_starts,
    pool_value,
    validate_page_keys,
)
from hicache_reference.backends.host_bytes import (
    MAX_COPY_RANGES,
    PageFormat,
    flat_order_range_count,
    host_bytes,
    tensor_bytes,
)
from hicache_reference.backends.namespace import format_tag, namespace_for, with_format
from hicache_reference.backends.objects import ObjectStore
from hicache_reference.backends.page_io import HostPages
from hicache_reference.backends.page_ranges import PageRanges
from hicache_reference.backends.strategies import BATCHED, PageStrategy
from hicache_reference.backends.values import BackendStats, PoolResults
from hicache_spec import ALL_PAGES, KV, fold_pool_query

__all__ = [
    "MAX_COPY_RANGES",
    "BackendStats",
    "PageFormat",
    "PageStoreBackend",
    "PoolResults",
    "flat_order_range_count",
    "host_bytes",
    "tensor_bytes",
]


_POOL_NAMES = frozenset(member.value for member in PoolName)
"""Every pool name a host pool may be registered under (BE-24)."""


def _transfer_keys(transfer: Any) -> list[str]:
    keys = getattr(transfer, "keys", None)
    return [] if keys is None else list(keys)


def _is_kv_derived(transfer: Any) -> bool:
    source = getattr(transfer, "indices_from_pool", None)
    return source is not None and pool_value(source) == KV


# ---------------------------------------------------------------- the base
class PageStoreBackend(ObjectStore):
    """Every generation of the backend interface over the object primitives, ``host_pages`` and ``strategy``.

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
        "format",
    )
    """The capability levels the backend claims."""
    hicache_dcp = True
    """Keeps each decode context-parallel shard's pages apart, so NS-5's DCP part is asked of it (SGLang 0.5.23 asks
    it only of its own file and Mooncake backends)."""
    format_guard: bool = True
    """Whether the KV pool's page format (layout, dtype, geometry) is part of the namespace once it is registered
    (NS-9), so that an instance whose pool stores pages otherwise never reads them as its own."""
    strategy: PageStrategy = BATCHED
    """How whole pages move between host slots and objects (strategies.py): ``BATCHED``, ``PER_PAGE`` or a
    backend's own, named by the class or set on an instance."""
    host_ranges_class: type[PageRanges] = PageRanges
    """What finds each page's host byte ranges for ``host_pages``; a variant of ``PageRanges`` may be named here."""

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
        super().__init__(namespace_for(storage_config))
        self.base_namespace = self.namespace
        """The namespace from the configuration alone (NS-1..NS-5); ``namespace`` adds the KV format (NS-9)."""
        self._formatted_namespace: Optional[str] = None
        self.metrics_enabled = bool(getattr(storage_config, "enable_storage_metrics", False))
        """Whether ``get_stats()`` returns a snapshot (True) or None."""
        self._registration_lock = threading.Lock()
        self._derived_pools: set[str] = set()
        self.mem_pool_host: Any = None
        """The registered KV host pool, or None (a plain attribute, as SGLang's base class has it)."""
        self._pools: dict[str, Any] = {}
        self._formats: dict[str, PageFormat] = {}
        self.host_pages = HostPages(self.host_ranges_class(), self._guarded)
        """Where the registered pools' pages lie in host memory and how their bytes get in and out (page_io.py)."""

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
        name = pool_value(host_pool_name)
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
                if self.format_guard and self.namespace is not self._formatted_namespace:
                    # NS-9: a reader of another format misses instead of misreading; the namespace as it is now
                    # (a subclass may have set its own) gets the format as its last part, once
                    tag = format_tag(pool, page_format.dtype, page_format.page_size, page_format.element_count)
                    self.base_namespace = self.namespace
                    self.namespace = self._formatted_namespace = with_format(self.namespace, tag)

    # ============================================================ boundary checks
    def _checked_keys(self, keys: Any) -> list[str]:
        """Return ``keys`` as a new list, or raise ContractViolation naming the bad key (KEY-2)."""
        validate_page_keys(keys, field=f"{type(self).__name__}.keys")
        return list(keys)

    def _page_slots(self, page_format: PageFormat, host_indices: Any, key_count: int) -> list[int]:
        """Return the first slot of each page, or raise ContractViolation before any IO (BE-15, BE-16)."""
        field = f"{type(self).__name__}.host_indices"
        starts = host_page_starts(host_indices, key_count, page_format.page_size, field=field)
        limit = page_format.slot_count
        if limit is not None and starts:
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

    # ============================================================ whole pages, by the strategy
    def _read_pages(self, pool_name: str, keys: Sequence[str], slots: Sequence[int]) -> list[bool]:
        """Read each page into its own host slots; True only for a page that arrived whole (BE-15, BE-16)."""
        return self.strategy.read(self, pool_name, keys, slots) if keys else []

    def _write_pages(
        self, pool_name: str, keys: Sequence[str], slots: Sequence[int], groups: Sequence[Any]
    ) -> list[bool]:
        """Write each host page as the object of its key; True only if it can be read back (BE-7, BE-17)."""
        return self.strategy.write(self, pool_name, keys, slots, groups) if keys else []

    def _present(self, pool_name: str, keys: Sequence[str]) -> list[bool]:
        """Return, per key, whether the pool holds a whole page for it (BE-13: short or empty is absent)."""
        return self.strategy.present(self, pool_name, keys) if keys else []

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
        extra = [transfer for transfer in transfers if pool_value(transfer.name) != KV]
        kv_present = self._present(KV, keys)
        kv_hit = 0
        while kv_hit < len(keys) and kv_present[kv_hit]:
            kv_hit += 1
        kv_flags = (True,) * kv_hit + (False,) * (len(keys) - kv_hit)
        queries = []
        for transfer in extra:
            name = pool_value(transfer.name)
            within = self._present(name, keys[:kv_hit]) if name in self._formats else [False] * kv_hit
            present = tuple(within) + (False,) * (len(keys) - kv_hit)
            policy = pool_value(getattr(transfer, "hit_policy", ALL_PAGES))
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
        kv_indices = next((getattr(t, "host_indices", None) for t in transfers if pool_value(t.name) == KV), None)
        plan: list[tuple[Any, str, list[str], Optional[list[int]]]] = []
        for transfer in transfers:
            name = pool_value(transfer.name)
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
        self._guarded(self._clear_namespaces, None)

    def _clear_namespaces(self) -> None:
        """Remove this instance's namespace, and under replicated KV its rank's own (BE-11: the rank's Mamba state
        lies there, NS-5), and nothing else (NS-8)."""
        self._clear_namespace(self.namespace)
        per_rank = getattr(self.namespace, "per_rank", None)
        if per_rank is not None:
            self._clear_namespace(per_rank)

    def get_stats(self) -> Optional[BackendStats]:
        """Return a ``BackendStats`` snapshot when metrics are enabled, else None. Clause: BE-12."""
        return self._counters.snapshot() if self.metrics_enabled else None

    def close(self) -> None:
        """Stop serving: later reads miss and later writes fail, without raising."""
        self._closed = True
