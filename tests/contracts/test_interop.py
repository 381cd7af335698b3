"""Conversion to and from SGLang's classes, checked against stand-ins of the same shape.

The stand-ins are dataclasses with SGLang's field names and defaults, from the
module ``tests/sglang_standin.py`` builds to play the part of
``sglang.srt.mem_cache.hicache_storage``.
The last test runs against SGLang itself when the run holds a pinned release, else the stand-in.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import pytest
import torch

from hicache_contracts import (
    ContractViolation,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    PrefixKeys,
    from_sglang,
    is_sglang_available,
    to_sglang,
)
from tests.sglang_standin import make_storage_module, real_or_stand_in

STAND_IN_MODULE = make_storage_module()
"""Plays the part of sglang.srt.mem_cache.hicache_storage."""
StandInPoolName = STAND_IN_MODULE.PoolName
StandInPoolHitPolicy = STAND_IN_MODULE.PoolHitPolicy
StandInExtraInfo = STAND_IN_MODULE.HiCacheStorageExtraInfo
StandInConfig = STAND_IN_MODULE.HiCacheStorageConfig
StandInPoolTransfer = STAND_IN_MODULE.PoolTransfer


@pytest.mark.clause("PFX-1", "PFX-4", "BE-8")
@pytest.mark.parametrize("prefix", [None, [], ["k0"], ["k0", "k1"]])
def test_extra_info_keeps_the_three_states_both_ways(prefix: Optional[list]) -> None:
    ours = from_sglang(StandInExtraInfo(prefix_keys=prefix, extra_info={"vendor": 1}))
    assert type(ours) is HiCacheStorageExtraInfo
    assert (ours.prefix_keys is None) == (prefix is None)
    assert prefix is None or (type(ours.prefix_keys) is PrefixKeys and ours.prefix_keys == prefix)
    assert ours.extra_info == {"vendor": 1}
    theirs = to_sglang(ours, storage_module=STAND_IN_MODULE)
    assert type(theirs) is StandInExtraInfo and theirs == StandInExtraInfo(prefix, {"vendor": 1})
    if prefix is not None:
        assert type(theirs.prefix_keys) is list and theirs.prefix_keys is not prefix  # a copy SGLang may change


@pytest.mark.clause("BE-1", "NS-1")
def test_config_converts_both_ways_with_unknown_extra_keys() -> None:
    stand_in = StandInConfig(
        1, 2, 0, 1, 0, 1, True, False, True, "m", tp_lcm_size=4, extra_config={"backend_name": "x", "unknown": [1]}
    )
    ours = from_sglang(stand_in)
    assert type(ours) is HiCacheStorageConfig and ours.tp_rank == 1 and ours.tp_lcm_size == 4
    assert ours.extra_config == {"backend_name": "x", "unknown": [1]}
    assert to_sglang(ours, storage_module=STAND_IN_MODULE) == stand_in


@pytest.mark.clause("BE-15", "HYB-1")
def test_pool_transfer_converts_both_ways_holding_the_same_tensors() -> None:
    host = torch.arange(8)
    stand_in = StandInPoolTransfer(
        StandInPoolName.INDEXER,
        host_indices=host,
        keys=["a", "b"],
        hit_policy=StandInPoolHitPolicy.TRAILING_PAGES,
        indices_from_pool=StandInPoolName.KV,
    )
    ours = from_sglang(stand_in)
    assert ours.name is PoolName.INDEXER and ours.hit_policy is PoolHitPolicy.TRAILING_PAGES
    assert ours.host_indices is host and ours.is_kv_derived and ours.keys == ["a", "b"]
    theirs = to_sglang(ours, storage_module=STAND_IN_MODULE)
    assert theirs.host_indices is host and theirs.name is StandInPoolName.INDEXER
    assert theirs.indices_from_pool is StandInPoolName.KV and theirs.keys == ["a", "b"]
    assert theirs.hit_policy is StandInPoolHitPolicy.TRAILING_PAGES


def test_objects_are_recognised_by_attributes_and_none_passes() -> None:
    assert from_sglang(None) is None and to_sglang(None) is None
    duck = SimpleNamespace(prefix_keys=[], extra_info=None)
    assert from_sglang(duck).prefix_keys == []


@pytest.mark.clause("KEY-2", "BE-8")
def test_bad_objects_are_rejected_naming_the_field() -> None:
    with pytest.raises(ContractViolation) as caught:
        from_sglang(StandInExtraInfo(prefix_keys=["a", 1]))
    assert (
        str(caught.value) == "HiCacheStorageExtraInfo.prefix_keys[1]: page key must be a non-empty str (got 1) [KEY-2]"
    )
    with pytest.raises(ContractViolation) as caught:
        from_sglang(3)
    assert str(caught.value) == (
        "from_sglang.obj: must be an extra info, a storage config, a pool transfer or a pool transfer result "
        "(got 3) [BE-8]"
    )
    with pytest.raises(ContractViolation) as caught:
        to_sglang("x", storage_module=STAND_IN_MODULE)
    assert str(caught.value) == (
        "to_sglang.model: must be an extra info, a storage config, a pool transfer or a pool transfer result "
        "(got 'x') [BE-8]"
    )


# ---------------------------------------------------------------- no eager import of SGLang
FAKE_SGLANG = "import sys\nsys.stderr.write('sglang was imported\\n')\n"


def loads_sglang_on_import(module: str, search_path: Path) -> bool:
    """Return whether importing ``module`` (with a fake ``sglang`` on the path) imports ``sglang``."""
    fake = search_path / "sglang"
    fake.mkdir(exist_ok=True)
    (fake / "__init__.py").write_text(FAKE_SGLANG)
    script = f"import sys; sys.path.insert(0, {str(search_path)!r}); import {module}; print('sglang' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return result.stdout.strip().endswith("True")


def test_importing_the_package_does_not_import_sglang(tmp_path: Path) -> None:
    assert not loads_sglang_on_import("hicache_contracts", tmp_path)


def test_planted_eager_import_is_caught(tmp_path: Path) -> None:
    """Planted bug: a module that imports SGLang at load time is seen by the same check."""
    (tmp_path / "eager_interop.py").write_text(
        textwrap.dedent("""
        import sglang  # loaded with the module: every user now needs SGLang
    """)
    )
    assert loads_sglang_on_import("eager_interop", tmp_path)


def test_to_sglang_without_sglang_raises_import_error() -> None:
    if is_sglang_available():
        pytest.skip("sglang is installed")
    with pytest.raises(ImportError):
        to_sglang(HiCacheStorageExtraInfo())


# ---------------------------------------------------------------- SGLang itself, or its stand-in
@pytest.mark.clause("PFX-1", "PFX-4")
def test_round_trip_through_sglang() -> None:
    """Through the imported module: the pinned release a run holds (HICACHE_SGLANG_RELEASE), else the stand-in.

    Every pinned release's classes are also round-tripped by the release tier (tests/sglang/test_interop.py).
    """
    with real_or_stand_in():
        from sglang.srt.mem_cache import hicache_storage

        for prefix in (None, [], ["k0"]):
            theirs = to_sglang(HiCacheStorageExtraInfo(prefix_keys=prefix))  # type: ignore[arg-type]
            assert isinstance(theirs, hicache_storage.HiCacheStorageExtraInfo) and theirs.prefix_keys == prefix
            assert (from_sglang(theirs).prefix_keys is None) == (prefix is None)
        config = HiCacheStorageConfig.single_rank(extra_config={"k": 1})
        assert from_sglang(to_sglang(config)) == config
        host = torch.arange(4)
        transfer = from_sglang(to_sglang(PoolTransfer(name="kv", host_indices=host, keys=["a"])))  # type: ignore[arg-type]
    assert transfer.host_indices is host and transfer.keys == ["a"]
