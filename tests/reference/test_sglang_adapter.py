"""The SGLang adapter: loadable the dynamic-backend way, with and without SGLang importable.

When the run holds a pinned SGLang release (``HICACHE_SGLANG_RELEASE``) the
adapter is loaded against the real module; otherwise a stand-in
``sglang.srt.mem_cache.hicache_storage`` (SGLang 0.5.23's classes, field for
field) is put in ``sys.modules`` and the adapter is reloaded against it. The
tests of the path without SGLang skip when the run holds a release; the loader below
does what SGLang's dynamic loading does: read the JSON extra config, import
``module_path``, take ``class_name``, require a ``HiCacheStorage`` subclass and
build it as ``cls(storage_config, extra_config)``.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from typing import Any, Iterator

import pytest

import hicache_reference.sglang_adapter as adapter
from hicache_contracts import PoolTransfer, PoolTransferResult
from tests.reference.backend_checks import (
    clause_check,
    config,
    make_pool,
    page_bytes,
    page_keys,
    slots_of,
    write_pages,
)
from tests.sglang_standin import real_or_stand_in, real_sglang

without_sglang = pytest.mark.skipif(
    real_sglang() is not None, reason="this run holds an SGLang release; the path without SGLang runs without it"
)

DOCUMENTED_FILE_CONFIG = (
    '{"backend_name":"hicache_file","module_path":"hicache_reference.sglang_adapter",'
    '"class_name":"SGLangFileBackend","interface_v1":1,"path":"%s"}'
)
"""The extra config docs/backends.md gives for the file backend, with the path left open."""


# ================================================================== SGLang's storage module, stood in for
@pytest.fixture
def with_sglang() -> Iterator[types.ModuleType]:
    """Make the stand-in importable, reload the adapter against it, and undo both afterwards."""
    try:
        with real_or_stand_in() as module:
            importlib.reload(adapter)
            yield module
    finally:
        importlib.reload(adapter)


def load_dynamic_backend(extra_config_json: str, base: type) -> Any:
    """Load a backend the way SGLang's dynamic backend option does.

    The parsed JSON becomes ``storage_config.extra_config``; the class is built
    as ``cls(storage_config, {})`` (the factory's extra keyword arguments, none).
    """
    extra_config = json.loads(extra_config_json)
    storage_config = config(extra_config=extra_config)
    module = importlib.import_module(extra_config["module_path"])
    backend_class = getattr(module, extra_config["class_name"])
    if not issubclass(backend_class, base):
        raise TypeError(f"{backend_class.__name__} must subclass {base.__name__}")
    return backend_class(storage_config, {})


# ================================================================== checks
@clause_check
def check_dynamic_loading(extra_config_json: str, base: type[Any]) -> None:
    """BE-1, BE-24: the documented JSON loads a backend that ignores the loading keys and moves pages."""
    writer = load_dynamic_backend(extra_config_json, base)
    reader = load_dynamic_backend(extra_config_json, base)
    assert isinstance(writer, base)
    for backend in (writer, reader):
        backend.register_mem_pool_host(make_pool())
    keys = page_keys(2, start=800)
    assert write_pages(writer, keys, [0, 1], seed=40) == [True, True]
    assert reader.batch_exists(keys, None) == 2
    assert reader.batch_get_v1(keys, slots_of(reader.mem_pool_host, [5, 6]), None) == [True, True]
    assert page_bytes(reader.mem_pool_host, 6) == page_bytes(writer.mem_pool_host, 1)
    assert reader.get_stats() is None


@clause_check
def check_v2_result_speaks_sglang(backend: Any, sglang: types.ModuleType) -> None:
    """BE-21: batch_exists_v2 answers with SGLang's result class, keyed by SGLang's pool names."""
    pool = make_pool()
    backend.register_mem_pool_host(pool)
    backend.register_mem_host_pool_v2(pool, sglang.PoolName.KV)
    sidecar = make_pool(layer_num=1)
    backend.register_mem_host_pool_v2(sidecar, sglang.PoolName.SWA)
    keys = page_keys(2, start=820)
    fill = [
        PoolTransfer(name="kv", keys=keys, host_indices=slots_of(pool, [0, 1])),  # type: ignore[arg-type]
        PoolTransfer(name="swa", keys=keys, host_indices=slots_of(sidecar, [0, 1])),  # type: ignore[arg-type]
    ]
    assert backend.batch_set_v2(fill) == {"kv": [True, True], "swa": [True, True]}
    sglang_transfer = types.SimpleNamespace(
        name=sglang.PoolName.SWA, keys=keys[-1:], hit_policy="trailing_pages", indices_from_pool=None, host_indices=None
    )
    result = backend.batch_exists_v2(keys, [sglang_transfer], None)
    assert isinstance(result, sglang.PoolTransferResult), f"got {type(result).__name__}"
    assert result.kv_hit_pages == 2
    assert result.extra_pool_hit_pages == {sglang.PoolName.KV: 2, sglang.PoolName.SWA: 2}  # KV's own entry too
    assert list(result.extra_pool_hit_pages)[1] is sglang.PoolName.SWA


# ================================================================== tests
@without_sglang
@pytest.mark.clause("BE-1", "BE-24")
@pytest.mark.parametrize("class_name", ["SGLangMemoryBackend", "SGLangFileBackend"])
def test_loads_without_sglang(tmp_path: Any, class_name: str) -> None:
    assert not adapter.SGLANG_AVAILABLE
    extra = json.loads(DOCUMENTED_FILE_CONFIG % tmp_path)
    extra.update(class_name=class_name, store=f"adapter-{tmp_path.name}")
    check_dynamic_loading(json.dumps(extra), object)


@pytest.mark.clause("BE-1", "BE-24")
def test_loads_as_sglang_dynamic_backend(with_sglang: types.ModuleType, tmp_path: Any) -> None:
    assert adapter.SGLANG_AVAILABLE
    check_dynamic_loading(DOCUMENTED_FILE_CONFIG % tmp_path, with_sglang.HiCacheStorage)
    memory = json.loads(DOCUMENTED_FILE_CONFIG % tmp_path)
    memory.update(class_name="SGLangMemoryBackend", store=f"adapter-sglang-{tmp_path.name}")
    check_dynamic_loading(json.dumps(memory), with_sglang.HiCacheStorage)


@pytest.mark.clause("BE-21")
def test_v2_result_speaks_sglang(with_sglang: types.ModuleType, tmp_path: Any) -> None:
    check_v2_result_speaks_sglang(adapter.SGLangFileBackend(config(), {"path": str(tmp_path)}), with_sglang)


@without_sglang
def test_without_sglang_v2_result_is_ours(tmp_path: Any) -> None:
    backend = adapter.SGLangMemoryBackend(config(), None)
    assert isinstance(backend.batch_exists_v2([], None, None), PoolTransferResult)


# ================================================================== planted bugs
class NotAHiCacheStorage:
    """A backend class SGLang refuses: it does not subclass HiCacheStorage."""

    def __init__(self, storage_config: Any, extra_config: Any) -> None:
        pass


@pytest.mark.clause("BE-24")
def test_loading_check_catches_planted_bug(
    with_sglang: types.ModuleType, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter, "PlantedBackend", NotAHiCacheStorage, raising=False)
    extra = json.loads(DOCUMENTED_FILE_CONFIG % tmp_path)
    extra["class_name"] = "PlantedBackend"
    with pytest.raises(AssertionError):
        check_dynamic_loading(json.dumps(extra), with_sglang.HiCacheStorage)


@pytest.mark.clause("BE-21")
def test_v2_result_check_catches_planted_bug(with_sglang: types.ModuleType, tmp_path: Any) -> None:
    from hicache_reference.backends import FileBackend

    class KeepsOurResult(adapter.SGLangFileBackend):
        batch_exists_v2 = FileBackend.batch_exists_v2

    with pytest.raises(AssertionError):
        check_v2_result_speaks_sglang(KeepsOurResult(config(), {"path": str(tmp_path)}), with_sglang)


@without_sglang
def test_module_imports_without_sglang() -> None:
    assert adapter.SGLANG_AVAILABLE is False
    assert adapter._SGLangBase is object
    assert not any(name.startswith("sglang") for name in sys.modules)


@pytest.mark.clause("BE-1", "BE-5")
def test_redis_adapter_loads_and_misses_without_a_server(with_sglang: types.ModuleType) -> None:
    # Port 1 on loopback: nothing listens there, so every call is a miss, never an exception.
    backend = adapter.SGLangRedisBackend(
        config(), {"redis_url": "redis://127.0.0.1:1/0", "socket_connect_timeout": 0.2}
    )
    assert isinstance(backend, with_sglang.HiCacheStorage)
    assert backend.batch_exists(["a" * 64]) == 0
    assert backend.exists("a" * 64) is False
