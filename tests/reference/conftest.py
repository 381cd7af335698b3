"""Fixtures shared by the reference tests."""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest


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
