"""One backend instance, one host pool per name: a second pool is refused (BE-28), the same one again is a no-op
(BE-24).

Two controllers sharing one instance used to read each other's slots: the
second registration silently replaced the first pool. The reference
backends refuse it, naming the method and the pool; the case is also run
through two controllers, which then fail to build instead of reading wrong
pages. The planted backend keeps the old behaviour and must be caught.
"""

from __future__ import annotations

from typing import Any, Union

import pytest

from hicache_contracts import ContractViolation, HiCacheStorageConfig, PoolName
from hicache_reference.backends import FileBackend, MemoryBackend
from hicache_reference.backends.base import PageStoreBackend
from hicache_reference.settings import ControllerSettings
from tests.reliability.badinput_rows import make_pool

PAGE_SIZE = 4
KEY = "cd" * 32


@pytest.fixture(params=["memory", "file"])
def backend(request: Any, tmp_path: Any) -> Any:
    config = HiCacheStorageConfig.single_rank(model_name="registration")
    made: Union[MemoryBackend, FileBackend]
    if request.param == "memory":
        made = MemoryBackend(config, {"store": f"registration-{tmp_path.name}"})
    else:
        made = FileBackend(config, {"path": str(tmp_path)})
    yield made
    made.clear()


def refused(call: Any, message: str) -> None:
    with pytest.raises(ContractViolation) as raised:
        call()
    assert str(raised.value) == message


@pytest.mark.clause("BE-28")
def test_a_second_host_pool_for_one_name_is_refused(backend: Any) -> None:
    first, second = make_pool(4), make_pool(4)
    name = type(backend).__name__
    backend.register_mem_pool_host(first)
    backend.register_mem_host_pool_v2(first, PoolName.KV)  # the same pool again, as SGLang does: accepted
    backend.register_mem_pool_host(first)
    refused(
        lambda: backend.register_mem_pool_host(second),
        f"{name}.register_mem_pool_host: pool 'kv' already has another host pool; one instance serves one host "
        "pool per name (build one instance per controller) (got 'HostPagePool') [BE-28]",
    )
    refused(
        lambda: backend.register_mem_host_pool_v2(second, "kv"),
        f"{name}.register_mem_host_pool_v2: pool 'kv' already has another host pool; one instance serves one "
        "host pool per name (build one instance per controller) (got 'HostPagePool') [BE-28]",
    )
    backend.register_mem_host_pool_v2(second, PoolName.INDEXER)  # another name: its own pool
    assert backend.mem_pool_host is first


@pytest.mark.clause("BE-24")
@pytest.mark.parametrize("name", ["bogus", "KV", "", 3, None, b"kv"])
def test_a_pool_name_that_is_no_pool_name_is_refused(backend: Any, name: Any) -> None:
    refused(
        lambda: backend.register_mem_host_pool_v2(make_pool(4), name),
        f"{type(backend).__name__}.register_mem_host_pool_v2.host_pool_name: must be a PoolName or its value, "
        f"such as 'kv' or 'indexer' (got {name!r}) [BE-24]",
    )
    assert backend.mem_pool_host is None  # nothing registered


@pytest.mark.clause("BE-28")
def test_two_controllers_cannot_share_one_instance(backend: Any) -> None:
    from hicache_reference import CacheController

    first = CacheController(backend, make_pool(8), start=False, settings=ControllerSettings(prefetch_threshold=0))
    with pytest.raises(ContractViolation) as raised:
        CacheController(backend, make_pool(8), start=False, settings=ControllerSettings(prefetch_threshold=0))
    assert raised.value.clause_id == "BE-28"
    first.close()


class ReplacesThePool(PageStoreBackend):
    """The old behaviour: the last registration wins."""

    def _already_registered(self, pool: Any, name: str, method: str) -> bool:
        return False


class PlantedMemory(ReplacesThePool, MemoryBackend):
    pass


@pytest.mark.clause("BE-28")
def test_planted_pool_replacement_is_caught(tmp_path: Any) -> None:
    backend = PlantedMemory(HiCacheStorageConfig.single_rank(model_name="planted"), {"store": f"p-{tmp_path.name}"})
    with pytest.raises(pytest.fail.Exception):  # pytest.raises finds nothing raised
        test_a_second_host_pool_for_one_name_is_refused(backend)
