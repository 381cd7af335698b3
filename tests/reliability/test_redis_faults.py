"""The fault tier, Redis: a server killed and restarted during a run of backups and prefetches.

Scenario: the reference controller over the reference Redis backend on a
private ``redis-server`` (a free loopback port, started by the test, no
persistence). A run of rounds, each a backup of 256 pages (two slices) and a
prefetch of them; the server is killed by SIGKILL in the middle of a backup
(before its second slice) and, after a restart, in the middle of a prefetch
(before its second read), and started again on the same port.
Expected: every operation ends with its final ack (its tokens what was
loaded); every page counted as loaded holds exactly the bytes written under
its key: 0 wrong pages; pages lost with the killed process are misses; once
the server is back the same controller and backend instance serve whole
operations again; no controller thread dies and nothing is recorded as an
internal error.
Planted: a backend that reports failed reads as loaded (wrong pages) and a
controller that ends a short prefetch without its final ack are caught.
Skips, with the reason, when ``redis-server`` is not installed (CI has it and
refuses the skip with HICACHE_REQUIRE_REDIS=1).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.controller_parts import Acks
from hicache_reference.backends.redis_backend import RedisBackend
from tests.redis_support import RedisServer, require_redis_server_binary, unique_model_name

PAGE_SIZE = 4
PAGES = 256
"""Pages per operation: two slices of 128."""
RECOVERY = {"reconnect_interval_seconds": 0.05, "socket_timeout": 2.0, "socket_connect_timeout": 1.0}
"""A failed node is tried again after 50 ms."""


class Run:
    """The counts of one run: operations, final acks, pages loaded and pages loaded with wrong bytes."""

    def __init__(self) -> None:
        self.operations = self.final_acks = self.loaded = self.wrong = 0
        self.full_after_restart = 0
        self.loaded_before_kill = 0
        """Pages the prefetch killed before its second read loaded: its first slice."""


def hook_call(backend: Any, method: str, call_number: int, action: Callable[[], None]) -> None:
    """Run ``action`` just before the ``call_number``-th call of ``backend.method`` from now (mid-operation)."""
    original = getattr(type(backend), method).__get__(backend)
    calls = [0]

    def hooked(*arguments: Any, **keywords: Any) -> Any:
        calls[0] += 1
        if calls[0] == call_number:
            action()
        return original(*arguments, **keywords)

    setattr(backend, method, hooked)


def unhook(backend: Any, method: str) -> None:
    backend.__dict__.pop(method, None)


def run_with_kills(
    server: RedisServer, backend_class: type = RedisBackend, controller_class: type = CacheController
) -> Run:
    """Back up and prefetch round after round while the server is killed twice and restarted; return the counts."""
    server.start()
    config = HiCacheStorageConfig.single_rank(model_name=unique_model_name("faults"))
    backend = backend_class(config, {"redis_url": server.url, **RECOVERY})
    pool = HostPagePool(
        page_count=3 * PAGES, page_size=PAGE_SIZE, layer_num=2, head_num=1, head_dim=8, pin_memory=False
    )
    generator = torch.Generator().manual_seed(11)
    expected: dict[str, torch.Tensor] = {}
    counts = Run()
    controller = controller_class(backend, pool)

    def backup(round_number: int) -> list[str]:
        keys = [f"{round_number:08x}{page:056x}" for page in range(PAGES)]
        slots = pool.alloc(PAGES)
        assert slots is not None
        for index, key in enumerate(keys):
            slot = int(slots[index * PAGE_SIZE])
            pool.set_from_flat_data_page(
                slot, torch.randn(pool.get_data_page(slot).shape, generator=generator).to(pool.dtype)
            )
            expected[key] = pool.get_data_page(slot).clone()
        operation = controller.backup(keys, slots)
        assert operation.wait(60), f"round {round_number}: the backup did not finish"
        for index in range(PAGES):  # the source slots may come back to a prefetch: leave nothing that matches
            pool.set_from_flat_data_page(int(slots[index * PAGE_SIZE]), torch.full_like(expected[keys[index]], -7.0))
        pool.free(slots)
        return keys

    def prefetch(keys: list[str]) -> Any:
        operation = controller.prefetch(keys=keys)
        counts.operations += 1
        assert operation.wait(60), "a prefetch did not end"
        if operation.final_ack is not None:
            counts.final_acks += 1
            assert operation.final_ack.tokens == operation.loaded_tokens
        loaded = operation.loaded_host_indices
        for index in range(loaded.numel() // PAGE_SIZE):
            counts.loaded += 1
            page = pool.get_data_page(int(loaded[index * PAGE_SIZE]))
            counts.wrong += not torch.equal(page, expected[keys[index]])
        pool.free(loaded)
        return operation

    def serve_again(round_number: int) -> None:
        """Once the server is back, the same instance serves a whole operation (within a bounded number of tries)."""
        for attempt in range(200):
            keys = backup(1000 * round_number + attempt)
            if prefetch(keys).loaded_tokens == PAGES * PAGE_SIZE:
                counts.full_after_restart += 1
                return
        raise AssertionError(f"round {round_number}: the controller never served a whole operation again")

    try:
        prefetch(backup(0))  # a healthy round first
        hook_call(backend, "batch_set_v1", 2, server.kill)  # killed before the second slice of a backup
        keys = backup(1)
        unhook(backend, "batch_set_v1")
        prefetch(keys)  # the server is down: the hit query is a miss, the final ack still comes
        prefetch(backup(2))
        server.start()  # same port, empty: what was stored went with the killed process
        serve_again(3)
        keys = backup(4)
        hook_call(backend, "batch_get_v1", 2, server.kill)  # killed before the second read of a prefetch
        counts.loaded_before_kill = prefetch(keys).loaded_tokens // PAGE_SIZE
        unhook(backend, "batch_get_v1")
        prefetch(keys)
        server.start()
        serve_again(5)
        prefetch(keys)  # written before the second kill: gone, so misses, never wrong bytes
        assert controller.internal_errors == []
        assert all(thread.is_alive() for thread in controller._threads), "a controller thread died"
    finally:
        assert controller.close(timeout=30) is True
        backend.close()
    return counts


@pytest.fixture(scope="module")
def private_server() -> Any:
    require_redis_server_binary()  # skips with the reason (fails under HICACHE_REQUIRE_REDIS=1)
    server = RedisServer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.clause("CTL-6", "CTL-11", "BE-5", "BE-15")
def test_redis_killed_and_restarted_mid_run_gives_no_wrong_page_and_every_final_ack(private_server: Any) -> None:
    counts = run_with_kills(private_server)
    assert counts.wrong == 0, f"{counts.wrong} wrong pages out of {counts.loaded}"
    assert counts.final_acks == counts.operations
    assert counts.full_after_restart == 2
    assert counts.loaded_before_kill == 128  # the kill landed between the two reads of one prefetch
    assert counts.loaded >= 3 * PAGES  # the healthy round and one whole operation after each restart


class ReportsFailedReadsAsLoaded(RedisBackend):
    """Says True for pages whose round trip failed: whatever the host slots held counts as the page."""

    def _read_objects_into(self, names: Any, buffers: Any) -> list[bool]:
        return [True] * len(super()._read_objects_into(names, buffers))

    def _read_objects_into_ranges(self, names: Any, page_views: Any) -> list[bool]:
        return [True] * len(super()._read_objects_into_ranges(names, page_views))


class NoFinalAckWhenShort(Acks):
    """Ends a prefetch that loaded less than it was granted without its final ack."""

    def finish(self, operation: Any) -> None:
        slots = operation.host_indices
        if slots is not None and operation.loaded_tokens < slots.numel():
            self.upkeep.free_slots(operation, self.host_pool, slots[operation.loaded_tokens :])
            operation.host_indices = slots[: operation.loaded_tokens]
            operation._finish()
            return
        super().finish(operation)


ShortPrefetchWithoutFinalAck = CacheController.with_parts(NoFinalAckWhenShort, name="ShortPrefetchWithoutFinalAck")


@pytest.mark.clause("BE-15")
def test_a_backend_that_counts_failed_reads_as_loaded_is_caught(private_server: Any) -> None:
    assert run_with_kills(private_server, backend_class=ReportsFailedReadsAsLoaded).wrong > 0


@pytest.mark.clause("CTL-6")
def test_a_controller_that_withholds_the_final_ack_of_a_short_prefetch_is_caught(private_server: Any) -> None:
    counts = run_with_kills(private_server, controller_class=ShortPrefetchWithoutFinalAck)
    assert counts.final_acks < counts.operations
