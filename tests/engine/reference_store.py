"""A reference memory store filled with a scenario's pages by the reference controller, for tests that read real bytes."""

from __future__ import annotations

import torch

from hicache_contracts import HiCacheStorageConfig, PageKeys, PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.engine import EngineScenario
from hicache_contracts.engine._scenario import PAGE_SIZE, SWA_WINDOW
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import MemoryBackend, MemoryStore
from hicache_reference.controller import CacheController, SidecarPool


def host_pool(pages: int = 800) -> HostPagePool:
    return HostPagePool(pages, PAGE_SIZE, 2, 1, 4, kind="mha", pin_memory=False)


def _sidecar_pools(hybrid: bool) -> tuple:
    if not hybrid:
        return ()
    return (
        SidecarPool(PoolName.INDEXER, host_pool(), kv_derived=True),
        SidecarPool(PoolName.SWA, host_pool(), hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=SWA_WINDOW),
    )


def filled_store(scenario: EngineScenario) -> MemoryStore:
    """Return a memory store holding the scenario's stored pages (and sidecars), written by the reference."""
    store = MemoryStore()
    stored = scenario.pages if scenario.stored is None else scenario.stored
    if not stored:
        return store
    keys = scenario.chain[:stored]
    pool = host_pool()
    generator = torch.Generator().manual_seed(7)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape, generator=generator).to(pool.dtype))
    config = HiCacheStorageConfig.single_rank()
    pools = _sidecar_pools(scenario.hybrid)
    transfers = []
    if pools:
        window = PageKeys(tuple(keys[-SWA_WINDOW:]))
        transfers = [
            PoolTransfer(
                name=PoolName.SWA,
                keys=window,
                host_indices=pools[1].host_pool.alloc(len(window)),
                hit_policy=PoolHitPolicy.TRAILING_PAGES,
            )
        ]
    with CacheController(
        MemoryBackend(config, {"store": store}), pool, storage_config=config, sidecar_pools=pools
    ) as controller:
        slots = pool.alloc(stored)
        if slots is None:
            raise RuntimeError(f"could not fill the store for {scenario}: no host memory for {stored} pages")
        backup = controller.backup(keys, slots, sidecar_transfers=transfers)
        if not backup.wait(10) or backup.completed_tokens != stored * PAGE_SIZE:
            raise RuntimeError(f"could not fill the store for {scenario}: {backup!r}")
    return store
