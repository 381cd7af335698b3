"""Reference UnifiedCacheLinkers over CPU "device" pools: memory and file stores (see linkers.py)."""

from hicache_reference.linker.core import LayerCounter, LinkerCore, MissingPageError
from hicache_reference.linker.linkers import (
    SGLANG_LINKER_AVAILABLE,
    FileLinker,
    MemoryLinker,
    device_pools_from_params,
)
from hicache_reference.linker.stores import FileStore, MemoryStore, PageStore, shared_memory_store

__all__ = [
    "SGLANG_LINKER_AVAILABLE",
    "FileLinker",
    "FileStore",
    "LayerCounter",
    "LinkerCore",
    "MemoryLinker",
    "MemoryStore",
    "MissingPageError",
    "PageStore",
    "device_pools_from_params",
    "shared_memory_store",
]
