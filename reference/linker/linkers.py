"""The reference linkers as SGLang loads them: ``MemoryLinker`` and ``FileLinker``.

0.5.23 loads them with its ``dynamic`` linker backend::

    --enable-unified-cache-external-linker --unified-cache-external-linker-backend dynamic
    --unified-cache-external-linker-config '{"linker": "FileLinker",
        "linker_module_path": "hicache_reference.linker", "linker_extra_config": {"path": "/tmp/l3"}}'

When SGLang is importable the classes subclass the imported release's
``UnifiedCacheLinker``; otherwise ``object``, and they behave the same. One
class answers every pinned release's interface (LNK-1, LNK-2, LNK-3): it has
both completion styles (``finish_layer_wise_loading`` and
``num_completed_loads`` / ``pop_completed_load``), ``offload(transfers,
session_id=None)``, and the constructor the 0.5.23 factory calls (LNK-4).

Where the device pools come from, first found: the ``pools`` keyword; a
``linker_device_pools`` attribute of ``params`` (the linker suite's CPU
harness); the KV pool of ``params.token_to_kv_pool_allocator.get_kvcache()``
(``k_buffer`` / ``v_buffer`` per layer, or an MLA ``kv_buffer``, replicated
across TP ranks).

``linker_extra_config`` keys: ``path`` (FileLinker's folder), ``store`` (the
MemoryLinker's process-wide store name, default ``"default"``),
``model_name``, ``tp_rank``, ``cp_rank``, ``pp_rank`` (default: from the
server args, torch.distributed and ``params``), ``rank_replicated``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch

from hicache_spec.values import is_count
from hicache_spec import KV
from hicache_contracts.linker.device import DevicePool, pool_name
from hicache_reference.linker.core import LinkerCore
from hicache_reference.linker.stores import FileStore, PageStore, shared_memory_store

try:  # SGLang is optional: subclass its ABC only when a release is importable
    from sglang.srt.mem_cache.unified_cache import unified_cache_linker as _sglang_linker
except Exception:  # ImportError, or a release whose import chain fails here
    _sglang_linker = None

__all__ = ["SGLANG_LINKER_AVAILABLE", "FileLinker", "MemoryLinker", "device_pools_from_params"]

SGLANG_LINKER_AVAILABLE: bool = _sglang_linker is not None
"""Whether SGLang's UnifiedCacheLinker was importable when this module was loaded."""

_Base: type[Any] = getattr(_sglang_linker, "UnifiedCacheLinker", object) if SGLANG_LINKER_AVAILABLE else object


def device_pools_from_params(params: Any) -> dict[str, DevicePool]:
    """Return the device pools a linker built by SGLang (or the suite's harness) reads and writes."""
    given = getattr(params, "linker_device_pools", None)
    if given:
        return {pool_name(name): pool for name, pool in given.items()}
    allocator = getattr(params, "token_to_kv_pool_allocator", None)
    kvcache = allocator.get_kvcache() if allocator is not None else None
    page_size = int(getattr(params, "page_size", 1) or 1)
    if kvcache is not None and hasattr(kvcache, "k_buffer"):
        layers: list[tuple[torch.Tensor, ...]] = [(k, v) for k, v in zip(kvcache.k_buffer, kvcache.v_buffer)]
        return {KV: DevicePool(KV, layers, page_size)}
    if kvcache is not None and hasattr(kvcache, "kv_buffer"):
        return {KV: DevicePool(KV, [(b,) for b in kvcache.kv_buffer], page_size, rank_replicated=True)}
    raise ValueError("params: no device pools (need linker_device_pools or token_to_kv_pool_allocator)")


def _rank(extra: Mapping[str, Any], key: str, default: int) -> int:
    value = extra.get(key, default)
    if not is_count(value):
        raise ValueError(f"linker_extra_config.{key}: must be a non-negative int (got {value!r})")
    return value


class _SGLangLinker(LinkerCore, _Base):
    """Constructor and attributes SGLang's loader and wrapper use; the behaviour is LinkerCore's."""

    def __init__(
        self,
        server_args: Any = None,
        params: Any = None,
        *,
        components: Any = None,
        extra_config: Optional[Mapping[str, Any]] = None,
        forward_stream: Any = None,
        pools: Optional[Mapping[Any, DevicePool]] = None,
        store: Optional[PageStore] = None,
    ) -> None:
        extra = dict(extra_config or {})
        device_pools = {pool_name(n): p for n, p in pools.items()} if pools else device_pools_from_params(params)
        replicated = bool(extra.get("rank_replicated", all(p.rank_replicated for p in device_pools.values())))
        tp_default = 0
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            tp_default = torch.distributed.get_rank()
        tp_rank = _rank(extra, "tp_rank", tp_default)
        cp_rank = _rank(extra, "cp_rank", int(getattr(params, "attn_cp_rank", 0) or 0))
        pp_rank = _rank(extra, "pp_rank", int(getattr(params, "pp_rank", 0) or 0))
        model = str(extra.get("model_name") or getattr(server_args, "model_path", "") or "model")
        rank_part = "replicated" if replicated else f"tp{tp_rank}"
        namespace = f"{model}/{rank_part}_cp{cp_rank}_pp{pp_rank}"  # LNK-21
        self.forward_stream = forward_stream
        self.components = components
        super().__init__(
            device_pools,
            store if store is not None else self._make_store(extra),
            namespace=namespace,
            owner=not replicated or tp_rank == 0,  # LNK-20
        )
        self.pools = self._release_pool_keys(self.device_pools)  # LNK-6

    @staticmethod
    def _release_pool_keys(pools: dict[str, DevicePool]) -> dict[Any, DevicePool]:
        storage = None
        if _sglang_linker is not None:
            storage = getattr(_sglang_linker, "PoolName", None)
        if storage is None:
            return dict(pools)
        return {storage(name): pool for name, pool in pools.items()}

    def _make_store(self, extra: Mapping[str, Any]) -> PageStore:
        raise NotImplementedError


class MemoryLinker(_SGLangLinker):
    """The reference linker over a process-wide memory store (``linker_extra_config.store`` names it)."""

    def _make_store(self, extra: Mapping[str, Any]) -> PageStore:
        name = extra.get("store", "default")
        if not isinstance(name, str) or not name:
            raise ValueError(f"linker_extra_config.store: must be a non-empty str (got {name!r})")
        return shared_memory_store(name)


class FileLinker(_SGLangLinker):
    """The reference linker over one file per page under ``linker_extra_config.path`` (atomic rename)."""

    def _make_store(self, extra: Mapping[str, Any]) -> PageStore:
        path = extra.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"linker_extra_config.path: FileLinker needs a folder (got {path!r})")
        return FileStore(path)
