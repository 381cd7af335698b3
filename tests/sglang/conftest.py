"""The release tier: tests that run inside one process holding one pinned SGLang release.

They are collected only when ``HICACHE_SGLANG_RELEASE`` names the release
(the root conftest makes it importable first); ``tests/test_release_tier.py``
runs this folder once per pinned release, each in a process of its own.
"""

from __future__ import annotations

import os

import pytest

from hicache_contracts.sglang_release import active_release, storage_module

RELEASE = os.environ["HICACHE_SGLANG_RELEASE"]


@pytest.fixture(scope="session")
def release() -> str:
    """The pinned release this process holds."""
    assert active_release() == RELEASE
    return RELEASE


@pytest.fixture(scope="session")
def sglang_storage(release):
    """The release's ``sglang.srt.mem_cache.hicache_storage``."""
    return storage_module(release)
