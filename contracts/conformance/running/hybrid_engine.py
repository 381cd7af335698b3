"""The hybrid model the engine tier drives: the release's HybridCacheController, host-pool group and tree pieces.

``HybridEngine(attach, folder, model, sidecars)`` builds, on CPU, the release's ``HybridCacheController``
over a ``HostPoolGroup`` (the release's ``pool_host`` group and ``PoolEntry``) of the release's own host
pools (``release_pools``): the KV anchor with the ``sidecars`` asked: ``swa`` (an MHA model's SWA host
pool is an MHA host pool), ``indexer`` (a KV-derived pool whose rows follow the KV rows) or ``mamba``
(``MambaPoolHost`` over a CPU ``MambaPool``, one state per page). It attaches the backend as the engine
attaches a hybrid model's backend (``attach_storage_backend`` with the group's entries: every pool
registered through ``register_mem_host_pool_v2``), puts the project's ``RecordingBackend`` between, and
has the release's own tree code build each operation and its pool transfers:

- ``backup``: ``UnifiedRadixCache.write_backup_storage`` over a tree node, whose spec comes from
  ``UnifiedTreeCore.build_storage_backup_spec``: the SWA transfer from ``SWAComponent.
  build_hicache_transfers`` (the window's trailing pages, TRAILING_PAGES; ``MambaComponent``'s: the
  chain's last page), the KV-derived indexer transfer from ``UnifiedRadixCache._build_sidecar_transfers``
  (``SidecarPoolSpec(INDEXER, KV)``);
- ``prefetch``: ``UnifiedRadixCache.prefetch_from_storage`` from the root (the components'
  ``prepare_prefetch`` size the staging, their ``build_hicache_transfers`` send placeholders, the
  indexer transfer ``keys=None``); at the hit, ``HybridCacheController.allocate_storage_hit`` where the
  release has it (the KV rows) and ``UnifiedRadixCache._alloc_prefetch_aux_staging`` (the window's rows
  or the Mamba state's, through the component's ``alloc_prefetch_staging``).

What is the project's: the tree's state (a ``UnifiedTreeCore`` and its nodes, an ``SWAComponent`` or
``MambaComponent`` and a ``UnifiedRadixCache``, each the release's class made without its constructor,
holding only what the functions above read: the node's host rows and hashes, the window, the pools),
the host lock (a no-op), the scheduler's part (wait for the hit query, hand the operation to the IO
thread, collect the acks) and, as in the MHA scenarios, the allocator, the process groups and
``device_module``. Not built: the indexer pool classes of DSA / QSA models (they need those models'
device pools); the indexer here is an MHA host pool in the indexer's place; a model with both an SWA
window and Mamba state.
"""

from __future__ import annotations

import collections
import importlib
import threading
from types import SimpleNamespace
from typing import Any, Optional

import torch

from hicache_spec import KV
from hicache_contracts.conformance.running.engine_parts import (
    HOST_PAGES,
    PAGE_SIZE,
    WAIT_S,
    Allocator,
    await_prefetch,
    cpu_device_module,
    engine_process,
    file_dir,
)

__all__ = ["MAMBA_SLOTS", "TRAILING", "WINDOW_PAGES", "HybridEngine", "host_pools", "pool_name", "trailing_transfers"]

WINDOW_PAGES = 4
"""Pages of the SWA window (the trailing pages written and read)."""
TRAILING: dict[str, int] = {"swa": WINDOW_PAGES, "mamba": 1}
"""The trailing pools and the pages each keeps (a Mamba state is one page: the chain's last)."""
MAMBA_SLOTS = 64
"""States of the Mamba device pool (the host pool holds twice as many)."""


def _module(name: str) -> Any:
    return importlib.import_module(name)


class HybridEngine:
    """The release's HybridCacheController over its host-pool group, and the tree pieces that build its operations."""

    def __init__(
        self, attach: tuple[str, Optional[dict[str, Any]]], folder: Optional[str], model: str, sidecars: tuple[str, ...]
    ) -> None:
        from hicache_contracts.engine import RecordingBackend

        self.sidecars = sidecars
        storage = _module("sglang.srt.mem_cache.hicache_storage")
        self.storage = storage
        group_module = _module("sglang.srt.mem_cache.pool_host")
        controller_module = _module("sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller")
        cpu_device_module()
        self.utils = _module("sglang.srt.mem_cache.utils")
        self.pools = host_pools((KV, *sidecars))
        entries = [
            group_module.PoolEntry(
                name=storage.PoolName(name),
                host_pool=pool,
                device_pool=pool.device_pool,
                layer_mapper=lambda layer: layer,
                is_primary_index_anchor=name == KV,
            )
            for name, pool in self.pools.items()
        ]
        self.group = group_module.HostPoolGroup(entries)
        self.controller = controller_module.HybridCacheController(
            Allocator(self.pools[KV].device_pool), self.group, PAGE_SIZE, None, threading.Event()
        )
        with engine_process(_module("sglang.srt.managers.cache_controller")), file_dir(folder):
            self.controller.attach_storage_backend(
                attach[0],
                prefetch_threshold=PAGE_SIZE,
                model_name=model,
                storage_backend_extra_config=None if attach[1] is None else dict(attach[1]),
                host_pools=self.group.entries,
            )
        self.backend = self.controller.storage_backend
        self.rec = RecordingBackend(self.backend)
        self.controller.storage_backend = self.rec
        self.written: dict[str, dict[str, torch.Tensor]] = {name: {} for name in self.pools}
        self._build_tree()

    # ------------------------------------------------------------ the release's tree pieces
    def _build_tree(self) -> None:
        core = _module("sglang.srt.mem_cache.unified_cache.unified_tree_core")
        radix = _module("sglang.srt.mem_cache.unified_radix_cache")
        kinds = _module("sglang.srt.mem_cache.unified_cache.component_type").ComponentType
        self.kinds = kinds
        self.node_class = core.UnifiedTreeNode
        tree = core.UnifiedTreeCore.__new__(core.UnifiedTreeCore)
        cache = radix.UnifiedRadixCache.__new__(radix.UnifiedRadixCache)
        page = PAGE_SIZE
        components: dict[Any, Any] = {}
        if "swa" in self.sidecars:
            swa = _module("sglang.srt.mem_cache.unified_cache.components.swa").SWAComponent
            components[kinds.SWA] = swa.__new__(swa)
            components[kinds.SWA].__dict__.update(
                sliding_window_size=WINDOW_PAGES * page,
                full_window_pages=WINDOW_PAGES,
                _swa_kv_pool_host=self.pools["swa"],
            )
        if "mamba" in self.sidecars:
            mamba = _module("sglang.srt.mem_cache.unified_cache.components.mamba").MambaComponent
            components[kinds.MAMBA] = mamba.__new__(mamba)
            components[kinds.MAMBA].__dict__.update(_mamba_pool_host=self.pools["mamba"])
        for component in components.values():
            component.__dict__.update(cache=cache, tree_core=tree)
        self.types = (kinds.FULL, *components)
        self.root = core.UnifiedTreeNode(self.types)
        tree.__dict__.update(
            root_node=self.root,
            _node_arena={self.root.id: self.root},
            components=tuple(components.values()),
            components_by_type=components,
            component_types=self.types,
            page_size=page,
            is_eagle=False,
            enable_storage=True,
            enable_hicache=True,
            has_swa_host_pool="swa" in self.sidecars,
        )
        derived = [
            self.storage.SidecarPoolSpec(
                pool_name=self.storage.PoolName(name), indices_from_pool=self.storage.PoolName.KV
            )
            for name in self.sidecars
            if name not in TRAILING
        ]
        lock = SimpleNamespace(to_dec_params=lambda: None)
        cache.__dict__.update(
            cache_controller=self.controller,
            hicache_storage_pass_prefix_keys=True,
            tree_core=tree,
            tree_components=self.types,
            components=components,
            sidecar_pool_specs=derived,
            prefetch_threshold=page,
            host_memory_mode="cache",
            buffer_pipeline=None,
            ongoing_backup={},
            ongoing_prefetch={},
            _prefetch_outcome_stats=collections.Counter(),
            _storage_prefetch_wait={},
            storage_prefetch_retries=SimpleNamespace(
                cancel=lambda *_args, **_kwargs: None, poll_miss=lambda *_args, **_kwargs: None
            ),
            enable_storage_metrics=False,
            storage_metrics_collector=None,
            inc_host_lock_ref=lambda _node_id: lock,
        )
        self.tree, self.cache, self.radix = tree, cache, radix

    def close(self) -> None:
        self.controller.storage_backend = self.backend
        try:
            self.controller.detach_storage_backend()
        except Exception:  # noqa: S110 - closing must not hide the verdict
            pass

    # ------------------------------------------------------------ operations
    def keys(self, tokens: list[int]) -> list[str]:
        return list(self.utils.get_storage_hash_str(tokens, None, page_size=PAGE_SIZE))

    def _fill(self, pool_name: str, row: int, key: str, generator: torch.Generator) -> None:
        pool = self.pools[pool_name]
        template = pool.get_dummy_flat_data_page()
        if template.dtype == torch.uint8:
            page = torch.randint(0, 256, template.shape, generator=generator, dtype=torch.uint8)
        else:
            page = torch.randn(template.shape, generator=generator).to(template.dtype)
        pool.set_from_flat_data_page(row, page)
        self.written[pool_name][key] = page

    def backup(self, tokens: list[int], seed: int) -> Any:
        """Write ``tokens`` as one tree node through the release's write_backup_storage; return the finished operation."""
        page = PAGE_SIZE
        keys = self.keys(tokens)
        generator = torch.Generator().manual_seed(seed)
        kv_rows = self.pools[KV].alloc(len(keys) * page)
        node = self.node_class(self.types)
        for number, key in enumerate(keys):
            for name in (KV, *(name for name in self.sidecars if name not in TRAILING)):
                self._fill(name, int(kv_rows[number * page]), key, generator)
        node.component_data[self.kinds.FULL].host_value = kv_rows
        trailing_rows = {}
        for name in self.sidecars:
            if name in TRAILING:
                pool = self.pools[name]
                rows = pool.alloc(TRAILING[name] * pool.page_size)
                for number, key in enumerate(keys[-TRAILING[name] :]):
                    self._fill(name, int(rows[number * pool.page_size]), key, generator)
                node.component_data[self.kinds[name.upper()]].host_value = rows
                trailing_rows[name] = rows
        node.parent = self.root
        node.key = _module("sglang.srt.mem_cache.radix_cache").RadixKey(list(tokens))
        node.hash_value = keys
        self.tree._node_arena[node.id] = node
        self.radix.UnifiedRadixCache.write_backup_storage(self.cache, node.id)
        done = self.controller.ack_backup_queue.get(timeout=WAIT_S)
        self.pools[KV].free(kv_rows)
        for name, rows in trailing_rows.items():
            self.pools[name].free(rows)
        return done

    def snapshot(self) -> dict[str, list[torch.Tensor]]:
        return {
            name: [
                pool.get_data_page(number * pool.page_size).reshape(-1).clone()
                for number in range(int(pool.size) // int(pool.page_size))
            ]
            for name, pool in self.pools.items()
        }

    def prefetch(self, tokens: list[int]) -> tuple[Any, Any, int, dict[str, list[torch.Tensor]]]:
        """One prefetch through the release's prefetch_from_storage; return (operation, its ongoing entry, loaded, before).

        The scheduler hands the anchor's prefix (the root's: none, ``[]``) when the feature is on, else None.
        """
        base = _module("sglang.srt.mem_cache.base_prefix_cache")
        handle = base.CacheRequestHandle("r-hybrid", 0) if hasattr(base, "CacheRequestHandle") else "r-hybrid"
        before = self.snapshot()
        self.radix.UnifiedRadixCache.prefetch_from_storage(
            self.cache,
            handle,
            self.root.id,
            list(tokens),
            None,
            [] if self.cache.hicache_storage_pass_prefix_keys else None,
        )
        info = self.cache.ongoing_prefetch[handle]
        operation = self.controller.prefetch_hit_queue.get(timeout=WAIT_S)
        if operation is not info.operation:
            raise AssertionError("the controller's hit query answered another operation")
        hits = operation.storage_hit_count
        if hits == 0:
            return operation, info, 0, before
        allocate = getattr(self.controller, "allocate_storage_hit", None)
        if allocate is not None:
            rows, hits = allocate(operation, hits, allow_partial=False, min_tokens=hits, evict_host=lambda _tokens: 0)
        else:
            rows = self.controller.mem_pool_host.alloc(hits)
        if rows is None or not self.radix.UnifiedRadixCache._alloc_prefetch_aux_staging(self.cache, info, hits):
            raise AssertionError("the host pools could not take the hit")
        operation.storage_hit_count = hits
        operation.hash_value = operation.hash_value[: hits // PAGE_SIZE]
        operation.host_indices = rows
        return operation, info, await_prefetch(self.controller, operation), before

    def release(self, operation: Any, info: Any) -> None:
        if operation.host_indices is not None:
            self.pools[KV].free(operation.host_indices)
        for transfer in trailing_transfers(info):
            if transfer.host_indices is not None:
                self.pools[pool_name(transfer)].free(transfer.host_indices)
        self.cache.ongoing_prefetch.clear()


def host_pools(names: tuple[str, ...]) -> dict[str, Any]:
    """The release's host pools for ``names``: MHA pools for KV, SWA and the indexer, a Mamba pool for Mamba."""
    from hicache_contracts.conformance.session.release_pools import release_host_pool, release_mamba_host_pool

    pools = {}
    for name in names:
        if name == "mamba":
            pools[name] = release_mamba_host_pool(slots=MAMBA_SLOTS)
            continue
        pools[name] = release_host_pool(
            kind="mha",
            layout="layer_first",
            pages=HOST_PAGES,
            page_size=PAGE_SIZE,
            layer_num=2,
            head_num=2,
            head_dim=8,
            label=name,
        )
    return pools


def pool_name(transfer: Any) -> str:
    return str(getattr(transfer.name, "value", transfer.name))


def trailing_transfers(info: Any) -> list[Any]:
    """The trailing transfers the tree's components built for a prefetch (the window, the Mamba state)."""
    return [
        transfer for transfers in info.comp_xfers.values() for transfer in transfers if pool_name(transfer) in TRAILING
    ]
