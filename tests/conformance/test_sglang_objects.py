"""With SGLang importable, the backend receives SGLang's own objects.

SGLang is not installed here, so a stand-in ``sglang.srt.mem_cache.hicache_storage``
(plain dataclasses and str enums with SGLang's names and fields) is put in
``sys.modules`` for the test.

Scenario: the whole smoke suite against the correct in-test backend, which
records the types of what it receives.
Expected: configs, extra infos, transfers and pool names are the stand-in's
classes (mutable lists inside, as SGLang has them), and every clause passes.
Why it matters: a backend written for SGLang must be checked with the
objects SGLang hands it.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
from typing import Any, Iterator, List, Optional

import pytest

from hicache_contracts.conformance import backend_clauses
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run, statuses

SEEN: set = set()


def make_stand_in() -> types.ModuleType:
    module = types.ModuleType("sglang.srt.mem_cache.hicache_storage")

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

    for item in (HiCacheStorageConfig, HiCacheStorageExtraInfo, PoolName, PoolHitPolicy, PoolTransfer):
        setattr(module, item.__name__, item)
    return module


@pytest.fixture
def sglang_stand_in() -> Iterator[types.ModuleType]:
    names = ["sglang", "sglang.srt", "sglang.srt.mem_cache", "sglang.srt.mem_cache.hicache_storage"]
    saved = {name: sys.modules.get(name) for name in names}
    stand_in = make_stand_in()
    for name in names[:-1]:
        sys.modules[name] = types.ModuleType(name)
    sys.modules[names[-1]] = stand_in
    try:
        yield stand_in
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class RecordingBackend(CorrectBackend):
    """Records the module of every config, extra info and transfer it receives."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None) -> None:
        SEEN.add(type(storage_config))
        super().__init__(storage_config, kwargs)

    def batch_exists(self, keys, extra_info=None):
        if extra_info is not None:
            SEEN.add(type(extra_info))
            SEEN.add(type(extra_info.prefix_keys))
        return super().batch_exists(keys, extra_info)

    def batch_set_v2(self, transfers, extra_info=None):
        SEEN.update(type(item) for item in transfers)
        SEEN.update(type(item.name) for item in transfers)
        return super().batch_set_v2(transfers, extra_info)


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_backend_receives_sglang_objects_and_passes(sglang_stand_in: types.ModuleType) -> None:
    SEEN.clear()
    report = run(RecordingBackend)
    assert set(statuses(report).values()) == {"pass"}, report.render_text(color=False)
    assert report.sections[0].options["sglang_objects"] is True
    for name in ("HiCacheStorageConfig", "HiCacheStorageExtraInfo", "PoolTransfer", "PoolName"):
        assert getattr(sglang_stand_in, name) in SEEN
    assert list in SEEN  # prefix_keys arrive as plain lists, as SGLang hands them over
