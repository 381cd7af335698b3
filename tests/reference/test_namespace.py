"""The reference backends' namespacing scheme (NS-1..NS-7)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_contracts import HiCacheStorageConfig
from hicache_reference.backends.namespace import _safe, namespace_for, storage_name


def escaped_by_code_point(text: str) -> str:
    """Planted bug: escapes by code point, so U+01F6 and U+001F followed by '6' collide."""
    return re.sub(r"[^A-Za-z0-9._-]", lambda m: f"%{ord(m.group()):02x}", text)


def check_injective(escape, first: str, second: str) -> None:
    if first != second:
        assert escape(first) != escape(second), f"{first!r} and {second!r} share a name"


@pytest.mark.clause("NS-4", "NS-6")
@given(st.text(max_size=6), st.text(max_size=6))
def test_escaping_is_injective_and_safe(first, second):
    check_injective(_safe, first, second)
    assert re.fullmatch(r"[A-Za-z0-9._%-]*", _safe(first))


@pytest.mark.clause("NS-4")
def test_code_point_escaping_is_caught():
    with pytest.raises(AssertionError):
        check_injective(escaped_by_code_point, "\u01f6", "\u001f6")


@pytest.mark.clause("NS-1", "NS-2", "NS-3", "NS-4", "NS-7")
def test_every_coordinate_is_in_the_namespace_and_stable():
    base = HiCacheStorageConfig.single_rank(model_name="m", tp_size=2, pp_size=2, attn_cp_size=2)
    variants = [
        base,
        base.model_copy(update={"tp_rank": 1}),
        base.model_copy(update={"pp_rank": 1}),
        base.model_copy(update={"attn_cp_rank": 1}),
        base.model_copy(update={"model_name": "other"}),
    ]
    names = [namespace_for(config) for config in variants]
    assert len(set(names)) == len(names)
    assert namespace_for(base) == namespace_for(
        HiCacheStorageConfig.single_rank(model_name="m", tp_size=2, pp_size=2, attn_cp_size=2)
    )


@pytest.mark.clause("NS-5")
def test_replicated_kv_drops_the_tensor_rank_only():
    config = HiCacheStorageConfig.single_rank(model_name="m", tp_size=4, is_mla_model=True)
    ranks = {namespace_for(config.model_copy(update={"tp_rank": rank})) for rank in range(4)}
    assert len(ranks) == 1
    assert namespace_for(config) != namespace_for(config.model_copy(update={"pp_size": 2, "pp_rank": 1}))


@pytest.mark.clause("NS-6")
def test_storage_name_separates_pools():
    assert storage_name("ns", "a" * 64, "kv") != storage_name("ns", "a" * 64, "indexer")
