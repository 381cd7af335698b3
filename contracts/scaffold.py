"""``hicache-conform init NAME``: write a backend skeleton a vendor fills in with their storage calls.

The skeleton implements every method SGLang calls (legacy, v1, v2) on top
of five storage calls the vendor writes: connect to the store, store bytes under a
name, fetch them, say whether a name is stored, and drop every name under a
namespace. Names are ``<namespace>/<pool>/<key>`` with the namespace built from
the model and the rank coordinates (NS family), so the contract-facing logic —
result shapes, short objects, host-pool page helpers, errors turned into False,
one host pool per name — is already right once those five calls are. It declares
every level a backend of its shape passes (``SKELETON_LEVELS``).
"""

from __future__ import annotations

import keyword
import string
from pathlib import Path

__all__ = [
    "SKELETON_LEVELS",
    "STORAGE_CALLS",
    "checked_names",
    "class_name_for",
    "render_skeleton",
    "write_module",
    "write_skeleton",
]

SKELETON_LEVELS = ("core", "legacy", "v1", "v2", "prefix", "namespacing", "concurrency", "robustness")
"""The levels the skeleton declares: every one a backend of its shape passes once its storage calls work
(``durability`` is the store's to claim: it needs pages that outlive the process)."""

STORAGE_CALLS = ("connect", "store", "fetch", "contains", "delete_namespace")
"""The storage calls a vendor fills in, in the order the skeleton lists them."""

SKELETON = string.Template('''"""$class_name: an SGLang HiCache L3 storage backend (skeleton written by `hicache-conform init`).

Fill in the five storage calls at the end of the file (connect, store, fetch,
contains, delete_namespace) with your store's client calls; everything above
them already follows the contract. Check it with

    hicache-conform run --backend $module_name:$class_name --extra-config '{"endpoint": "..."}'

and load it in SGLang with

    --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
      '{"backend_name": "$module_name", "module_path": "$module_name", "class_name": "$class_name",
        "interface_v1": 1, "endpoint": "..."}'

Method reference: docs/backend-methods.md of hicache-spec (`hicache-conform methods`).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

try:  # SGLang's base class when SGLang is installed; a plain object otherwise
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base
except ImportError:  # pragma: no cover - depends on the environment
    _Base = object


try:  # batch_exists_v2's result type; SGLang's own when installed
    from sglang.srt.mem_cache.hicache_storage import PoolName as _PoolName, PoolTransferResult as _HitResult

    _KV: Any = _PoolName.KV
except ImportError:  # pragma: no cover - depends on the environment
    _HitResult, _KV = None, "kv"


class _PlainHitResult:
    """PoolTransferResult's fields, where SGLang is not installed."""

    def __init__(self, kv_hit_pages: int, extra_pool_hit_pages: dict, restorable_prefix_pages: list) -> None:
        self.kv_hit_pages = kv_hit_pages
        self.extra_pool_hit_pages = extra_pool_hit_pages
        self.restorable_prefix_pages = restorable_prefix_pages


def _hit_result(kv_hit_pages: int, extra_pool_hit_pages: dict, restorable_prefix_pages: list) -> Any:
    cls = _HitResult or _PlainHitResult
    return cls(kv_hit_pages=kv_hit_pages, extra_pool_hit_pages=extra_pool_hit_pages,
               restorable_prefix_pages=restorable_prefix_pages)


def _pool_name(name: Any) -> str:
    """A pool name (an enum member or a str) as its plain value: "kv", "indexer", ..."""
    return str(getattr(name, "value", name))


def _derives_from_kv(transfer: Any) -> bool:
    """Whether a transfer is a KV-derived sidecar (indices_from_pool is KV)."""
    source = getattr(transfer, "indices_from_pool", None)
    return source is not None and _pool_name(source) == "kv"


def _leading_run(flags: list) -> int:
    run = 0
    while run < len(flags) and flags[run]:
        run += 1
    return run


class $class_name(_Base):
    """Pages stored as bytes under ``<namespace>/<pool>/<key>``."""

    hicache_levels = $levels
    """The levels this backend claims, and the suite checks; add "durability" once pages outlive the process (NS-7)."""
    hicache_host_pool_faults = True
    """Pages move through the host pool's page helpers, so the suite may fail those to check BE-5."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        # SGLang builds a dynamic backend as cls(storage_config, {}): read options from extra_config (BE-1)
        self.extra_config = dict(getattr(storage_config, "extra_config", None) or {})
        self.namespace = self.namespace_of(storage_config)
        self.rank = f"tp{storage_config.tp_rank}of{storage_config.tp_size}"
        self.pools: dict[str, Any] = {}
        self.connect(self.extra_config)

    # ---------------------------------------------------------------- names (NS family)
    @staticmethod
    def namespace_of(config: Any) -> str:
        """Model and rank coordinates; TP is "*" for MLA, whose KV every TP rank shares (NS-1..NS-5)."""
        tp = "*" if getattr(config, "is_mla_model", False) else f"{config.tp_rank}of{config.tp_size}"
        return "/".join([
            str(config.model_name),
            f"pp{getattr(config, 'pp_rank', 0)}of{getattr(config, 'pp_size', 1)}",
            f"cp{getattr(config, 'attn_cp_rank', 0)}of{getattr(config, 'attn_cp_size', 1)}",
            f"dcp{getattr(config, 'dcp_rank', 0)}of{getattr(config, 'dcp_size', 1)}",
            f"tp{tp}",
        ])

    def name_of(self, key: str, pool: str = "kv") -> str:
        """The storage name of one page: the same scheme for every method (NS-6). Mamba state is sharded by TP rank
        even where MLA KV is shared (CTL-8), so its pool part names the rank (NS-1)."""
        if pool == "mamba":
            pool = f"mamba@{self.rank}"
        return f"{self.namespace}/{pool}/{key}"

    # ---------------------------------------------------------------- host pools (BE-24, BE-28)
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.keep_pool("kv", mem_pool_host)
        self.mem_pool_host = mem_pool_host  # where SGLang's base class keeps it

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self.keep_pool(_pool_name(host_pool_name), host_pool)

    def keep_pool(self, name: str, host_pool: Any) -> None:
        """One host pool per name: the same one again is fine, another is refused, never swapped in (BE-28)."""
        held = self.pools.get(name)
        if held is not None and held is not host_pool:
            raise ValueError(
                f"$class_name: the {name!r} pool already has a host pool; a second, different one is refused "
                "(one instance serves one host pool per name: build another instance for it)"
            )
        self.pools[name] = host_pool

    def page_nbytes(self, pool: str = "kv") -> int:
        page = self.pools[pool].get_dummy_flat_data_page()
        return page.numel() * page.element_size()

    def is_whole_page(self, data: Optional[bytes], pool: str = "kv") -> bool:
        """An empty or short object is a miss, never a hit (BE-13)."""
        return data is not None and pool in self.pools and len(data) == self.page_nbytes(pool)

    def as_page(self, data: bytes, pool: str = "kv") -> torch.Tensor:
        dtype = self.pools[pool].get_dummy_flat_data_page().dtype
        return torch.frombuffer(bytearray(data), dtype=dtype)

    @staticmethod
    def as_bytes(value: Any) -> bytes:
        return value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()

    def has_page(self, key: str, pool: str = "kv") -> bool:
        try:
            return pool in self.pools and self.contains(self.name_of(key, pool)) and self.is_whole_page(
                self.fetch(self.name_of(key, pool)), pool)
        except Exception:  # a storage error is a miss (BE-5)
            return False

    # ---------------------------------------------------------------- legacy interface (level core)
    def exists(self, key: str) -> bool:
        return self.has_page(key)

    def batch_exists(self, keys: list, extra_info: Any = None) -> int:
        """The leading run of stored keys, in pages (BE-2, BE-3); extra_info may be None (BE-8)."""
        for position, key in enumerate(keys):
            if not self.has_page(key):
                return position
        return len(keys)

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None) -> Optional[torch.Tensor]:
        try:
            data = self.fetch(self.name_of(key))
            if not self.is_whole_page(data):
                return None
            page = self.as_page(data)
            if target_location is None:
                return page
            target_location.view(-1).copy_(page.view(target_location.dtype))
            return target_location
        except Exception:  # missing or unreadable: None, never an exception (BE-4, BE-5)
            return None

    def batch_get(self, keys: list, target_locations: Any = None, target_sizes: Any = None) -> list:
        targets = list(target_locations) if target_locations is not None else [None] * len(keys)
        return [self.get(key, target) for key, target in zip(keys, targets)]

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        try:
            return bool(self.store(self.name_of(key), self.as_bytes(value)))
        except Exception:
            return False

    def batch_set(self, keys: list, values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        values = list(values) if values is not None else []
        return len(values) == len(keys) and all([self.set(key, value) for key, value in zip(keys, values)])

    # ---------------------------------------------------------------- zero-copy v1 (level v1)
    def batch_get_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list:
        """Page i lands in host slots host_indices[i*page_size:(i+1)*page_size]; one bool per key (BE-14..16)."""
        return self.read_pages("kv", list(keys), host_indices)

    def batch_set_v1(self, keys: list, host_indices: Any, extra_info: Any = None) -> list:
        """Page i is read from host slots host_indices[i*page_size:...]; True only if it reads back (BE-17)."""
        return self.write_pages("kv", list(keys), host_indices)

    def read_pages(self, pool: str, keys: list, host_indices: Any) -> list:
        host_pool = self.pools.get(pool)
        results = []
        for position, key in enumerate(keys):
            try:
                data = self.fetch(self.name_of(key, pool))
                if host_pool is None or not self.is_whole_page(data, pool):
                    results.append(False)
                    continue
                slot = int(host_indices[position * host_pool.page_size])
                host_pool.set_from_flat_data_page(slot, self.as_page(data, pool))
                results.append(True)
            except Exception:
                results.append(False)
        return results

    def write_pages(self, pool: str, keys: list, host_indices: Any) -> list:
        host_pool = self.pools.get(pool)
        results = []
        for position, key in enumerate(keys):
            try:
                if host_pool is None:
                    results.append(False)
                    continue
                slot = int(host_indices[position * host_pool.page_size])
                data = self.as_bytes(host_pool.get_data_page(slot, flat=True))
                results.append(bool(self.store(self.name_of(key, pool), data)))
            except Exception:
                results.append(False)
        return results

    # ---------------------------------------------------------------- pool-aware v2 (level v2)
    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        """The largest prefix KV and every gating pool can restore (BE-21); each pool's own boundary (HYB-6, HYB-7)."""
        try:
            keys = list(keys)
            kv_hit = _leading_run([self.has_page(key) for key in keys])
            restorable = list(range(1, kv_hit + 1))
            entries: dict = {_KV: kv_hit} if kv_hit else {}
            for transfer in pool_transfers or []:
                pool = _pool_name(transfer.name)
                if pool == "kv":
                    continue
                if not restorable:
                    break  # nothing left to restore: later pools need not be examined
                present = [self.has_page(key, pool) for key in keys[:kv_hit]]
                policy = _pool_name(getattr(transfer, "hit_policy", "all_pages"))
                window = max(1, len(getattr(transfer, "keys", None) or []))  # N is len(transfer.keys)
                if policy == "block_groups":  # whole groups; reports its own verdict and never gates
                    run = _leading_run(present)
                    if run - run % window:
                        entries[transfer.name] = run - run % window
                    continue
                if policy == "trailing_pages":  # every n whose window of N pages ending at n is present
                    allowed = [n for n in range(1, kv_hit + 1) if all(present[max(0, n - window):n])]
                else:  # all_pages: the leading run
                    allowed = list(range(1, _leading_run(present) + 1))
                if allowed:
                    entries[transfer.name] = allowed[-1]
                restorable = [n for n in restorable if n in allowed]
            return _hit_result(restorable[-1] if restorable else 0, entries, restorable)
        except Exception:  # a storage error is a miss (BE-5)
            return _hit_result(0, {}, [])

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        """One list of len(keys) bools per transfer name (BE-19); an unregistered pool is all False (BE-20)."""
        results = {}
        for transfer in transfers:
            keys, indices = list(transfer.keys or []), self.indices_of(transfer, transfers)
            pool = _pool_name(transfer.name)
            results[transfer.name] = [False] * len(keys) if indices is None else self.read_pages(pool, keys, indices)
        return results

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        """Write every transfer; KV-derived sidecars before KV, so a KV page never outlives its sidecar (BE-22)."""
        results = {}
        for transfer in sorted(transfers, key=lambda item: not _derives_from_kv(item)):
            keys, indices = list(transfer.keys or []), self.indices_of(transfer, transfers)
            pool = _pool_name(transfer.name)
            results[transfer.name] = [False] * len(keys) if indices is None else self.write_pages(pool, keys, indices)
        return results

    @staticmethod
    def indices_of(transfer: Any, transfers: list) -> Any:
        """A transfer's host slots; a KV-derived sidecar without its own reuses the KV transfer's."""
        indices = getattr(transfer, "host_indices", None)
        if indices is None and _derives_from_kv(transfer):
            indices = next((getattr(item, "host_indices", None) for item in transfers
                            if _pool_name(item.name) == "kv"), None)
        return indices

    # ---------------------------------------------------------------- housekeeping
    def clear(self) -> None:
        """Drop this instance's pages only (NS-8); never raise (BE-11)."""
        try:
            self.delete_namespace(self.namespace + "/")
        except Exception:
            pass

    def get_stats(self) -> Any:
        return None  # or an object with attributes, never a dict (BE-12)

    # ---------------------------------------------------------------- storage calls: fill these in
    def connect(self, extra_config: dict) -> None:
        """Open the client to your store, from your keys in ``extra_config`` (unknown keys are ignored, BE-1)."""

    def store(self, name: str, data: bytes) -> bool:
        """Write ``data`` under ``name``, readers seeing it only once whole (BE-7); True once it reads back."""
        raise NotImplementedError("$class_name.store: fill in the storage calls")

    def fetch(self, name: str) -> Optional[bytes]:
        """Return the bytes stored under ``name``, or None when there are none."""
        raise NotImplementedError("$class_name.fetch: fill in the storage calls")

    def contains(self, name: str) -> bool:
        """Whether something is stored under ``name``, without reading it."""
        raise NotImplementedError("$class_name.contains: fill in the storage calls")

    def delete_namespace(self, prefix: str) -> None:
        """Delete every name that starts with ``prefix``, and nothing else."""
        raise NotImplementedError("$class_name.delete_namespace: fill in the storage calls")
''')
"""The skeleton module; ``$module_name`` and ``$class_name`` are filled in."""


def class_name_for(module_name: str) -> str:
    """Return the class name for a module name: ``my_store`` gives ``MyStore``."""
    return "".join(part[:1].upper() + part[1:] for part in module_name.split("_") if part) or "Store"


def checked_names(module_name: str, class_name: str | None, example: str) -> tuple[str, str]:
    """Return ``module_name`` and the class name (``class_name``, else derived from the module's); raise
    ValueError naming a bad one, with ``example`` (a module name) and its class name as the examples."""
    if not module_name.isidentifier() or keyword.iskeyword(module_name):
        raise ValueError(f"init NAME: must be a Python module name, such as {example} (got {module_name!r})")
    class_name = class_name or class_name_for(module_name)
    if not class_name.isidentifier() or keyword.iskeyword(class_name):
        raise ValueError(
            f"init --class: must be a Python class name, such as {class_name_for(example)} (got {class_name!r})"
        )
    return module_name, class_name


def render_skeleton(module_name: str, class_name: str | None = None) -> str:
    """Return the skeleton's source for ``module_name``; raise ValueError naming a bad name."""
    module_name, class_name = checked_names(module_name, class_name, "my_store")
    return SKELETON.substitute(module_name=module_name, class_name=class_name, levels=repr(SKELETON_LEVELS))


def write_skeleton(module_name: str, directory: Path | str = ".", class_name: str | None = None) -> Path:
    """Write ``<directory>/<module_name>.py``; refuse to overwrite; return the path written."""
    return write_module(render_skeleton(module_name, class_name), module_name, directory)


def write_module(text: str, module_name: str, directory: Path | str = ".") -> Path:
    """Write ``text`` as ``<directory>/<module_name>.py``; refuse to overwrite; return the path written."""
    path = Path(directory) / f"{module_name}.py"
    if path.exists():
        raise ValueError(f"init NAME: {path} must not exist yet; nothing was written (got {module_name!r})")
    path.write_text(text, encoding="utf-8")
    return path
