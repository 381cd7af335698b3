"""The memory backend's batch copy cut in two halves on two threads (large batches).

Scenario: ``SPLIT_BYTES`` lowered to 0 so that every batch of two or more
pages is split, with torch on two threads; writes and reads between pools of
every layout, and the generic read checks.
Expected: every page round-trips exactly, both halves ran (one on the helper
thread), one helper thread serves every call (none is started per call), a
forked child copies through a helper of its own, and reads stay in their slots.
Planted: a split that forgets its second half is caught; so is a helper that a
forked child takes over from its parent (the child's copy never ends).
"""

from __future__ import annotations

import os
import signal
import threading
import time
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
    check_split_round_trips(split_harness)
    assert memory_module.COPY_THREAD in copying_threads, "the second half ran on the helper thread"
    assert threading.current_thread().name in copying_threads
    helpers = copy_threads()
    assert helpers and all(thread.daemon for thread in helpers), helpers
    check_split_round_trips(split_harness)
    assert copy_threads() == helpers, "a call started a helper thread of its own"


def copy_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == memory_module.COPY_THREAD]


def check_forked_child_copies(harness: MemoryHarness, wait_s: float = 60.0) -> None:
    """A child forked after the helper started copies a split batch too (its exit status says so)."""
    check_round_trip_between_pools(harness, "mha", "page_first")  # the parent's helper is running now
    child = os.fork()
    if child == 0:  # the child: one split round trip, then out without running the parent's cleanup
        status = 1
        try:
            check_round_trip_between_pools(harness, "mha", "layer_first")
            status = 0
        finally:
            os._exit(status)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, "the forked child's split copy failed"
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    raise AssertionError(f"the forked child's split copy did not end within {wait_s} s")


@pytest.mark.clause("BE-15")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_copies_through_a_helper_of_its_own(split_harness: MemoryHarness) -> None:
    check_forked_child_copies(split_harness)


@pytest.mark.clause("BE-15")
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_check_catches_a_helper_taken_over_from_the_parent(
    split_harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "getpid", lambda: -1)  # every process looks like the one that started the helper
    check_round_trip_between_pools(split_harness, "mha", "page_first")  # the helper, started for pid -1
    with pytest.raises(AssertionError, match="did not end"):
        check_forked_child_copies(split_harness, wait_s=3.0)


@pytest.mark.clause("BE-15", "BE-17")
def test_split_check_catches_a_forgotten_half(split_harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    def first_half_only(targets: Any, sources: Any) -> None:
        half = max(1, len(targets) // 2)
        torch._foreach_copy_(list(targets[:half]), list(sources[:half]))

    monkeypatch.setattr(memory_module, "_foreach_copy", first_half_only)
    with pytest.raises(AssertionError):
        check_split_round_trips(split_harness)
