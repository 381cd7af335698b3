"""The storage-writer rule, per-pool replication, non-writer completion and DCP validation (CTL-8, CTL-15, BE-25)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hicache_spec import check_dcp_config, compute_non_writer_backup_tokens, is_storage_writer, writes_pool


@pytest.mark.clause("CTL-8", "NS-5")
@pytest.mark.parametrize(
    "mla, tp_rank, dcp_rank, writer",
    [(False, 3, 0, True), (True, 0, 0, True), (True, 1, 0, False), (True, 1, 1, True), (True, 3, 1, False)],
)
def test_storage_writer(mla, tp_rank, dcp_rank, writer):
    assert is_storage_writer(mla, tp_rank, dcp_rank) is writer


@pytest.mark.clause("CTL-8")
def test_rank_sharded_pools_are_written_by_every_rank():
    assert writes_pool("mamba", writer=False)
    assert not writes_pool("indexer", writer=False) and not writes_pool("swa", writer=False)
    assert all(writes_pool(name, writer=True) for name in ("kv", "indexer", "swa", "mamba"))


@pytest.mark.clause("CTL-15")
@pytest.mark.parametrize(
    "oks, expected",
    [((True, True), 64), ((True, False), 0), ((), 0), ((False,), 0)],
)
def test_non_writer_completion(oks, expected):
    assert compute_non_writer_backup_tokens(oks, span_pages=4, page_size=16) == expected


@pytest.mark.clause("BE-25")
@pytest.mark.parametrize(
    "args, reason",
    [
        ((False, 0, 1, 0, 1, None), None),
        ((True, 3, 4, 1, 2, 64), None),
        ((True, 0, 1, 1, 1, None), "dcp_rank: must satisfy 0 <= dcp_rank < dcp_size with dcp_size >= 1"),
        ((True, 0, 1, 0, 0, None), "dcp_rank: must satisfy 0 <= dcp_rank < dcp_size with dcp_size >= 1"),
        ((False, 0, 2, 0, 2, 64), "dcp_size: more than one DCP shard requires is_mla_model"),
        ((True, 1, 3, 1, 2, 64), "dcp_rank: DCP groups must be contiguous within TP (tp_rank % dcp_size == dcp_rank)"),
        ((True, 2, 4, 1, 2, 64), "dcp_rank: DCP groups must be contiguous within TP (tp_rank % dcp_size == dcp_rank)"),
        ((True, 4, 4, 0, 2, 64), "dcp_rank: DCP groups must be contiguous within TP (tp_rank % dcp_size == dcp_rank)"),
        ((True, 1, 4, 1, 2, None), "logical_page_size: must be a positive multiple of dcp_size"),
        ((True, 1, 4, 1, 2, 63), "logical_page_size: must be a positive multiple of dcp_size"),
    ],
)
def test_dcp_validation(args, reason):
    assert check_dcp_config(*args) == reason


@pytest.mark.clause("BE-25")
@given(
    st.booleans(),
    st.integers(0, 8),
    st.integers(1, 8),
    st.integers(0, 4),
    st.integers(1, 4),
    st.one_of(st.none(), st.integers(-2, 130)),
)
def test_dcp_validation_property(mla, tp_rank, tp_size, dcp_rank, dcp_size, logical):
    valid = 0 <= dcp_rank < dcp_size and (
        dcp_size == 1
        or (
            mla
            and tp_size % dcp_size == 0
            and 0 <= tp_rank < tp_size
            and tp_rank % dcp_size == dcp_rank
            and logical is not None
            and logical > 0
            and logical % dcp_size == 0
        )
    )
    assert (check_dcp_config(mla, tp_rank, tp_size, dcp_rank, dcp_size, logical) is None) == valid
