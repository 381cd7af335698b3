"""Fixtures shared by the reference tests: the thread-leak guard and the memory backend's harnesses."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Iterator

import pytest

from hicache_reference.backends import forget_shared_memory_store
from tests.reference.backend_checks import MemoryHarness


@pytest.fixture
def threads_before() -> Iterator[set]:
    """Yield the threads alive before the test; fail the test if it leaves a new one running."""
    before = set(threading.enumerate())
    yield before
    grace = time.monotonic() + 2.0  # a thread finishing its last step as the test ends is not a leak
    for thread in set(threading.enumerate()) - before:
        thread.join(max(0.0, grace - time.monotonic()))
    leaked = [thread for thread in set(threading.enumerate()) - before if thread.is_alive()]
    assert not leaked, f"threads leaked: {leaked}"


@pytest.fixture
def store_name() -> Any:
    name = f"test-store-{uuid.uuid4().hex}"
    yield name
    forget_shared_memory_store(name)


@pytest.fixture
def memory_harness(store_name: str) -> MemoryHarness:
    return MemoryHarness(store_name)


@pytest.fixture(params=["fast-path", "through-helpers"])
def either_path(request: Any, memory_harness: MemoryHarness) -> MemoryHarness:
    """The memory harness with ``HostPagePool``s (batches at once) or with foreign pools (page by page)."""
    return memory_harness if request.param == "fast-path" else memory_harness.with_foreign_pools()
