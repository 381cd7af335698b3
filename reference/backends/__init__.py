"""The reference storage backends: in memory and on files, with the page IO they share.

    PageStoreBackend   every generation of the interface over four object primitives (base.py)
     ├── MemoryBackend pages as bytes in a process-wide or private store (memory.py)
     ├── FileBackend   one file per page under a directory, written atomically (file.py)
     └── RedisBackend  one hash per page in Redis or Redis Cluster (redis_backend.py)

Both are built the SGLang way, ``Backend(storage_config, extra_config)``; see
docs/backends.md for their extra config keys and the input rules.
"""

from hicache_reference.backends.base import (
    BackendStats,
    PageFormat,
    PageStoreBackend,
    PoolResults,
    pool_key,
    tensor_bytes,
)
from hicache_reference.backends.file import FileBackend
from hicache_reference.backends.memory import (
    MemoryBackend,
    MemoryStore,
    forget_shared_memory_store,
    shared_memory_store,
)
from hicache_reference.backends.namespace import namespace_for, storage_name
from hicache_reference.backends.redis_backend import RedisBackend

__all__ = [
    "BackendStats",
    "FileBackend",
    "MemoryBackend",
    "MemoryStore",
    "PageFormat",
    "PageStoreBackend",
    "PoolResults",
    "RedisBackend",
    "forget_shared_memory_store",
    "namespace_for",
    "pool_key",
    "shared_memory_store",
    "storage_name",
    "tensor_bytes",
]
