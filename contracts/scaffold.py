"""``hicache-conform init NAME``: write a backend skeleton a vendor fills in with their storage calls.

The skeleton implements every method SGLang calls (legacy, v1; v2 as
documented ``NotImplementedError`` stubs, BE-18) on top of four storage
primitives the vendor writes: store bytes under a name, fetch them, say
whether a name is stored, and drop every name under a namespace. Names are
``<namespace>/<pool>/<key>`` with the namespace built from the model and the
rank coordinates (NS family), so the contract-facing logic — result shapes,
short objects, host-pool page helpers, errors turned into False — is
already right once those four calls are.
"""

from __future__ import annotations

import keyword
import string
from pathlib import Path

__all__ = ["class_name_for", "render_skeleton", "write_skeleton"]

SKELETON = string.Template('''"""$class_name: an SGLang HiCache L3 storage backend (skeleton written by `hicache-conform init`).

Fill in the four methods under "storage calls" with your store's client
calls; everything above them already follows the contract. Check it with

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


def _pool_name(name: Any) -> str:
    """A pool name (an enum member or a str) as its plain value: "kv", "indexer", ..."""
    return str(getattr(name, "value", name))


class $class_name(_Base):
    """Pages stored as bytes under ``<namespace>/<pool>/<key>``."""

    hicache_levels = ("core", "v1", "namespacing")
    """The levels this backend claims (add "v2" once batch_*_v2 are implemented)."""
    hicache_host_pool_faults = True
    """Pages move through the host pool's page helpers, so the suite may fail those to check BE-5."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        # SGLang builds a dynamic backend as cls(storage_config, {}): read options from extra_config (BE-1)
        self.extra_config = dict(getattr(storage_config, "extra_config", None) or {})
        self.namespace = self.namespace_of(storage_config)
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
        """The storage name of one page: the same scheme for every method (NS-6)."""
        return f"{self.namespace}/{pool}/{key}"

    # ---------------------------------------------------------------- host pools (BE-24)
    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.mem_pool_host = mem_pool_host  # where SGLang's base class keeps it
        self.pools["kv"] = mem_pool_host

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self.pools[_pool_name(host_pool_name)] = host_pool

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

    # ---------------------------------------------------------------- pool-aware v2 (level v2, not claimed)
    def batch_exists_v2(self, keys: list, pool_transfers: Any = None, extra_info: Any = None) -> Any:
        raise NotImplementedError("batch_exists_v2: v2 not implemented (BE-18)")

    def batch_get_v2(self, transfers: list, extra_info: Any = None) -> dict:
        raise NotImplementedError("batch_get_v2: v2 not implemented (BE-18)")

    def batch_set_v2(self, transfers: list, extra_info: Any = None) -> dict:
        raise NotImplementedError("batch_set_v2: v2 not implemented (BE-18)")

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


def render_skeleton(module_name: str, class_name: str | None = None) -> str:
    """Return the skeleton's source for ``module_name``; raise ValueError naming a bad name."""
    if not module_name.isidentifier() or keyword.iskeyword(module_name):
        raise ValueError(f"init NAME: must be a Python module name, such as my_store (got {module_name!r})")
    class_name = class_name or class_name_for(module_name)
    if not class_name.isidentifier() or keyword.iskeyword(class_name):
        raise ValueError(f"init --class: must be a Python class name, such as MyStore (got {class_name!r})")
    return SKELETON.substitute(module_name=module_name, class_name=class_name)


def write_skeleton(module_name: str, directory: Path | str = ".", class_name: str | None = None) -> Path:
    """Write ``<directory>/<module_name>.py``; refuse to overwrite; return the path written."""
    text = render_skeleton(module_name, class_name)
    path = Path(directory) / f"{module_name}.py"
    if path.exists():
        raise ValueError(f"init NAME: {path} must not exist yet; nothing was written (got {module_name!r})")
    path.write_text(text, encoding="utf-8")
    return path
