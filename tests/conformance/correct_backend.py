"""A small, correct backend for the suite's own tests: the base every planted bug changes in one place.

Pages are bytes in a process-wide dict named by ``extra_config["store"]``
(so that instances, like ranks, can share one store), under the name
``namespace|pool|key``; the namespace holds the model and the PP, CP and TP
coordinates, TP being ``*`` for replicated KV (the Mamba state pool then names
the TP rank itself: that state is sharded by rank). Every generation of the
interface is implemented, each page through the host pool's page helpers.
It is written to be read, not to be fast.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional

import torch

from hicache_contracts.models import PoolTransferResult
from tests.oracles import plain_fold

STORES: dict[str, dict[str, bytes]] = {}
"""Every store, by name."""
_LOCKS: dict[str, threading.RLock] = {}
_REGISTRY_LOCK = threading.Lock()


def pool_name(name: Any) -> str:
    """Return a pool name (an enum member or a str) as its plain value."""
    return str(getattr(name, "value", name))


def tensor_bytes(value: Any) -> bytes:
    """Return the bytes of a tensor (raises for anything else)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"value must be a tensor, got {type(value).__name__}")
    return value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


class PageObjects:
    """The byte plumbing under the interface: the instance's namespace, its registered pools, and the named objects
    of its store (``put``/``fetch``/``present``), which a planted bug may make fail, lose or misname."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        self.config = storage_config
        self.store_name = str(extra.get("store", "default"))
        with _REGISTRY_LOCK:
            self.objects = STORES.setdefault(self.store_name, {})
            self.lock = _LOCKS.setdefault(self.store_name, threading.RLock())
        self.namespace = self.namespace_of(storage_config)
        self.pools: dict[str, Any] = {}
        self.store_failing = False
        self.derived_pools: set[str] = set()
        """The pools a write or query marked KV-derived (``indices_from_pool``); SGLang's reads of them carry no mark."""

    def is_derived(self, transfer: Any) -> bool:
        """Whether ``transfer`` is of a KV-derived pool: marked so, or of a pool a marked transfer named before."""
        name = pool_name(transfer.name)
        if getattr(transfer, "indices_from_pool", None) is not None:
            self.derived_pools.add(name)
        return name in self.derived_pools

    # ------------------------------------------------------------ names
    def namespace_of(self, config: Any) -> str:
        # replicated KV is one per DCP rank (each holds its own part of a page)
        dcp = f"dcp{getattr(config, 'dcp_rank', 0)}/{getattr(config, 'dcp_size', 1)}"
        tp = f"*{dcp}" if config.is_mla_model else f"{config.tp_rank}/{config.tp_size}"
        return f"{config.model_name}|pp{config.pp_rank}/{config.pp_size}|cp{config.attn_cp_rank}/{config.attn_cp_size}|tp{tp}"

    def name(self, key: str, pool: str = "kv") -> str:
        if pool.partition("@")[0] == "mamba" and self.config.is_mla_model:  # sharded by TP rank even so (CTL-8)
            pool = f"{pool}@tp{self.config.tp_rank}/{self.config.tp_size}"
        return f"{self.namespace}|{pool}|{key}"

    def page_bytes(self, pool: str = "kv") -> int:
        dummy = self.pools[pool].get_dummy_flat_data_page()
        return dummy.numel() * dummy.element_size()

    # ------------------------------------------------------------ objects
    @contextlib.contextmanager
    def hicache_storage_faults(self) -> Iterator[None]:
        """Inside the block every store operation of this instance fails with OSError, as a broken store does."""
        self.store_failing = True
        try:
            yield
        finally:
            self.store_failing = False

    def put(self, name: str, data: bytes) -> bool:
        if self.store_failing:
            raise OSError("store unavailable")
        with self.lock:
            self.objects[name] = data
        return True

    def fetch(self, name: str) -> Optional[bytes]:
        if self.store_failing:
            raise OSError("store unavailable")
        with self.lock:
            return self.objects.get(name)

    def present(self, name: str, pool: str = "kv") -> bool:
        try:
            data = self.fetch(name)
        except OSError:  # a store that fails answers "not there"
            return False
        return data is not None and pool in self.pools and len(data) == self.page_bytes(pool)

    def page_tensor(self, data: bytes, pool: str = "kv") -> torch.Tensor:
        dtype = self.pools[pool].get_dummy_flat_data_page().dtype
        return torch.frombuffer(bytearray(data), dtype=dtype)


class CorrectBackend(PageObjects):
    """Honours every backend clause; durability holds within one process (the store outlives instances)."""

    hicache_dcp = True  # keeps each DCP shard's pages apart: NS-5's DCP part is asked of it

    # ------------------------------------------------------------ registration
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.register_pool("kv", mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self.register_pool(pool_name(host_pool_name), host_pool)

    def register_pool(self, name: str, host_pool: Any) -> None:
        """Keep ``host_pool`` as pool ``name``; refuse a second, different one (v1 calls cannot say which) (BE-28)."""
        known = self.pools.get(name)
        if known is not None and known is not host_pool:
            raise ValueError(f"pool {name!r} already has another host pool; build one instance per controller")
        self.pools[name] = host_pool

    def on_host_pools_registered(self) -> None:
        if "kv" not in self.pools:
            raise RuntimeError("register_mem_pool_host must come before on_host_pools_registered")
        self.attached = True

    # ------------------------------------------------------------ legacy
    def exists(self, key: str) -> bool:
        return self.present(self.name(key))

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        for index, key in enumerate(keys):
            if not self.exists(key):
                return index
        return len(keys)

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Optional[torch.Tensor]:
        if not self.exists(key):
            return None
        try:
            # A page removed since exists() found it comes back None, and page_tensor raises TypeError on it.
            page = self.page_tensor(self.fetch(self.name(key)))  # type: ignore[arg-type]
        except OSError:
            return None
        if target_location is None:
            return page
        target_location.view(-1).copy_(page)
        return target_location

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        targets = target_locations or [None] * len(keys)
        return [self.get(key, target) for key, target in zip(keys, targets)]

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        try:
            return self.put(self.name(key), tensor_bytes(value))
        except Exception:
            return False

    def batch_set(self, keys: list, values: Any = None, target_locations: Any = None, target_sizes: Any = None) -> bool:
        results = [self.set(key, value) for key, value in zip(keys, values or [])]
        return len(results) == len(keys) and all(results)

    # ------------------------------------------------------------ v1
    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return [False] * len(keys)
        results = []
        for index, key in enumerate(keys):
            try:
                if not self.present(self.name(key, pool), pool):
                    results.append(False)
                    continue
                slot = int(host_indices[index * host_pool.page_size])
                data = self.fetch(self.name(key, pool))
                if data is None:  # removed since the lookup: a miss
                    results.append(False)
                    continue
                host_pool.set_from_flat_data_page(slot, self.page_tensor(data, pool))
                results.append(True)
            except Exception:
                results.append(False)
        return results

    def write_pages(self, pool: str, keys: list, host_indices: Any) -> list[bool]:
        host_pool = self.pools.get(pool)
        if host_pool is None:
            return [False] * len(keys)
        results = []
        for index, key in enumerate(keys):
            try:
                slot = int(host_indices[index * host_pool.page_size])
                results.append(self.put(self.name(key, pool), tensor_bytes(host_pool.get_data_page(slot, flat=True))))
            except Exception:
                results.append(False)
        return results

    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        return self.read_pages("kv", list(keys), host_indices)

    def batch_set_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list[bool]:
        return self.write_pages("kv", list(keys), host_indices)

    # ------------------------------------------------------------ v2
    def pool_present(self, pool: str, keys: list) -> tuple[bool, ...]:
        return tuple(self.present(self.name(key, pool), pool) for key in keys)

    def pool_query(self, transfer: Any, keys: list) -> tuple:
        self.is_derived(transfer)  # a query marks a KV-derived pool, as a write does
        name = pool_name(transfer.name)
        return (name, pool_name(transfer.hit_policy), len(transfer.keys or ()), self.pool_present(name, keys))

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        keys = list(keys)
        queries = tuple(self.pool_query(transfer, keys) for transfer in pool_transfers or ())
        folded, entries, restorable = plain_fold(self.pool_present("kv", keys), queries)  # not the spec's: the oracle's
        # None says every length 1..kv_hit_pages is restorable (BE-26): list them only when some inside are not
        listed = None if set(restorable) == set(range(1, folded + 1)) else list(restorable)
        return PoolTransferResult(
            kv_hit_pages=folded,
            extra_pool_hit_pages=dict(entries),  # type: ignore[arg-type]  # SGLang's forms, which the model takes
            restorable_prefix_pages=listed,  # type: ignore[arg-type]
        )

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        return {
            pool_name(item.name): self.read_pages(pool_name(item.name), list(item.keys or ()), item.host_indices)
            for item in transfers
        }

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        for item in transfers:
            self.is_derived(item)
        ordered = sorted(transfers, key=lambda item: pool_name(item.name) == "kv")  # sidecars first, KV last
        return {
            pool_name(item.name): self.write_pages(pool_name(item.name), list(item.keys or ()), item.host_indices)
            for item in ordered
        }

    # ------------------------------------------------------------ housekeeping
    def clear(self) -> None:
        with self.lock:
            for name in [name for name in self.objects if name.startswith(self.namespace + "|")]:
                del self.objects[name]

    def get_stats(self) -> Any:
        return None

    def close(self) -> None:
        """Nothing to let go of: the pages stay in the store for the instances that read them later (BE-29)."""

    def describe_l3_object_layout(
        self, *, sidecar_pool_specs: Any = (), swa_trailing_pages: Any = None, page_size: Any = None
    ) -> dict:
        """The objects of this pipeline stage (BE-32); MHA pages are filed per TP rank, which one scheduler
        cannot name for the others, so their layout is reported as one it cannot describe."""
        config = self.config
        inner: dict = {"pools": [], "pp_rank": config.pp_rank, "pp_size": config.pp_size}
        layout = {"enabled": True, "backend": "correct", "page_size": page_size, "hicache_object_layout": inner}
        if not config.is_mla_model:
            return {**layout, "enabled": False, "reason": "MHA pages are filed per tensor-parallel rank"}
        inner["key_prefix"] = config.model_name  # one prefix for every stage: stages differ in pp_rank and pools only
        inner["pools"] = [{"pool": name, "hit_policy": "all_pages"} for name in sorted(self.pools)]
        return layout


class ListsRestorableLengths(CorrectBackend):
    """Correct; batch_exists_v2 also lists the prefix lengths KV and every pool can restore
    (restorable_prefix_pages), ascending, as 0.5.23's HiCacheFile does. ``restorable`` shapes the list."""

    def restorable(self, lengths: tuple) -> Any:
        return list(lengths)

    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        keys = list(keys)
        queries = tuple(self.pool_query(transfer, keys) for transfer in pool_transfers or ())
        hit, entries, restorable = plain_fold(self.pool_present("kv", keys), queries)
        return PoolTransferResult(
            kv_hit_pages=hit,
            extra_pool_hit_pages=dict(entries),  # type: ignore[arg-type]
            restorable_prefix_pages=self.restorable(restorable),
        )
