"""What the reference controller is attached to: the backend, the host pools and the storage config.

``Attachment`` is built complete by ``CacheController`` before any other
collaborator: it checks the sidecar pools, derives the facts the stages are
built from (the pool split, the ranks) and holds the one step that talks to
the backend before any IO, the registration of the host pools. See
docs/controller.md.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from hicache_contracts import HiCacheStorageConfig, PoolName
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.sidecar_pools import SidecarPool, check_sidecar_pools

__all__ = ["Attachment"]


class Attachment:
    """The backend, its host pools and the storage config, with the facts derived from them. Clauses: HYB-1, CTL-8."""

    def __init__(
        self,
        backend: Any,
        host_pool: HostPagePool,
        storage_config: Optional[HiCacheStorageConfig],
        sidecar_pools: Sequence[SidecarPool],
    ) -> None:
        self.backend = backend
        self.host_pool = host_pool
        self.page_size: int = int(host_pool.page_size)
        """Tokens per page, from the host pool."""
        self.storage_config = storage_config
        self.sidecar_pools: tuple[SidecarPool, ...] = check_sidecar_pools(sidecar_pools, host_pool)
        self.derived_pools: tuple[SidecarPool, ...] = tuple(pool for pool in self.sidecar_pools if pool.kv_derived)
        """The KV-derived sidecar pools, read with every KV slice (HYB-1)."""
        self.separate_pools: tuple[SidecarPool, ...] = tuple(pool for pool in self.sidecar_pools if not pool.kv_derived)
        """The sidecar pools with their own slots, read once after KV (HYB-2)."""
        self.tp_rank: int = int(getattr(storage_config, "tp_rank", 0))
        self.dcp_rank: int = int(getattr(storage_config, "dcp_rank", 0) or 0)
        self.is_replicated_kv: bool = bool(getattr(storage_config, "is_mla_model", False))
        """Whether KV is replicated across TP ranks (``is_mla_model``, CTL-8)."""

    def register_host_pools(self) -> None:
        """Hand the host pools to the backend, once, before any IO, then end the burst. Clauses: BE-24, BE-27.

        A backend that raises from ``on_host_pools_registered`` fails the
        construction, as it fails SGLang's attach.
        """
        register = getattr(self.backend, "register_mem_pool_host", None)
        if callable(register):
            register(self.host_pool)
        if self.sidecar_pools:
            register_v2 = getattr(self.backend, "register_mem_host_pool_v2", None)
            if callable(register_v2):
                register_v2(self.host_pool, PoolName.KV)
                for pool in self.sidecar_pools:
                    register_v2(pool.host_pool, pool.name)
        registered = getattr(self.backend, "on_host_pools_registered", None)
        if callable(registered):
            registered()  # BE-27
