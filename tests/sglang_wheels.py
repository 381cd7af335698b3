"""A pinned release's unpacked wheel, for tests that read SGLang's source without importing it.

``wheel_root(version)`` fetches the wheel into the release cache when it is
missing (``hicache_contracts.sglang_release.fetch_release``) and returns the
folder holding ``sglang/``. When it cannot be had the test skips with the
reason — or fails under ``HICACHE_REQUIRE_SGLANG=1`` (CI).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hicache_contracts.sglang_release import ReleaseError, fetch_release

__all__ = ["wheel_root"]


def wheel_root(version: str) -> Path:
    """Return the folder holding release ``version``'s ``sglang`` package, fetching it if needed."""
    try:
        return fetch_release(version)
    except ReleaseError as error:
        reason = f"cannot fetch SGLang {version}'s wheel: {error}"
        if os.environ.get("HICACHE_REQUIRE_SGLANG", "") == "1":
            pytest.fail(f"{reason} (HICACHE_REQUIRE_SGLANG=1)", pytrace=False)
        pytest.skip(reason)
