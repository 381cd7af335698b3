"""SGLang's in-tree storage backends, built for the vendor suite as SGLang's factory builds them.

``StorageBackendFactory`` builds its built-in backends with their own
constructor shapes — ``HiCacheFile(storage_config)`` and
``SimHiCacheStorage(storage_config)``, ``HiCacheShm(storage_config,
mem_pool_host)`` — not with the dynamic loader's ``cls(storage_config,
kwargs)``. ``in_tree_factory(name)`` wraps each in a ``BackendFactory`` that
calls it that way, so the suite judges the backend SGLang would run. The
backend classes come from whatever release is importable (see
``hicache_contracts.sglang_release``).

The file backend's directory comes from ``extra_config["file_storage_path"]``
(``SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR``, when set, overrides it inside
SGLang).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

from hicache_contracts.conformance.session.loading import BackendFactory

__all__ = ["IN_TREE_BACKENDS", "InTreeBackend", "in_tree_factory"]


@dataclass(frozen=True)
class InTreeBackend:
    """Where one built-in backend lives and how SGLang's factory calls its constructor."""

    module: str
    class_name: str
    takes_host_pool: bool
    """Built as ``cls(storage_config, mem_pool_host)``; else ``cls(storage_config)``."""

    def load(self) -> type:
        backend_class: type = getattr(importlib.import_module(self.module), self.class_name)
        return backend_class


IN_TREE_BACKENDS: dict[str, InTreeBackend] = {
    "file": InTreeBackend("sglang.srt.mem_cache.hicache_storage", "HiCacheFile", False),
    "sim": InTreeBackend("sglang.srt.mem_cache.storage.sim_storage", "SimHiCacheStorage", False),
    "shm": InTreeBackend("sglang.srt.mem_cache.storage.shm.hicache_shm", "HiCacheShm", True),
}
"""The built-in backends that need no external service, by SGLang's ``--hicache-storage-backend`` name."""

GENERIC_PATH = (
    "not asked: SGLang drives its built-in file, sim and shm backends through batch_get/batch_set "
    "(cache_controller.py takes the zero-copy v1 path only for the vendor backends it lists, "
    "hf3fs, mooncake, nixl and others, and for a dynamic backend with interface_v1)"
)
"""Why v1 is not claimed for an in-tree backend, whatever it implements."""


def in_tree_factory(
    name: str, *, directory: Optional[str] = None, extra_config: Optional[dict[str, Any]] = None
) -> BackendFactory:
    """Return a factory that builds SGLang's built-in backend ``name`` the way SGLang's factory does.

    ``directory`` is the file backend's root (``file_storage_path``).
    """
    try:
        entry = IN_TREE_BACKENDS[name]
    except KeyError:
        raise ValueError(f"in-tree backend: must be one of {', '.join(IN_TREE_BACKENDS)} (got {name!r})") from None
    cls = entry.load()
    config = dict(extra_config or {})
    if name == "file":
        if directory is None and "file_storage_path" not in config:
            raise ValueError("in-tree backend file: needs a directory (file_storage_path)")
        config.setdefault("file_storage_path", directory)

    def build(storage_config: Any, kwargs: Any) -> Any:
        if entry.takes_host_pool:
            return cls(storage_config, None)  # the host pool arrives through register_mem_pool_host
        return cls(storage_config)

    build.__qualname__ = entry.class_name
    build.__module__ = entry.module
    build.backend_class = cls  # type: ignore[attr-defined]
    return BackendFactory(build, config or None, f"{entry.module}:{entry.class_name}", not_asked={"v1": GENERIC_PATH})
