"""The three generations of the backend interface, as runtime-checkable protocols.

A backend written for SGLang subclasses ``HiCacheStorage`` and implements one
or more generations:

    LegacyBackend       get / set / exists / batch_* / clear / get_stats / register_mem_pool_host
    ZeroCopyV1Backend   batch_get_v1 / batch_set_v1 (pages move through the host pool)
    PoolAwareV2Backend  batch_exists_v2 / batch_get_v2 / batch_set_v2 / register_mem_host_pool_v2

and, whatever the generation, the attach hook ``on_host_pools_registered``
(``AttachHooks``, SGLang 0.5.23+).

``isinstance(backend, ZeroCopyV1Backend)`` only says the names exist; whether
they are implemented (and not stubs raising ``NotImplementedError``, BE-18)
is what ``hicache_contracts.capabilities.detect_capabilities`` finds out.

Model types (``HiCacheStorageExtraInfo``, ``PoolTransfer``,
``PoolTransferResult``) appear as ``Any`` so that this module imports nothing
beyond the standard library; the names are SGLang's wire names.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Protocol, runtime_checkable

__all__ = ["AttachHooks", "LegacyBackend", "PoolAwareV2Backend", "ZeroCopyV1Backend"]
"""The protocol classes only (docs/backend-methods.md has a section per name); ``GENERATIONS`` and
``protocol_methods`` are importable beside them."""


@runtime_checkable
class LegacyBackend(Protocol):
    """The first generation: key-by-key and batched calls that move tensors by value."""

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Any:
        """Return the page stored under ``key`` as a tensor, or None when it is missing.

        Clauses: BE-9 (tensor or None), BE-4 (a missing key is None, never an
        exception), BE-5 (a storage error is None).
        """
        ...

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        """Store ``value`` under ``key``; return True only if it can be read back from then on.

        Clauses: BE-9 (a bool), BE-6 (an existing key gives True and correct
        bytes), BE-7 (never visible before fully written), BE-5.
        """
        ...

    def exists(self, key: str) -> bool:
        """Return whether ``key`` is stored, with no side effect.

        Clauses: BE-4, BE-5, BE-13 (an empty or short object is a miss); uses
        the same key scheme as ``set`` (NS-family).
        """
        ...

    def batch_get(self, keys: list[str], target_locations: Any = None, target_sizes: Any = None) -> list[Any]:
        """Return one tensor-or-None per key, in key order.

        Clauses: BE-9 (``len(result) == len(keys)``), BE-4, BE-5, BE-10 (128 keys work).
        """
        ...

    def batch_set(
        self, keys: list[str], values: Any = None, target_locations: Any = None, target_sizes: Any = None
    ) -> bool:
        """Store one value per key; return True only if every page can be read back.

        Clauses: BE-9 (a bool), BE-6, BE-7, BE-10.
        """
        ...

    def batch_exists(self, keys: list[str], extra_info: Optional[Any] = None) -> int:
        """Return ``n``: the leading run of ``keys`` that exist, counted in pages.

        ``0 <= n <= len(keys)``; ``[]`` gives 0; no side effects. ``extra_info``
        is a ``HiCacheStorageExtraInfo`` or None, passed positionally by the
        engine and accepted by keyword too.
        Clauses: BE-2, BE-3, BE-8 (extra_info), BE-13, PFX-6 (never mutate prefix_keys).
        """
        ...

    def clear(self) -> None:
        """Drop every page; never raise. Afterwards ``batch_exists`` is 0 for every earlier key.

        Clause: BE-11.
        """
        ...

    def get_stats(self) -> Any:
        """Return None or a metrics object (attributes, never a dict); called every scheduler tick.

        Clause: BE-12.
        """
        ...

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Receive the host KV pool, once, after construction and before any IO.

        Clause: BE-24.
        """
        ...


@runtime_checkable
class ZeroCopyV1Backend(Protocol):
    """The second generation: pages move between storage and host-pool slots without copies by value."""

    def batch_get_v1(self, keys: list[str], host_indices: Any, extra_info: Optional[Any] = None) -> list[bool]:
        """Read page i of ``keys`` into host slots ``host_indices[i*page_size:(i+1)*page_size]``.

        Returns a list of exactly ``len(keys)`` bools; True only if the page's
        whole byte range landed; nothing outside those slots is written, also
        on failure. An unimplemented method raises NotImplementedError.
        Clauses: BE-14, BE-15, BE-16, BE-18, BE-8, BE-4, BE-5, BE-10.
        """
        ...

    def batch_set_v1(self, keys: list[str], host_indices: Any, extra_info: Optional[Any] = None) -> list[bool]:
        """Write host slots ``host_indices[i*page_size:(i+1)*page_size]`` as the page of ``keys[i]``.

        Returns a list of exactly ``len(keys)`` bools; True only if the page
        can be read back from then on. An unimplemented method raises
        NotImplementedError.
        Clauses: BE-14, BE-17, BE-6, BE-7, BE-18, BE-8, BE-5, BE-10.
        """
        ...


@runtime_checkable
class PoolAwareV2Backend(Protocol):
    """The third generation: one call moves KV and its sidecar pools, addressed by pool name."""

    def batch_exists_v2(
        self, keys: list[str], pool_transfers: Optional[list[Any]] = None, extra_info: Optional[Any] = None
    ) -> Any:
        """Return a ``PoolTransferResult`` for the prefix ``keys`` across KV and ``pool_transfers``.

        What ``kv_hit_pages``, ``extra_pool_hit_pages`` and ``restorable_prefix_pages``
        hold is the fold of BE-21 and BE-26, as the registry states it below.
        Clauses: BE-21, BE-26, HYB-6, HYB-7, BE-18, BE-8.
        """
        ...

    def batch_get_v2(self, transfers: list[Any], extra_info: Optional[Any] = None) -> dict[str, list[bool]]:
        """Read every ``PoolTransfer``; return one entry per transfer name with ``len(keys)`` bools.

        A transfer for an unregistered pool yields all False, never an exception.
        Clauses: BE-19, BE-20, BE-22, BE-15, BE-16, BE-18, BE-8.
        """
        ...

    def batch_set_v2(self, transfers: list[Any], extra_info: Optional[Any] = None) -> dict[str, list[bool]]:
        """Write every ``PoolTransfer``; return one entry per transfer name with ``len(keys)`` bools.

        KV-derived sidecars are written and dropped together with KV.
        Clauses: BE-19, BE-20, BE-22, BE-17, BE-18, BE-8.
        """
        ...

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Receive the host pool named ``host_pool_name`` (a ``PoolName``); called for every pool, KV included.

        Clause: BE-24.
        """
        ...


@runtime_checkable
class AttachHooks(Protocol):
    """Calls a backend receives around attach, whatever generation it implements (SGLang 0.5.23+).

    SGLang's base class gives each a no-op default, so a backend that
    subclasses ``HiCacheStorage`` always has them.
    """

    def on_host_pools_registered(self) -> None:
        """The initial registration burst is over (``register_mem_pool_host`` and every ``register_mem_host_pool_v2``).

        Fired once per attach; pools added later arrive through
        ``register_mem_host_pool_v2`` alone and do not fire it again. A
        backend that must finalise once it knows the pool set does so here;
        raising fails the attach. Clause: BE-24.
        """
        ...


GENERATIONS: dict[str, type] = {"core": LegacyBackend, "v1": ZeroCopyV1Backend, "v2": PoolAwareV2Backend}
"""The protocol of each interface generation, by the level its methods belong to."""


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """Return the public method names ``protocol`` declares, in declaration order: the one list of each generation."""
    return tuple(
        name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")
    )
