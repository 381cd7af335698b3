"""A stand-in for SGLang's storage module, for tests that run without SGLang installed.

``make_storage_module()`` builds a module named
``sglang.srt.mem_cache.hicache_storage`` with the names of the storage
interface and the fields SGLang gives them: the dataclasses
``HiCacheStorageConfig``, ``HiCacheStorageExtraInfo``, ``PoolTransfer`` and
``PoolTransferResult``, the enums ``PoolName`` and ``PoolHitPolicy`` (str
enums, so a member's hash differs from its value's), and ``HiCacheStorage``, an
ABC with the legacy methods abstract as in SGLang. Each call makes new
classes, so tests never share state through them.

``installed(module)`` makes it importable under its real name (its parent
packages too) for the length of a ``with`` block, and puts back whatever was
there before.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import enum
import sys
import types
from typing import Any, Iterator, List, Optional

__all__ = ["STORAGE_MODULE_NAME", "installed", "make_storage_module"]

STORAGE_MODULE_NAME = "sglang.srt.mem_cache.hicache_storage"
"""Where SGLang defines the storage interface."""

_PACKAGES = ("sglang", "sglang.srt", "sglang.srt.mem_cache")


def make_storage_module() -> types.ModuleType:
    """Return a fresh stand-in for ``sglang.srt.mem_cache.hicache_storage``."""
    module = types.ModuleType(STORAGE_MODULE_NAME)

    @dataclasses.dataclass
    class HiCacheStorageConfig:
        tp_rank: int
        tp_size: int
        pp_rank: int
        pp_size: int
        attn_cp_rank: int
        attn_cp_size: int
        is_mla_model: bool
        enable_storage_metrics: bool
        is_page_first_layout: bool
        model_name: Optional[str]
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclasses.dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class PoolName(str, enum.Enum):
        KV = "kv"
        MAMBA = "mamba"
        SWA = "swa"
        INDEXER = "indexer"
        DRAFT = "draft"

    class PoolHitPolicy(str, enum.Enum):
        ALL_PAGES = "all_pages"
        TRAILING_PAGES = "trailing_pages"

    @dataclasses.dataclass
    class PoolTransfer:
        name: Any
        host_indices: Any = None
        device_indices: Any = None
        keys: Optional[List[str]] = None
        hit_policy: Any = PoolHitPolicy.ALL_PAGES
        nodes_to_load: Any = None
        indices_from_pool: Any = None

    @dataclasses.dataclass
    class PoolTransferResult:
        kv_hit_pages: int
        extra_pool_hit_pages: dict

    class HiCacheStorage(abc.ABC):
        def register_mem_pool_host(self, mem_pool_host: Any) -> None:
            self.mem_pool_host = mem_pool_host

        @abc.abstractmethod
        def get(self, key, target_location=None, target_sizes=None): ...

        @abc.abstractmethod
        def set(self, key, value=None, target_location=None, target_sizes=None): ...

        @abc.abstractmethod
        def exists(self, key): ...

        @abc.abstractmethod
        def batch_get(self, keys, target_locations=None, target_sizes=None): ...

        @abc.abstractmethod
        def batch_set(self, keys, values=None, target_locations=None, target_sizes=None): ...

        @abc.abstractmethod
        def batch_exists(self, keys, extra_info=None): ...

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            raise NotImplementedError

        def get_stats(self):
            return None

    for item in (HiCacheStorageConfig, HiCacheStorageExtraInfo, PoolName, PoolHitPolicy, PoolTransfer,
                 PoolTransferResult, HiCacheStorage):
        setattr(module, item.__name__, item)
    return module


@contextlib.contextmanager
def installed(module: types.ModuleType) -> Iterator[types.ModuleType]:
    """Make ``module`` importable as SGLang's storage module inside the block; restore ``sys.modules`` after."""
    names = (*_PACKAGES, STORAGE_MODULE_NAME)
    saved = {name: sys.modules.get(name) for name in names}
    packages = [types.ModuleType(name) for name in _PACKAGES]
    for package in packages:
        sys.modules[package.__name__] = package
    for parent, child in zip(packages, [*packages[1:], module]):
        setattr(parent, child.__name__.rsplit(".", 1)[1], child)
    sys.modules[STORAGE_MODULE_NAME] = module
    try:
        yield module
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
