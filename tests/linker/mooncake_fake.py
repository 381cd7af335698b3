"""SGLang's Mooncake direct linker on CPU: a fake MooncakeStore through its ``storage=`` seam.

The direct linker resolves its device pools through SGLang's hybrid pool registry, which has a
direct-linker pool group only for DeepSeek-V4, DSA and Mamba stacks. The factory here hands it a
DSA KV cache over the suite's CPU KV buffers (one buffer per layer; the indexer buffers are the
cache's own) and replaces the MooncakeStore with ``FakeMooncakeStore``: objects in a dict shared per
store name, device bytes read and written through the raw pointers the linker computes, as the
Mooncake client does. Needs the release imported; builds only TP rank 0 (the linker reads its rank
from torch.distributed).
"""

from __future__ import annotations

import ctypes
import importlib
import threading
from types import SimpleNamespace
from typing import Any

import torch

from hicache_contracts.linker.checks import CheckSkipped
from hicache_contracts.linker.device import pool_name
from hicache_contracts.linker.harness import LinkerSetup, linker_arguments
from hicache_spec.pools import fold_pool_query

MOONCAKE = "sglang.srt.mem_cache.storage.mooncake_store.mooncake_direct_linker"

_SHARED: dict[str, dict[str, bytes]] = {}
_SHARED_LOCK = threading.Lock()


class FakeMooncakeStore:
    """The calls MooncakeDirectLinker makes on its storage and on the Mooncake client, over a dict."""

    mem_pool_host: Any
    """The host pool, which the linker sets on its storage."""

    def __init__(self, store_id: str, model_name: str) -> None:
        with _SHARED_LOCK:
            self.objects = _SHARED.setdefault(store_id, {})
        self.model_name = model_name
        self.store = self  # the client calls land here too
        self.mla_suffix = self.mha_suffix = ""
        self.calls: list[tuple[str, Any]] = []

    # the client
    def register_buffer(self, ptr: int, size: int) -> int:
        return 0

    def batch_get_session_start(self, keys: list[str]) -> list[int]:
        return [0 if key in self.objects else -1 for key in keys]

    def batch_get_session_end(self, keys: list[str]) -> None:
        return None

    def batch_get_into_multi_buffer_ranges(self, keys, ptrs, sizes, offsets) -> list[int]:
        moved = []
        for key, row_ptrs, row_sizes, row_offsets in zip(keys, ptrs, sizes, offsets):
            data = self.objects.get(key)
            if data is None:
                moved.append(-1)
                continue
            for ptr, size, offset in zip(row_ptrs, row_sizes, row_offsets):
                ctypes.memmove(ptr, data[offset : offset + size], size)
            moved.append(sum(row_sizes))
        return moved

    def close(self) -> None:
        pass

    # the storage
    def _get_hybrid_page_component_keys(self, keys: list[str], transfer: Any) -> tuple[list[str], None]:
        return [f"{key}@{pool_name(transfer.name)}" for key in keys], None

    def _tag_keys(self, keys: list[str]) -> list[str]:
        return [f"{self.model_name}/{key}@{self.mha_suffix}" for key in keys]

    def _object_keys(self, transfer: Any, keys: list[str]) -> list[str]:
        return self._tag_keys(self._get_hybrid_page_component_keys(list(keys), transfer)[0])

    def batch_exists_v2(self, keys: list[str], transfers: list[Any], extra_info: Any = None) -> Any:
        self.calls.append(("batch_exists_v2", extra_info))
        kv_present = None
        queries = []
        for transfer in transfers:
            present = tuple(key in self.objects for key in self._object_keys(transfer, keys))
            name = pool_name(transfer.name)
            if name == "kv":
                kv_present = present
            else:
                queries.append((name, pool_name(transfer.hit_policy), len(transfer.keys), present))
        hit, entries, restorable = fold_pool_query(kv_present or (False,) * len(keys), tuple(queries))
        return SimpleNamespace(
            kv_hit_pages=hit, extra_pool_hit_pages=dict(entries), restorable_prefix_pages=list(restorable)
        )

    def batch_set_v2(self, transfers: list[Any], extra_info: Any = None) -> dict[Any, list[bool]]:
        self.calls.append(("batch_set_v2", extra_info))
        results = {}
        for transfer in transfers:
            entry = self.mem_pool_host.entry_map[transfer.name]
            keys = self._object_keys(transfer, transfer.keys)
            ptrs, sizes = entry.get_page_buffer_meta(transfer.host_indices)
            per_page = len(ptrs) // max(1, len(keys))
            for j, key in enumerate(keys):
                part = slice(j * per_page, (j + 1) * per_page)
                self.objects[key] = b"".join(ctypes.string_at(p, s) for p, s in zip(ptrs[part], sizes[part]))
            results[transfer.name] = [True] * len(keys)
        return results


def mooncake_factory(release: str):
    """Return a LinkerSetup -> MooncakeDirectLinker factory for the imported ``release``."""
    module: Any = importlib.import_module(MOONCAKE)
    memory_pool: Any = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    component_type = importlib.import_module("sglang.srt.mem_cache.unified_cache.component_type")
    # The linker reads the model path and the TP size from the runtime context a server publishes.
    module.get_model = lambda: SimpleNamespace(model_path="hicache-linker-suite/model")
    module.get_parallel = lambda: SimpleNamespace(tp_size=1)
    module.device_module = torch.cpu  # 0.5.20/0.5.21 resolve torch.cuda on a CUDA build of torch without a GPU
    if hasattr(module, "get_memory"):  # 0.5.20-0.5.22 read their extra config from the server's memory options
        module.get_memory = lambda: SimpleNamespace(hicache_storage_backend_extra_config=None)

    class CpuDSAKVCache(memory_pool.DSATokenToKVPool):
        """A DSA KV cache whose buffers are given, not allocated (no device needed)."""

        kv_buffer: Any = None
        index_k_with_scale_buffer: Any = None

    def build(setup: LinkerSetup) -> Any:
        if setup.tp_rank != 0:
            raise CheckSkipped("MooncakeDirectLinker reads its TP rank from torch.distributed; one process is rank 0")
        setup.pools.pop("swa", None)  # a DSA stack has no SWA pool
        pool = setup.pools["kv"]
        pool.layers = [(layer[0],) for layer in pool.layers]  # one KV buffer per layer, as DSA keeps it
        kvcache = CpuDSAKVCache.__new__(CpuDSAKVCache)
        kvcache.page_size = pool.slots_per_page
        kvcache.layer_num = pool.num_layers
        kvcache.kv_buffer = [layer[0] for layer in pool.layers]
        pages = pool.num_slots // pool.slots_per_page
        kvcache.index_k_with_scale_buffer = [torch.zeros(pages, 6, dtype=torch.uint8) for _ in pool.layers]
        server_args, params, extra = linker_arguments(setup)
        params.token_to_kv_pool_allocator = SimpleNamespace(get_kvcache=lambda: kvcache)
        params.mtp_draft_device_pools = ()
        keywords: dict[str, Any] = {
            "components": {component_type.ComponentType.FULL},
            "storage": FakeMooncakeStore(setup.store_id, setup.model_name),
        }
        if release == "0.5.23":
            keywords.update(extra_config=extra, forward_stream=None)
        return module.MooncakeDirectLinker(server_args, params, **keywords)

    return build
