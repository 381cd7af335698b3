"""The memory backend's batch copy cut in two halves on two threads (large batches).

Scenario: ``SPLIT_BYTES`` lowered to 0 so that every batch of two or more
pages is split, with torch on two threads; writes and reads between pools of
every layout, and the generic read checks.
Expected: every page round-trips exactly, both halves ran (one on the helper
thread), no thread outlives the call, and reads stay in their slots.
Planted: a split that forgets its second half is caught.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterator

import pytest
import torch

import hicache_reference.backends.memory_store as memory_module
from hicache_reference.backends import forget_shared_memory_store
from tests.reference.backend_checks import MemoryHarness
from tests.reference.reference_checks import check_reads_stay_in_their_slots, check_round_trip_between_pools


@pytest.fixture
def split_harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryHarness]:
    name = f"test-store-{uuid.uuid4().hex}"
    monkeypatch.setattr(memory_module, "SPLIT_BYTES", 0)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    try:
        yield MemoryHarness(name)
    finally:
        torch.set_num_threads(threads)
        forget_shared_memory_store(name)


def check_split_round_trips(harness: MemoryHarness) -> None:
    for kind, layout in (("mha", "page_first"), ("mha", "layer_first"), ("mla", "page_first")):
        check_round_trip_between_pools(harness, kind, layout)
    check_reads_stay_in_their_slots(harness)


@pytest.mark.clause("BE-15", "BE-16", "BE-17")
def test_split_copies_round_trip(split_harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    copying_threads: list[str] = []
    real = torch._foreach_copy_

    def recording(targets: Any, sources: Any) -> None:
        copying_threads.append(threading.current_thread().name)
        real(targets, sources)

    monkeypatch.setattr(torch, "_foreach_copy_", recording)
    before = set(threading.enumerate())
    check_split_round_trips(split_harness)
    assert "hicache-memory-copy" in copying_threads, "the second half ran on the helper thread"
    assert threading.current_thread().name in copying_threads
    assert not [thread for thread in set(threading.enumerate()) - before if thread.is_alive()]


@pytest.mark.clause("BE-15", "BE-17")
def test_split_check_catches_a_forgotten_half(split_harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    def first_half_only(targets: Any, sources: Any) -> None:
        half = max(1, len(targets) // 2)
        torch._foreach_copy_(list(targets[:half]), list(sources[:half]))

    monkeypatch.setattr(memory_module, "_foreach_copy", first_half_only)
    with pytest.raises(AssertionError):
        check_split_round_trips(split_harness)
