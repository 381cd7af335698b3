"""How the linker suite builds a linker on CPU and drives it: directly, or through SGLang's own wrapper.

``LinkerSetup`` is what one linker instance is built for (its device pools,
rank coordinates, model, store). The default factory calls the constructor
0.5.23's dynamic loader calls (LNK-4) with a ``params`` carrying the pools
(``params.linker_device_pools``, and an MHA-like KV cache behind
``params.token_to_kv_pool_allocator.get_kvcache()``) and an ``extra_config``
naming the rank coordinates and a store private to the check; a vendor whose
linker needs other wiring passes a factory of its own.

``Driver`` calls the linker as the engine does for the chosen release:
``finish_layer_wise_loading`` (0.5.22+) or the completed-load queue
(0.5.20, 0.5.21), ``offload(..., session_id=...)`` on 0.5.23. When that
release is imported, ``WrapperDriver`` routes the calls SGLang's
``UnifiedCacheLinkerWrapper`` makes through the wrapper itself, over a
stand-in cache that records what the wrapper publishes.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import torch

from hicache_spec import ALL_PAGES, KV
from hicache_contracts.linker.device import DevicePool, make_device_pools
from hicache_spec.linker import intersect_rank_lookups
from hicache_spec.releases import release_key

__all__ = [
    "Driver",
    "LinkerSetup",
    "WrapperDriver",
    "default_factory",
    "make_transfer",
    "new_keys",
]

STORAGE_MODULE = "sglang.srt.mem_cache.hicache_storage"
LINKER_MODULE = "sglang.srt.mem_cache.unified_cache.unified_cache_linker"


@dataclass
class LinkerSetup:
    """What one linker instance is built for."""

    pools: dict[str, DevicePool]
    store_id: str
    workdir: Path
    model_name: str = "hicache-linker-suite/model"
    tp_rank: int = 0
    tp_size: int = 1
    cp_rank: int = 0
    pp_rank: int = 0
    rank_replicated: bool = False
    page_size: int = 4
    extra_config: dict[str, Any] = field(default_factory=dict)

    def but(self, **changes: Any) -> LinkerSetup:
        return replace(self, **changes)


def fresh_setup(workdir: Path, extra_config: Optional[dict[str, Any]] = None, *, seed: int = 0) -> LinkerSetup:
    """Return a setup with fresh KV and SWA pools and a store of its own."""
    pools = make_device_pools((KV, "swa"), num_layers=2, num_slots=256, slots_per_page=4, seed=seed)
    return LinkerSetup(pools, f"linker-suite-{uuid.uuid4().hex[:12]}", workdir, extra_config=dict(extra_config or {}))


class _KVCache:
    """An MHA-like KV cache over the setup's KV pool (k_buffer / v_buffer per layer)."""

    def __init__(self, pool: DevicePool) -> None:
        self.k_buffer = [layer[0] for layer in pool.layers]
        self.v_buffer = [layer[-1] for layer in pool.layers]
        self.layer_num = pool.num_layers
        self.page_size = pool.slots_per_page


def linker_arguments(setup: LinkerSetup) -> tuple[Any, Any, dict[str, Any]]:
    """Return (server_args, params, extra_config) for ``setup`` as the suite's harness builds them."""
    kvcache = _KVCache(setup.pools[KV]) if KV in setup.pools else None
    params = SimpleNamespace(
        page_size=setup.page_size,
        linker_device_pools=setup.pools,
        token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: kvcache),
        pp_rank=setup.pp_rank,
        pp_size=max(1, setup.pp_rank + 1),
        attn_cp_rank=setup.cp_rank,
        attn_cp_size=max(1, setup.cp_rank + 1),
        tp_cache_group=None,
        attn_tp_cache_group=None,
    )
    server_args = SimpleNamespace(model_path=setup.model_name, enable_linker_mla_dedup=False)
    extra = {
        "store": setup.store_id,
        "path": str(setup.workdir / setup.store_id),
        "model_name": setup.model_name,
        "tp_rank": setup.tp_rank,
        "cp_rank": setup.cp_rank,
        "pp_rank": setup.pp_rank,
        "rank_replicated": setup.rank_replicated,
    }
    extra.update(setup.extra_config)
    return server_args, params, extra


def default_factory(linker_cls: type) -> Callable[[LinkerSetup], Any]:
    """Return a factory that builds ``linker_cls`` the way 0.5.23's dynamic loader calls it (LNK-4)."""

    def build(setup: LinkerSetup) -> Any:
        server_args, params, extra = linker_arguments(setup)
        return linker_cls(
            server_args, params, components=set(), extra_config=json.loads(json.dumps(extra)), forward_stream=None
        )

    return build


def make_transfer(
    name: str, keys: Optional[list[str]], device_indices: Optional[torch.Tensor] = None, policy: str = ALL_PAGES
) -> Any:
    """Return a PoolTransfer: the imported release's class when SGLang is loaded, else the contract model."""
    storage = sys.modules.get(STORAGE_MODULE)
    if storage is not None:
        fields = {"name": storage.PoolName(name), "keys": keys, "device_indices": device_indices}
        return storage.PoolTransfer(hit_policy=storage.PoolHitPolicy(policy), **fields)
    from hicache_contracts.models import PoolTransfer

    values: dict[str, Any] = {"name": name, "keys": keys, "device_indices": device_indices, "hit_policy": policy}
    return PoolTransfer(**values)  # the model coerces the strings to its enums


def new_keys(count: int) -> list[str]:
    """Return ``count`` fresh page keys (64 lowercase hex characters each)."""
    return [uuid.uuid4().hex + uuid.uuid4().hex for _ in range(count)]


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


class Driver:
    """Calls a linker as the engine of release ``release`` does."""

    timeout = 10.0

    def __init__(self, linker: Any, release: str) -> None:
        self.linker = linker
        self.release = release
        self.finish_style = release_key(release) >= release_key("0.5.22")
        self.session_style = release_key(release) >= release_key("0.5.23")

    @property
    def mode(self) -> str:
        return "direct"

    def lookup(self, rid: str, transfers: list[Any]) -> list[int]:
        return list(self.linker.lookup(rid, transfers))

    def agree(self, per_rank: list[list[int]], tail_pages: int) -> int:
        """The length the engine loads given each rank's lookup (LNK-22)."""
        return intersect_rank_lookups(tuple(tuple(r) for r in per_rank), tail_pages)

    def offload(self, transfers: list[Any]) -> bool:
        if self.session_style:
            return bool(self.linker.offload(transfers, session_id=None))
        return bool(self.linker.offload(transfers))

    def offload_results(self, count: int) -> list[bool]:
        """Wait until ``count`` results are ready and consume them, oldest first."""
        if not _wait(lambda: self.linker.num_completed_offloads() >= count, self.timeout):
            raise TimeoutError(f"{count} offload result(s) not ready after {self.timeout:.0f} s")
        return [bool(self.linker.pop_completed_offload()) for _ in range(count)]

    def load(self, rid: str, transfers: list[Any]) -> bool:
        return bool(self.linker.load(rid, transfers))

    def start(self) -> int:
        return int(self.linker.start_layer_wise_loading())

    def finish(self, index: int) -> bool:
        """Wait for the batch started as ``index``; True when it landed (0.5.20/0.5.21: when it is reported)."""
        if self.finish_style:
            return bool(self.linker.finish_layer_wise_loading(index))
        self.wait_layers(index)  # 0.5.20/0.5.21: the forward waits per layer, then the batch is popped
        if not _wait(lambda: self.linker.num_completed_loads() >= 1, self.timeout):
            raise TimeoutError(f"load batch {index} not reported after {self.timeout:.0f} s")
        self.linker.pop_completed_load()
        return True

    def wait_layers(self, index: int) -> None:
        counter = self.linker.layer_done_counter
        counter.set_consumer(index)
        for layer in range(_num_layers(self.linker)):
            counter.wait_until(layer)

    def cancel(self, rid: str) -> bool:
        return bool(self.linker.cancel_queued_load(rid))

    def reset(self) -> None:
        self.linker.reset()

    def close(self) -> None:
        self.linker.close()


def _num_layers(linker: Any) -> int:
    return int(getattr(linker, "num_layers", 0) or getattr(linker.layer_done_counter, "num_layers", 0) or 1)


class _StandInCache:
    """The parts of UnifiedRadixCache the linker wrapper touches, recording what it publishes."""

    def __init__(self) -> None:
        self.tree_components: tuple[Any, ...] = ()
        self.components: dict[Any, Any] = {}
        self._components_tuple: tuple[Any, ...] = ()
        self.published: list[tuple[Any, bool]] = []
        self.locks: dict[Any, int] = {}
        self.peer_masks: list[torch.Tensor] = []
        self.tree_core = SimpleNamespace(
            enable_external_cache_linker=False,
            mark_external_linker_offload_pending=lambda node: None,
            finish_external_linker_offload=self._finish_offload,
            mark_external_cache_stored_path=lambda *a: None,
        )
        self.write_through_threshold = 0
        self.token_to_kv_pool_allocator = None
        self.insert_session_id = None

    def _finish_offload(self, publish_node_ids: list[Any], lock_node_id: Any, success: bool) -> None:
        self.published.append((lock_node_id, bool(success)))

    def inc_lock_ref(self, node_id: Any) -> Any:
        self.locks[node_id] = self.locks.get(node_id, 0) + 1
        return SimpleNamespace(to_dec_params=lambda: None)

    def dec_lock_ref(self, node_id: Any, params: Any = None) -> None:
        self.locks[node_id] = self.locks.get(node_id, 0) - 1

    def _all_reduce_attn_groups(self, tensor: torch.Tensor, op: Any) -> None:
        for mask in self.peer_masks:  # the other ranks' contributions, MIN-reduced
            torch.minimum(tensor, mask, out=tensor)


class WrapperDriver(Driver):
    """Routes the calls through the imported release's UnifiedCacheLinkerWrapper (stand-in cache, one rank)."""

    def __init__(self, linker: Any, release: str) -> None:
        super().__init__(linker, release)
        module = sys.modules[LINKER_MODULE]
        self.cache = _StandInCache()
        self.wrapper = module.UnifiedCacheLinkerWrapper(self.cache, linker)
        self._node = 0
        self._nodes: list[int] = []

    @property
    def mode(self) -> str:
        return "wrapper"

    def agree(self, per_rank: list[list[int]], tail_pages: int) -> int:
        masks = []
        for lengths in per_rank[1:]:
            mask = torch.zeros(tail_pages + 1, dtype=torch.int)
            for n in lengths:
                if 0 < n <= tail_pages:
                    mask[n] = 1
            masks.append(mask)
        self.cache.peer_masks = masks
        try:
            return int(self.wrapper._sync_restorable_prefix(per_rank[0], num_pages=tail_pages, device_hit_pages=0))
        finally:
            self.cache.peer_masks = []

    def offload(self, transfers: list[Any]) -> bool:
        self._node += 1
        before = len(self.wrapper.pending_offloads)
        self.wrapper._offload_node(self._node, transfers)
        queued = len(self.wrapper.pending_offloads) > before
        if queued:
            self._nodes.append(self._node)
        return queued

    def offload_results(self, count: int) -> list[bool]:
        if not _wait(lambda: self.wrapper.num_completed_offloads() >= count, self.timeout):
            raise TimeoutError(f"{count} offload result(s) not ready after {self.timeout:.0f} s")
        start = len(self.cache.published)
        successes = self.wrapper.take_completed_offloads(count)
        self.wrapper.commit_completed_offloads(successes)
        published = self.cache.published[start:]
        nodes, self._nodes = self._nodes[:count], self._nodes[count:]
        if [node for node, _ in published] != nodes:
            raise AssertionError(f"the wrapper published nodes {published} for offloads of nodes {nodes}")
        return [bool(s) for s in successes]

    def start(self) -> int:
        return int(self.wrapper.start_layer_wise_loading())

    def finish(self, index: int) -> bool:
        if not self.finish_style:
            return super().finish(index)
        self.wrapper.inflight_load_rids = [f"batch-{index}"]
        self.wrapper.inflight_load_index = index
        return not self.wrapper.finish_loads()

    def cancel(self, rid: str) -> bool:
        if not self.finish_style:
            return super().cancel(rid)
        self.wrapper.inflight_load_rids.append(rid)
        self.wrapper.release_request(rid)
        cancelled = rid not in self.wrapper.inflight_load_rids
        if not cancelled:
            self.wrapper.inflight_load_rids.remove(rid)
        return cancelled

    def reset(self) -> None:
        self.wrapper.reset()
        self._nodes.clear()

    def close(self) -> None:
        self.wrapper.close()
