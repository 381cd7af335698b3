"""The reference storage backends: in memory, on files and in Redis, over one interface.

    PageStoreBackend   every generation of the interface (base.py), built from
     │                 the object primitives a backend supplies (objects.py), the host-page IO
     │                 helper it holds (page_io.py, host_bytes.py) and the strategy that moves
     │                 whole pages between them (strategies.py: PER_PAGE, BATCHED, SLAB_ROWS)
     ├── MemoryBackend pages as bytes in a process-wide or private store (memory.py, memory_store.py, slabs.py)
     ├── FileBackend   one file per page under a directory, written atomically (file.py)
     └── RedisBackend  one hash per page in Redis or Redis Cluster (redis_backend.py, redis_nodes.py,
                       redis_settings.py; needs the redis extra, imported when first used)

Every page is named by an ``ObjectName`` (namespace.py). The backends are
built the SGLang way, ``Backend(storage_config, extra_config)``; see
docs/backends.md for their extra config keys and the input rules.
"""

from typing import TYPE_CHECKING, Any

from hicache_reference.backends.base import (
    BackendStats,
    PageFormat,
    PageStoreBackend,
    PoolResults,
    tensor_bytes,
)
from hicache_reference.backends.file import FileBackend
from hicache_reference.backends.memory import (
    MemoryBackend,
    MemoryStore,
    forget_shared_memory_store,
    shared_memory_store,
)
from hicache_reference.backends.namespace import ObjectName, namespace_for, storage_name

if TYPE_CHECKING:
    from hicache_reference.backends.redis_backend import RedisBackend


def __getattr__(name: str) -> Any:
    """``RedisBackend`` is imported when first asked for: it needs the ``redis`` extra (``MissingExtra`` without it)."""
    if name == "RedisBackend":
        from hicache_reference.backends.redis_backend import RedisBackend

        return RedisBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BackendStats",
    "FileBackend",
    "MemoryBackend",
    "MemoryStore",
    "ObjectName",
    "PageFormat",
    "PageStoreBackend",
    "PoolResults",
    "RedisBackend",
    "forget_shared_memory_store",
    "namespace_for",
    "shared_memory_store",
    "storage_name",
    "tensor_bytes",
]
