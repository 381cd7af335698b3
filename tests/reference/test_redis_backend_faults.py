"""The Redis reference backend under faults: a server killed mid-operation, a cluster master lost, a slot moved.

Each fault test starts private ``redis-server`` processes on free ports, so
killing one never disturbs the shared servers; each check is caught by a
planted ``RedisBackend`` that recovers wrongly or not at all.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import pytest
import torch
from redis.crc import key_slot

from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends.redis_backend import RedisBackend
from tests.redis_support import RedisClusterServers, RedisServer, require_redis_server_binary, unique_model_name
from tests.reference.backend_checks import (
    clause_check,
    config,
    fill_pages,
    make_pool,
    page_bytes,
    page_keys,
    slots_of,
    write_pages,
)
from tests.reference.test_redis_backend import FAST_RECOVERY, LetsRedisErrorsOut

pytestmark = pytest.mark.redis


# ================================================================== faults: one server killed and restarted
@pytest.fixture(scope="module")
def private_server() -> Any:
    require_redis_server_binary()
    with RedisServer() as server:
        yield server


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.02)


@clause_check
def check_server_loss_and_return(
    server: RedisServer, backend_cls: type = RedisBackend, recovery_wait: float = 10.0
) -> None:
    """BE-5: with the server gone every call fails softly; once it is back, the same instance serves again."""
    server.start()
    backend = backend_cls(config(model_name=unique_model_name()), {"redis_url": server.url, **FAST_RECOVERY})
    pool = make_pool(page_count=16)
    backend.register_mem_pool_host(pool)
    keys = page_keys(4, start=760)
    assert write_pages(backend, keys, [0, 1, 2, 3]) == [True] * 4
    server.kill()
    slots = slots_of(pool, [4, 5, 6, 7])
    assert backend.batch_get_v1(keys, slots) == [False] * 4
    assert backend.batch_set_v1(keys, slots) == [False] * 4
    assert backend.batch_exists(keys) == 0 and backend.exists(keys[0]) is False and backend.get(keys[0]) is None
    assert backend.batch_exists_v2(keys).kv_hit_pages == 0
    backend.clear()
    server.start()  # same port, empty: the pages are gone with the old process
    _wait_for(
        lambda: write_pages(backend, keys, [0, 1, 2, 3], seed=2) == [True] * 4,
        recovery_wait,
        "the same backend instance did not serve again after the server came back",
    )
    assert backend.batch_get_v1(keys, slots) == [True] * 4
    assert [page_bytes(pool, page) for page in (4, 5, 6, 7)] == [page_bytes(pool, page) for page in (0, 1, 2, 3)]
    backend.close()


class NeverRecovers(RedisBackend):
    """Gives up on a node for good after its first failure (a connection pool that stays broken)."""

    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        original = self.nodes._mark_failed

        def mark_failed(node_name: str) -> None:
            original(node_name)
            self.nodes._skip_until[node_name] = float("inf")

        self.nodes._mark_failed = mark_failed  # type: ignore[method-assign]


@pytest.mark.clause("BE-5")
def test_server_loss_and_return(private_server: RedisServer) -> None:
    check_server_loss_and_return(private_server)


@pytest.mark.clause("BE-5")
@pytest.mark.parametrize("buggy_class", [NeverRecovers, LetsRedisErrorsOut])
def test_server_loss_check_catches_planted_bug(private_server: RedisServer, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check_server_loss_and_return(private_server, buggy_class, recovery_wait=1.0)


@clause_check
def check_timeout_is_a_miss(
    server: RedisServer, backend_cls: type = RedisBackend, pause_ms: int = 800, recovery_wait: float = 10.0
) -> None:
    """BE-5: a server that stops answering costs a miss after socket_timeout, then serves again by itself."""
    server.start()
    backend = backend_cls(
        config(model_name=unique_model_name()), {"redis_url": server.url, **FAST_RECOVERY, "socket_timeout": 0.2}
    )
    pool = make_pool()
    backend.register_mem_pool_host(pool)
    keys = page_keys(2, start=780)
    assert write_pages(backend, keys, [0, 1]) == [True, True]
    pauser = server.client()
    pauser.execute_command("CLIENT", "PAUSE", pause_ms, "ALL")  # every client's commands wait, ours too
    try:
        started = time.monotonic()
        assert backend.batch_get_v1(keys, slots_of(pool, [2, 3])) == [False, False]
        assert backend.batch_exists(keys) == 0
        assert time.monotonic() - started < pause_ms / 1000, "a timed-out node must be skipped, not waited on again"
        _wait_for(
            lambda: backend.batch_get_v1(keys, slots_of(pool, [2, 3])) == [True, True],
            recovery_wait,
            "the backend did not serve again after the server answered",
        )
        assert [page_bytes(pool, 2), page_bytes(pool, 3)] == [page_bytes(pool, 0), page_bytes(pool, 1)]
    finally:
        _wait_for(server._answers, 10.0, "the paused server did not answer again")  # leave it usable
        pauser.close()
        backend.close()


@pytest.mark.clause("BE-5")
def test_timeout_is_a_miss(private_server: RedisServer) -> None:
    check_timeout_is_a_miss(private_server)


@pytest.mark.clause("BE-5")
@pytest.mark.parametrize("buggy_class", [NeverRecovers, LetsRedisErrorsOut])
def test_timeout_check_catches_planted_bug(private_server: RedisServer, buggy_class: type) -> None:
    with pytest.raises(AssertionError):
        check_timeout_is_a_miss(private_server, buggy_class, recovery_wait=1.5)


# ---------------------------------------------------------------- through the controller
CONTROLLER_PAGE_SIZE = 4
OPERATION_PAGES = 512
"""Four slices of 128 pages."""


def _kill_on_call(backend: Any, method: str, call_number: int, server: RedisServer) -> None:
    """Kill ``server`` just before the ``call_number``-th call of ``backend.method`` (the middle of an operation)."""
    original = getattr(backend, method)
    calls = [0]

    def hooked(*arguments: Any, **keywords: Any) -> Any:
        calls[0] += 1
        if calls[0] == call_number:
            server.kill()
        return original(*arguments, **keywords)

    setattr(backend, method, hooked)


def _unhook(backend: Any, method: str) -> None:
    backend.__dict__.pop(method, None)


@clause_check
def check_controller_survives_server_loss(server: RedisServer, backend_cls: type = RedisBackend) -> None:
    """CTL-11, BE-5: a server killed mid-backup and mid-prefetch costs misses, never a thread or a wrong byte."""
    server.start()
    backend = backend_cls(config(model_name=unique_model_name()), {"redis_url": server.url, **FAST_RECOVERY})
    pool = HostPagePool(
        page_count=3 * OPERATION_PAGES,
        page_size=CONTROLLER_PAGE_SIZE,
        layer_num=2,
        head_num=1,
        head_dim=8,
        pin_memory=False,
    )
    slots = pool.alloc(OPERATION_PAGES)
    assert slots is not None
    generator = torch.Generator().manual_seed(5)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape, generator=generator).to(pool.dtype))
    expected = [pool.get_data_page(int(start)) for start in slots[::CONTROLLER_PAGE_SIZE]]
    keys = page_keys(OPERATION_PAGES, start=3000)
    slice_tokens = 128 * CONTROLLER_PAGE_SIZE
    full_tokens = OPERATION_PAGES * CONTROLLER_PAGE_SIZE

    def loaded_pages_are_right(operation: Any) -> None:
        loaded = operation.loaded_host_indices
        for index in range(loaded.numel() // CONTROLLER_PAGE_SIZE):
            page = pool.get_data_page(int(loaded[index * CONTROLLER_PAGE_SIZE]))
            assert torch.equal(page, expected[index]), f"page {index} was counted as loaded with wrong bytes"

    def backup_until_complete() -> None:
        def attempt() -> bool:
            operation = controller.backup(keys, slots)
            assert operation.wait(30), "backup did not finish"
            return operation.completed_tokens == full_tokens

        _wait_for(attempt, 10.0, "backups did not complete after the server came back")

    def prefetch() -> Any:
        operation = controller.prefetch(keys=keys)
        assert operation.wait(30), "prefetch did not emit its final ack"
        assert operation.final_ack is not None
        loaded_pages_are_right(operation)
        return operation

    with CacheController(backend, pool) as controller:
        # Backup: the server dies before the third slice; two slices count, the rest stops (CTL-7).
        _kill_on_call(backend, "batch_set_v1", 3, server)
        backup = controller.backup(keys, slots)
        assert backup.wait(30), "backup did not finish after the server died"
        assert backup.completed_tokens == 2 * slice_tokens
        _unhook(backend, "batch_set_v1")
        server.start()
        backup_until_complete()

        # Prefetch: the server dies before the second read; one slice loads, acks still come (CTL-5, CTL-6).
        _kill_on_call(backend, "batch_get_v1", 2, server)
        operation = prefetch()
        assert operation.loaded_tokens == slice_tokens
        assert len(operation.progress_acks) == OPERATION_PAGES // 128
        _unhook(backend, "batch_get_v1")
        controller.host_pool.free(operation.loaded_host_indices)

        # Back again: the same controller and backend instance serve the whole operation.
        server.start()
        backup_until_complete()
        operation = prefetch()
        assert operation.loaded_tokens == full_tokens
        assert controller.internal_errors == []
        assert all(thread.is_alive() for thread in controller._threads), "a controller thread died"
    backend.close()


class ReportsFailedReadsAsLoaded(RedisBackend):
    """Says True for pages whose round trip failed: whatever the host slots held counts as the page."""

    def _read_objects_into(self, names: Any, buffers: Any) -> list[bool]:
        arrived = super()._read_objects_into(names, buffers)
        return [True] * len(arrived)

    def _read_objects_into_ranges(self, names: Any, page_views: Any) -> list[bool]:
        arrived = super()._read_objects_into_ranges(names, page_views)
        return [True] * len(arrived)


@pytest.mark.clause("CTL-11", "BE-5", "BE-15", "CTL-7")
def test_controller_survives_server_loss(private_server: RedisServer) -> None:
    check_controller_survives_server_loss(private_server)


@pytest.mark.clause("BE-15")
def test_controller_fault_check_catches_planted_bug(private_server: RedisServer) -> None:
    with pytest.raises(AssertionError):
        check_controller_survives_server_loss(private_server, ReportsFailedReadsAsLoaded)


# ================================================================== faults: a private cluster
@pytest.fixture(scope="module")
def private_cluster() -> Any:
    require_redis_server_binary()
    with RedisClusterServers(3) as cluster:
        yield cluster


def _cluster_backend(cluster: RedisClusterServers, backend_cls: type, pages: int = 16) -> Any:
    backend = backend_cls(
        config(model_name=unique_model_name()), {"redis_cluster_nodes": cluster.nodes, **FAST_RECOVERY}
    )
    backend.register_mem_pool_host(make_pool(page_count=pages))
    return backend


@clause_check
def check_master_loss(cluster: RedisClusterServers, backend_cls: type = RedisBackend) -> None:
    """BE-5: with one master dead, pages on the others are still found and pages on it are misses."""
    backend = _cluster_backend(cluster, backend_cls, pages=96)
    pool = backend.mem_pool_host
    keys = page_keys(48, start=900)
    assert write_pages(backend, keys, list(range(48))) == [True] * 48
    victim = cluster.owner_of(backend.storage_location(keys[0])[0])
    alive = [cluster.owner_of(backend.storage_location(key)[0]) is not victim for key in keys]
    assert any(alive) and not all(alive)
    victim.kill()
    try:
        result = backend.batch_get_v1(keys, slots_of(pool, list(range(48, 96))))
        assert result == alive, "pages on live masters must be found, pages on the dead one missed"
        for index in (0, 47):
            assert (
                torch.equal(
                    pool.get_data_page((48 + index) * pool.page_size), pool.get_data_page(index * pool.page_size)
                )
                == alive[index]
            )
        assert [backend.exists(key) for key in keys] == alive
        assert backend.batch_exists(keys) == 0  # keys[0] lives on the dead master
        assert backend.batch_set_v1(keys, slots_of(pool, list(range(48)))) == alive
        backend.clear()
    finally:
        victim.start()
        _wait_for(cluster._is_ok, 20.0, "the cluster did not recover after the master came back")
        backend.close()


class FailsTheWholeBatch(RedisBackend):
    """One failing node fails every page of the call, as a single cross-node pipeline does."""

    def _execute(self, units: Any, sinks: Any = None) -> list[Any]:
        outcomes = super()._execute(units, sinks)
        failure = next((outcome for outcome in outcomes if isinstance(outcome, BaseException)), None)
        return outcomes if failure is None else [failure] * len(outcomes)


@pytest.mark.clause("BE-5")
def test_master_loss(private_cluster: RedisClusterServers) -> None:
    check_master_loss(private_cluster)


@pytest.mark.clause("BE-5")
def test_master_loss_check_catches_planted_bug(private_cluster: RedisClusterServers) -> None:
    with pytest.raises(AssertionError):
        check_master_loss(private_cluster, FailsTheWholeBatch)


@clause_check
def check_slot_moved(cluster: RedisClusterServers, backend_cls: type = RedisBackend, wait: float = 60.0) -> None:
    """BE-5: a slot that moved answers MOVED: a miss at first, then the backend refreshes its map and serves."""
    backend = _cluster_backend(cluster, backend_cls)
    pool = backend.mem_pool_host
    keys = page_keys(1, start=990)
    assert backend.batch_exists(keys) == 0  # the backend now holds the slot map
    redis_key = backend.storage_location(keys[0])[0]
    owner = cluster.owner_of(redis_key)
    target = next(server for server in cluster.servers if server is not owner)
    cluster.move_empty_slot(key_slot(redis_key.encode()), target)  # the backend's map still names the old owner
    try:
        fill_pages(pool, [0], seed=3)
        first = backend.batch_set_v1(keys, slots_of(pool, [0]))
        assert first == [False], "the old owner answers MOVED: a failed write, never an exception"
        _wait_for(
            lambda: backend.batch_set_v1(keys, slots_of(pool, [0])) == [True],
            wait,
            "the backend did not follow the moved slot",
        )
        assert backend.batch_get_v1(keys, slots_of(pool, [1])) == [True]
        assert page_bytes(pool, 1) == page_bytes(pool, 0)
    finally:
        backend.clear()
        backend.close()


class NeverRefreshesSlots(RedisBackend):
    def __init__(self, storage_config: Any = None, extra_config: Optional[dict] = None) -> None:
        super().__init__(storage_config, extra_config)
        original = self.nodes._cluster_client

        def frozen_map() -> Any:
            self.nodes._topology_stale = False
            return original()

        self.nodes._cluster_client = frozen_map  # type: ignore[method-assign]


@pytest.mark.clause("BE-5")
def test_slot_moved(private_cluster: RedisClusterServers) -> None:
    check_slot_moved(private_cluster)


@pytest.mark.clause("BE-5")
def test_slot_moved_check_catches_planted_bug(private_cluster: RedisClusterServers) -> None:
    with pytest.raises(AssertionError):
        check_slot_moved(private_cluster, NeverRefreshesSlots, wait=1.0)
