"""The reference backends as SGLang dynamic backends.

SGLang loads them with ``--hicache-storage-backend dynamic`` and an extra
config naming this module and a class (docs/backends.md has the JSON)::

    {"backend_name": "hicache_file", "module_path": "hicache_reference.sglang_adapter",
     "class_name": "SGLangFileBackend", "interface_v1": 1, "path": "/tmp/hicache"}

When SGLang is importable the classes subclass its ``HiCacheStorage`` (the
loader requires it); otherwise they subclass ``object`` and behave the same,
so this module imports without SGLang. The engine's loading keys in the extra
config are ignored like any unknown key (BE-1).

Differences from the plain reference backends, each for SGLang's sake:

- ``batch_exists_v2`` returns SGLang's ``PoolTransferResult`` when SGLang is
  present, with the pool names as the caller's own name objects;
- ``get_stats`` returns None: SGLang's metrics collector reads attributes of
  its own metrics class, which the reference counters do not mimic.
"""

from __future__ import annotations

from typing import Any, Optional

from hicache_contracts.interop import to_sglang
from hicache_contracts.models import pool_value
from hicache_reference.backends.file import FileBackend
from hicache_reference.backends.memory import MemoryBackend

try:  # SGLang is optional: import it only if it is there
    from sglang.srt.mem_cache import hicache_storage as _sglang_storage
except ImportError:
    _sglang_storage = None

__all__ = ["SGLANG_AVAILABLE", "SGLangFileBackend", "SGLangMemoryBackend", "SGLangRedisBackend"]  # noqa: F822

SGLANG_AVAILABLE: bool = _sglang_storage is not None
"""Whether SGLang's storage module was importable when this module was loaded."""

_SGLangBase: type[Any] = getattr(_sglang_storage, "HiCacheStorage", object) if SGLANG_AVAILABLE else object
"""SGLang's ``HiCacheStorage`` when present, else ``object``."""


class _SGLangFacing:
    """What both adapted backends change for SGLang; mixed in before the reference backend."""

    def _init_sglang_base(self) -> None:
        if _SGLangBase is object:
            return
        try:
            _SGLangBase.__init__(self)
        except TypeError:  # a base __init__ that wants arguments has nothing we need
            pass

    def batch_exists_v2(self, keys: list, pool_transfers: Optional[list] = None, extra_info: Optional[Any] = None):
        result = super().batch_exists_v2(keys, pool_transfers, extra_info)  # type: ignore[misc]
        if _sglang_storage is None or not hasattr(_sglang_storage, "PoolTransferResult"):
            return result
        names = {pool_value(transfer.name): transfer.name for transfer in pool_transfers or []}
        converted = to_sglang(result, storage_module=_sglang_storage)  # the release's class, its fields only
        converted.extra_pool_hit_pages = {
            names.get(name, name): hits for name, hits in result.extra_pool_hit_pages.items()
        }
        return converted

    def get_stats(self) -> None:
        return None


class SGLangMemoryBackend(_SGLangFacing, MemoryBackend, _SGLangBase):
    """``MemoryBackend`` loadable by SGLang as a dynamic backend."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        self._init_sglang_base()
        MemoryBackend.__init__(self, storage_config, extra_config)


class SGLangFileBackend(_SGLangFacing, FileBackend, _SGLangBase):
    """``FileBackend`` loadable by SGLang as a dynamic backend (extra config ``path`` required)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        self._init_sglang_base()
        FileBackend.__init__(self, storage_config, extra_config)


_REDIS_CLASS: dict[str, type] = {}


def _sglang_redis_backend() -> type:
    """Build ``SGLangRedisBackend`` once, when first asked for: ``RedisBackend`` needs the ``redis`` extra."""
    if "class" not in _REDIS_CLASS:
        from hicache_reference.backends.redis_backend import RedisBackend

        class SGLangRedisBackend(_SGLangFacing, RedisBackend, _SGLangBase):  # type: ignore[misc, valid-type]
            """``RedisBackend`` loadable by SGLang as a dynamic backend (extra config ``redis_url`` or ``redis_cluster_nodes``)."""

            def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
                self._init_sglang_base()
                RedisBackend.__init__(self, storage_config, extra_config)

        SGLangRedisBackend.__module__, SGLangRedisBackend.__qualname__ = __name__, "SGLangRedisBackend"
        _REDIS_CLASS["class"] = SGLangRedisBackend
    return _REDIS_CLASS["class"]


def __getattr__(name: str) -> Any:
    """``SGLangRedisBackend`` is built when first asked for (SGLang's loader does ``getattr(module, class_name)``)."""
    if name == "SGLangRedisBackend":
        return _sglang_redis_backend()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
