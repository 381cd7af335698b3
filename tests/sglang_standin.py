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
there before. ``real_or_stand_in()`` yields the real release's module when the
run holds one (``HICACHE_SGLANG_RELEASE``), else installs a fresh stand-in.

The stand-in copies SGLang 0.5.23 field for field (``STAND_IN_RELEASE``);
``tests/sglang/test_standin.py`` compares the two on every release-tier run.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import enum
import sys
import types
from typing import Any, Iterator, Optional

__all__ = [
    "STAND_IN_RELEASE",
    "STORAGE_MODULE_NAME",
    "installed",
    "make_storage_module",
    "real_or_stand_in",
    "real_sglang",
]

STORAGE_MODULE_NAME = "sglang.srt.mem_cache.hicache_storage"
"""Where SGLang defines the storage interface."""

_PACKAGES = ("sglang", "sglang.srt", "sglang.srt.mem_cache")

STAND_IN_RELEASE = "0.5.23"
"""The release whose fields the stand-in copies; tests/sglang/test_standin.py compares it with that wheel."""

POOL_NAMES = (
    "kv",
    "mamba",
    "swa",
    "auxiliary_swa",
    "indexer",
    "deepseek_v4_c1",
    "deepseek_v4_c1_indexer",
    "deepseek_v4_c1_indexer_scale",
    "deepseek_v4_c2",
    "deepseek_v4_c2_indexer",
    "deepseek_v4_c2_indexer_scale",
    "deepseek_v4_c4",
    "deepseek_v4_c4_indexer",
    "deepseek_v4_c4_indexer_scale",
    "deepseek_v4_c128",
    "deepseek_v4_c4_rope",
    "deepseek_v4_c128_rope",
    "deepseek_v4_c4_state",
    "deepseek_v4_c4_indexer_state",
    "deepseek_v4_c128_state",
    "draft",
    "draft_indexer",
    "draft_swa",
)
"""SGLang 0.5.23's PoolName values, in order."""


def make_storage_module() -> types.ModuleType:
    """Return a fresh stand-in for ``sglang.srt.mem_cache.hicache_storage``."""
    module = types.ModuleType(STORAGE_MODULE_NAME)
    vars(module)["__sglang_version__"] = STAND_IN_RELEASE

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
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        dp_rank: int = 0
        extra_config: Optional[dict] = None
        dcp_size: int = 1
        dcp_rank: int = 0
        logical_page_size: Optional[int] = None

        @property
        def is_storage_writer(self) -> bool:
            return not self.is_mla_model or self.tp_rank == self.dcp_rank

    @dataclasses.dataclass
    class HiCacheStorageExtraInfo:
        prefix_keys: Optional[list[str]] = None
        extra_info: Optional[dict] = None

    # The members come from POOL_NAMES, which mypy does not read.
    PoolName = enum.Enum("PoolName", [(value.upper(), value) for value in POOL_NAMES], type=str)  # type: ignore[misc]

    def pool_name_str(self: Any) -> str:
        return str(self.value)

    PoolName.__str__ = pool_name_str  # type: ignore[method-assign]

    class PoolHitPolicy(str, enum.Enum):
        ALL_PAGES = "all_pages"
        TRAILING_PAGES = "trailing_pages"
        BLOCK_GROUPS = "block_groups"

    @dataclasses.dataclass
    class PoolTransfer:
        name: Any
        host_indices: Any = None
        device_indices: Any = None
        keys: Optional[list[str]] = None
        hit_policy: Any = PoolHitPolicy.ALL_PAGES
        nodes_to_load: Any = None
        indices_from_pool: Any = None
        block_pages: int = 0
        group_pages: int = 0

    @dataclasses.dataclass
    class PoolTransferResult:
        kv_hit_pages: int
        extra_pool_hit_pages: dict
        restorable_prefix_pages: Optional[list[int]] = None

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

    for item in (
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
        PoolName,
        PoolHitPolicy,
        PoolTransfer,
        PoolTransferResult,
        HiCacheStorage,
    ):
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


def real_sglang() -> types.ModuleType | None:
    """Return the real storage module when this run holds a pinned release, else None."""
    from hicache_contracts.sglang_release import active_release

    if active_release() is None:
        return None
    import importlib

    return importlib.import_module(STORAGE_MODULE_NAME)


@contextlib.contextmanager
def real_or_stand_in() -> Iterator[types.ModuleType]:
    """Yield the real release's storage module when the run holds one, else a fresh stand-in, installed."""
    real = real_sglang()
    if real is not None:
        yield real
        return
    with installed(make_storage_module()) as stand_in:
        yield stand_in
