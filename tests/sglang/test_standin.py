"""The stand-in the tests use without SGLang matches the release it copies, field for field."""

from __future__ import annotations

import pytest

from hicache_contracts.sglang_compat import describe_release
from tests.sglang_standin import STAND_IN_RELEASE, make_storage_module


@pytest.mark.clause("BE-1", "BE-19", "BE-21")
def test_stand_in_matches_its_release(sglang_storage, release):
    if release != STAND_IN_RELEASE:
        pytest.skip(f"the stand-in copies SGLang {STAND_IN_RELEASE}")
    assert describe_release(make_storage_module()) == describe_release(sglang_storage)
    assert [str(member) for member in make_storage_module().PoolName] == [str(m) for m in sglang_storage.PoolName]
