"""SGLang's own cache controllers, built on CPU over a recorded HiCacheFile, for the trace checker.

``RealEngine(release, hybrid=...)`` builds the release's ``HiCacheController``
(or ``HybridCacheController``) with its real storage threads and real host
pools (``MHATokenToKVPoolHost`` over a CPU ``MHATokenToKVPool``), attaches the
release's ``HiCacheFile`` over a temporary folder wrapped in
``RecordingBackend``, and plays the scheduler's part of one prefetch or one
backup: allocate the hit's host rows, hand the operation to the IO thread,
collect its acks.

What is not SGLang's here, each the smallest stand-in:

- the token-to-KV allocator: an object whose ``get_kvcache()`` returns the
  device pool (the controller reads nothing else from it);
- the process groups: ``tp_group=None`` (single rank: no sync group is
  created, so every all-reduce is a no-op);
- ``StorageBackendFactory.create_backend``: replaced while attaching, to
  return ``RecordingBackend(HiCacheFile(config, file_path=<tmp>))``, built with
  ``SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR`` unset (it would win over ``file_path``);
- on 0.5.20-0.5.22, whose ``get_device_module()`` is ``torch.get_device_module()``
  (``torch.cuda`` on a CUDA wheel even with no usable device), the module-level
  ``device_module`` of ``cache_controller`` and ``l2_transfer`` is set to
  ``torch.cpu`` when no CUDA device is available (0.5.23 resolves it so itself);
- the scheduler thread: this class (``prefetch`` / ``backup``).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import threading
import time
from queue import Empty
from types import SimpleNamespace
from typing import Any, Optional

import torch

from hicache_contracts.engine import RecordingBackend
from hicache_contracts.models import FinalAck, PoolHitsAck, ProgressAck, ReadOnlyMapping

_FILE_DIR_ENV = "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"
WAIT_S = 60.0
"""How long a test waits for one controller step (the storage threads poll their queues each second)."""


class _Allocator:
    """The token-to-KV allocator as the controller uses it: ``get_kvcache()``."""

    def __init__(self, device_pool: Any) -> None:
        self.device_pool = device_pool

    def get_kvcache(self) -> Any:
        return self.device_pool


def _device_pool(memory_pool: Any, page_size: int, tokens: int) -> Any:
    return memory_pool.MHATokenToKVPool(
        tokens, page_size, torch.float16, 1, 4, 1, "cpu", False, start_layer=0, end_layer=0
    )


def _host_pool(mha: Any, device_pool: Any, page_size: int, label: str) -> Any:
    """The release's MHA host pool on CPU (0.5.23 takes the device pool's buffer info, older ones the pool)."""
    cls = mha.MHATokenToKVPoolHost
    if "buffer_info" in inspect.signature(cls.__init__).parameters:
        return cls(
            device_pool.get_device_pool_infos()[0].buffer_info,
            2.0,
            0,
            page_size,
            "layer_first",
            pin_memory=False,
            device_capacity_tokens=device_pool.size,
            start_layer=device_pool.start_layer,
            end_layer=device_pool.end_layer,
            pool_label=label,
        )
    return cls(device_pool, 2.0, 0, page_size, "layer_first", pin_memory=False, pool_label=label)


_SINGLE_RANK = {"tp_rank": 0, "tp_size": 1, "pp_rank": 0, "pp_size": 1, "attn_dcp_rank": 0, "attn_dcp_size": 1}


@contextlib.contextmanager
def _single_rank():
    """The release's parallel context as one rank of one (``get_parallel().override``), for attaching."""
    runtime = importlib.import_module("sglang.srt.runtime_context")
    parallel = runtime.get_parallel()
    fields = getattr(runtime, "_PARALLEL_FIELDS", None) or runtime._parallel_fields()  # 0.5.20-0.5.21 / later
    with parallel.override(**{name: value for name, value in _SINGLE_RANK.items() if name in fields}):
        yield


def _with_v1(file_class: type) -> type:
    """The release's HiCacheFile with the v1 page methods, built on its own ``get``/``set`` and the host pool."""

    class HiCacheFileV1(file_class):
        def batch_get_v1(self, keys, host_indices, extra_info=None):
            pool, flags = self.mem_pool_host, []
            for number, key in enumerate(keys):
                page = self.get(key, pool.get_dummy_flat_data_page())
                if page is not None:
                    pool.set_from_flat_data_page(host_indices[number * pool.page_size], page)
                flags.append(page is not None)
            return flags

        def batch_set_v1(self, keys, host_indices, extra_info=None):
            pool = self.mem_pool_host
            return [
                self.set(key, pool.get_data_page(host_indices[number * pool.page_size]))
                for number, key in enumerate(keys)
            ]

    return HiCacheFileV1


class RealEngine:
    """One SGLang controller of the loaded release over ``RecordingBackend(HiCacheFile)``."""

    def __init__(self, folder: str, *, hybrid: bool, v1: bool = True, page_size: int = 1, tokens: int = 2048) -> None:
        self.cc: Any = importlib.import_module("sglang.srt.managers.cache_controller")
        if not torch.cuda.is_available():
            for module in (self.cc, importlib.import_module("sglang.srt.mem_cache.l2_transfer")):
                vars(module)["device_module"] = torch.cpu
        self.storage = importlib.import_module("sglang.srt.mem_cache.hicache_storage")
        self.utils = importlib.import_module("sglang.srt.mem_cache.utils")
        memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
        mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha")
        self.page_size = page_size
        self.hybrid = hybrid
        self.folder = folder
        self.written: dict[str, torch.Tensor] = {}
        """The KV page each backed-up key was written from (flat, as the host pool hands it out)."""
        device = _device_pool(memory_pool, page_size, tokens)
        kv_host = _host_pool(mha, device, page_size, "kv")
        self.pools = {"kv": kv_host}
        PoolName = self.storage.PoolName
        if hybrid:
            group = importlib.import_module("sglang.srt.mem_cache.pool_host")
            swa_device = _device_pool(memory_pool, page_size, tokens)
            indexer_device = _device_pool(memory_pool, page_size, tokens)
            self.pools["swa"] = _host_pool(mha, swa_device, page_size, "swa")
            self.pools["indexer"] = _host_pool(mha, indexer_device, page_size, "indexer")
            entries = [
                group.PoolEntry(
                    name=PoolName.KV,
                    host_pool=kv_host,
                    device_pool=device,
                    layer_mapper=lambda layer: layer,
                    is_primary_index_anchor=True,
                ),
                group.PoolEntry(
                    name=PoolName.SWA,
                    host_pool=self.pools["swa"],
                    device_pool=swa_device,
                    layer_mapper=lambda layer: layer,
                ),
                group.PoolEntry(
                    name=PoolName.INDEXER,
                    host_pool=self.pools["indexer"],
                    device_pool=indexer_device,
                    layer_mapper=lambda layer: layer,
                ),
            ]
            host = group.HostPoolGroup(entries)
            controller_class = importlib.import_module(
                "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller"
            ).HybridCacheController
        else:
            host = kv_host
            controller_class = self.cc.HiCacheController
        self.controller = controller_class(_Allocator(device), host, page_size, None, threading.Event())
        self._attach(folder, host, v1)
        self.rec: RecordingBackend = self.controller.storage_backend

    def _attach(self, folder: str, host: Any, v1: bool) -> None:
        factory = importlib.import_module("sglang.srt.mem_cache.storage").StorageBackendFactory
        original = factory.__dict__["create_backend"]
        backend_class = _with_v1(self.storage.HiCacheFile) if v1 else self.storage.HiCacheFile

        def create_backend(cls, name, config, mem_pool_host, **kwargs):
            saved = os.environ.pop(_FILE_DIR_ENV, None)  # it would take precedence over file_path
            try:
                return RecordingBackend(backend_class(config, file_path=folder))
            finally:
                if saved is not None:
                    os.environ[_FILE_DIR_ENV] = saved

        factory.create_backend = classmethod(create_backend)
        dp_attention = self.cc.is_dp_attention_enabled
        self.cc.is_dp_attention_enabled = lambda: False
        try:
            kwargs = {"host_pools": host.entries} if self.hybrid else {}
            # "dynamic" with interface_v1 makes the controller call batch_get_v1 / batch_set_v1 (with extra_info);
            # "file" calls the legacy batch_get / batch_set, which carry no prefix.
            name, extra = ("dynamic", {"interface_v1": 1}) if v1 else ("file", None)
            with _single_rank():
                self.controller.attach_storage_backend(
                    name,
                    prefetch_threshold=self.page_size,
                    model_name="real-engine",
                    storage_backend_extra_config=extra,
                    **kwargs,
                )
        finally:
            factory.create_backend = original
            self.cc.is_dp_attention_enabled = dp_attention

    def close(self) -> None:
        self.controller.detach_storage_backend()

    # ------------------------------------------------------------ keys and transfers
    def keys(self, token_ids: list, last_hash: Optional[str] = None) -> list:
        """The release's own page keys for ``token_ids`` after ``last_hash``."""
        return list(self.utils.get_storage_hash_str(token_ids, last_hash, page_size=self.page_size))

    def trailing(self, keys: list, pages: int, *, allocate: bool = True) -> Any:
        """A TRAILING_PAGES SWA transfer of the last ``pages`` keys (its host rows allocated on the SWA pool)."""
        rows = self.pools["swa"].alloc(pages * self.page_size) if allocate else None
        return self.storage.PoolTransfer(
            name=self.storage.PoolName.SWA,
            host_indices=rows,
            keys=list(keys[-pages:]),
            hit_policy=self.storage.PoolHitPolicy.TRAILING_PAGES,
        )

    def derived(self) -> Any:
        """A KV-derived INDEXER transfer (its rows and keys are the KV ones)."""
        return self.storage.PoolTransfer(name=self.storage.PoolName.INDEXER, indices_from_pool=self.storage.PoolName.KV)

    def loaded_pages(self, operation: Any, tokens: int) -> list:
        """``(written, now in the host rows)`` for each page of the ``tokens`` the prefetch's acks report loaded."""
        pool = self.pools["kv"]
        pages = tokens // self.page_size
        return [
            (self.written[key], pool.get_data_page(operation.host_indices[number * self.page_size]).flatten())
            for number, key in enumerate(operation.hash_value[:pages])
        ]

    # ------------------------------------------------------------ operations
    def backup(self, token_ids: list, *, prefix_keys: Optional[list], extra_pools: Optional[list] = None) -> Any:
        """Write ``token_ids``' pages from freshly allocated host rows; return the finished StorageOperation."""
        keys = self.keys(token_ids)
        pool = self.pools["kv"]
        rows = pool.alloc(len(keys) * self.page_size)
        generator = torch.Generator().manual_seed(len(self.written))
        for number, key in enumerate(keys):  # distinct bytes per page, so a read of the wrong page shows
            page = torch.randn(pool.get_dummy_flat_data_page().shape, generator=generator).to(
                pool.get_dummy_flat_data_page().dtype
            )
            pool.set_from_flat_data_page(rows[number * self.page_size], page)
            self.written[key] = page
        kwargs = {"extra_pools": extra_pools} if self.hybrid else {}
        self.controller.write_storage(rows, token_ids, hash_value=keys, prefix_keys=prefix_keys, **kwargs)
        return self.controller.ack_backup_queue.get(timeout=WAIT_S)

    def prefetch(
        self,
        token_ids: list,
        *,
        prefix_keys: Optional[list],
        extra_pools: Optional[list] = None,
        last_hash: Optional[str] = None,
    ) -> tuple[Any, list]:
        """Run one prefetch as the scheduler would; return (operation, acks as contract models)."""
        if self.hybrid:
            handle = SimpleNamespace(rid="r-1")
            operation = self.controller.prefetch(handle, token_ids, last_hash, prefix_keys, extra_pools=extra_pools)
        else:
            operation = self.controller.prefetch("r-1", token_ids, last_hash, prefix_keys)
        queried = self.controller.prefetch_hit_queue.get(timeout=WAIT_S)
        assert queried is operation
        hit_tokens = operation.storage_hit_count
        operation.host_indices = self.controller.mem_pool_host.alloc(max(hit_tokens, self.page_size))
        self.controller.prefetch_buffer.put(operation)
        return operation, self._acks(operation)

    def _acks(self, operation: Any) -> list:
        acks: list = []
        progress = 0
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                ack = self.controller.ack_prefetch_queue.get(timeout=1)
            except Empty:
                continue
            if ack.completed_tokens is not None:
                acks.append(ProgressAck(operation_id=operation.id, slice_index=progress, tokens=ack.completed_tokens))
                progress += 1
            if ack.pool_hits is not None:
                hits = {str(getattr(name, "value", name)): count for name, count in ack.pool_hits.items() if count}
                acks.append(PoolHitsAck(operation_id=operation.id, pool_hits=ReadOnlyMapping(hits)))
            if ack.completed_req:
                tokens = (
                    acks[-1].tokens
                    if acks and isinstance(acks[-1], ProgressAck)
                    else (max((a.tokens for a in acks if isinstance(a, ProgressAck)), default=0))
                )
                acks.append(FinalAck(operation_id=operation.id, tokens=tokens))
                return acks
        raise AssertionError(f"no final ack within {WAIT_S} s; acks so far: {acks}")
