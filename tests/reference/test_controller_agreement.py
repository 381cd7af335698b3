"""Rank agreement and the writer rule as SGLang 0.5.23 runs them (RANK-5, RANK-6, CTL-8, CTL-15).

Two ranks as threads (``ThreadRankGroup``). For the agreement, each rank's
backend answers the hybrid hit query with a chosen result: the hit, each
pool's own boundary and the restorable prefix lengths. For the writer rule,
KV is replicated (``is_mla_model``) and TP rank 1 is not the storage writer.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

import pytest

from hicache_contracts import PoolHitPolicy, PoolName, PoolTransfer, PoolTransferResult
from hicache_reference import CacheController, SidecarPool, ThreadRankGroup
from hicache_reference.settings import ControllerSettings
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    config,
    keys_for,
    make_pool,
    memory_backend,
    run_on_ranks,
)

PAGES = 8
KEYS = keys_for(PAGES)


class AnsweringBackend(FaultingRecorder):
    """Records calls; answers batch_exists_v2 with a fixed result (the rest goes to a memory backend)."""

    def __init__(self, inner: Any, answer: Optional[PoolTransferResult]) -> None:
        super().__init__(inner)
        self.answer = answer

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        return self._record("batch_exists_v2", keys, extra_info, lambda: self.answer)


class VectorCountingGroup:
    """Wraps a rank group; counts collectives (scalar and vector) per channel and keeps the vectors sent."""

    def __init__(
        self, inner: Any, name: str = "root", counts: Optional[Counter] = None, vectors: Optional[list] = None
    ) -> None:
        self.inner = inner
        self.name = name
        self.counts = counts if counts is not None else Counter()
        self.vectors = vectors if vectors is not None else []

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def world_size(self) -> int:
        return self.inner.world_size

    def all_reduce_min(self, value: int) -> int:
        self.counts[self.name] += 1
        return self.inner.all_reduce_min(value)

    def all_reduce_min_vector(self, values):
        self.counts[self.name] += 1
        self.vectors.append((self.name, tuple(values)))
        return self.inner.all_reduce_min_vector(values)

    def channel(self, name: str) -> VectorCountingGroup:
        return VectorCountingGroup(self.inner.channel(name), name, self.counts, self.vectors)


def sidecars(trailing: bool = True) -> list:
    pools = [SidecarPool(PoolName.INDEXER, make_pool(), kv_derived=True)]
    if trailing:
        pools.append(SidecarPool(PoolName.SWA, make_pool(), hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=2))
    return pools


def run_two_ranks(answers, controller_class=CacheController, trailing: bool = True):
    """Prefetch KEYS on two ranks whose backends give ``answers[rank]``; return (operations, groups)."""
    groups = ThreadRankGroup.create(2, timeout=10)
    wrapped = [VectorCountingGroup(group) for group in groups]
    controllers = [
        controller_class(
            AnsweringBackend(memory_backend(tp_rank=rank, tp_size=2), answers[rank]),
            make_pool(),
            storage_config=config(tp_rank=rank, tp_size=2),
            sidecar_pools=sidecars(trailing),
            rank_group=wrapped[rank],
            settings=ControllerSettings(prefetch_threshold=0),
        )
        for rank in range(2)
    ]
    operations = run_on_ranks(controllers, groups, lambda rank: controllers[rank].prefetch(keys=KEYS))
    return operations, wrapped


def answer(hit: int, restorable: Optional[tuple], **pools: int) -> PoolTransferResult:
    entries = {"kv": hit, **pools} if hit else {}  # zero-hit pools are left out (BE-21)
    return PoolTransferResult(
        kv_hit_pages=hit,
        extra_pool_hit_pages=entries,  # type: ignore[arg-type]
        restorable_prefix_pages=None if restorable is None else list(restorable),  # type: ignore[arg-type]
    )


@pytest.mark.clause("RANK-6", "BE-26")
@pytest.mark.parametrize(
    "answers, agreed",
    [
        # Rank 0 restores 2, 4 and 6; rank 1 restores 2, 4 and 5: MIN of the maxima (5) is not restorable on rank 0.
        ((answer(6, (2, 4, 6), swa=6), answer(5, (2, 4, 5), swa=5)), 4),
        ((answer(6, (1, 2, 3, 4, 5, 6)), answer(6, None)), 6),  # no set reported: 1..hit
        ((answer(6, (6,)), answer(6, (5,))), 0),  # nothing in common but the empty prefix
        ((answer(0, ()), answer(6, (6,))), 0),
    ],
)
def test_ranks_agree_on_the_largest_length_every_rank_can_restore(answers, agreed):
    operations, _ = run_two_ranks(answers)
    assert [operation.hit_pages for operation in operations] == [agreed, agreed]


@pytest.mark.clause("RANK-5", "RANK-1")
def test_the_agreement_is_one_packed_vector_with_each_pools_own_boundary():
    answers = (answer(6, None, indexer=6, swa=5), answer(6, None, indexer=4))
    operations, groups = run_two_ranks(answers, trailing=False)
    for operation, group in zip(operations, groups):
        assert group.counts["hit_query"] == 1  # RANK-1: exactly once, RANK-5: one collective
        ((name, vector),) = [item for item in group.vectors if item[0] == "hit_query"]
        assert len(vector) == 1 + 1  # the hit, then the indexer's boundary (no SWA pool here)
        assert operation.agreed_pool_hits == {"indexer": 4}
        assert operation.hit_pages == 6


@pytest.mark.clause("RANK-5")
def test_a_pool_any_rank_left_out_has_no_agreed_verdict():
    answers = (answer(6, (2, 4, 6), swa=6, indexer=6), answer(6, (2, 4, 6), indexer=6))
    operations, groups = run_two_ranks(answers)
    for operation, group in zip(operations, groups):
        ((_, vector),) = [item for item in group.vectors if item[0] == "hit_query"]
        assert len(vector) == PAGES + 1 + 2  # RANK-6 flags for 0..8 pages, then indexer and swa
        assert operation.agreed_pool_hits == {"indexer": 6}  # swa: rank 1 gave no verdict


# ================================================================== the writer rule
def replicated_backup(transfers_for, failing=None):
    """Back up KEYS on two MLA ranks; rank 1 is not the storage writer. Return (backups, recorders)."""
    groups = ThreadRankGroup.create(2, timeout=10)
    store = memory_backend().store
    recorders, controllers, pools = [], [], []
    for rank in range(2):
        faults = {"batch_set_v2": failing} if failing is not None and rank == 1 else None
        recorder = FaultingRecorder(memory_backend(store=store, tp_rank=rank, tp_size=2, is_mla_model=True), faults)
        mamba, swa = make_pool(), make_pool()
        controller = CacheController(
            recorder,
            make_pool(),
            storage_config=config(tp_rank=rank, tp_size=2, is_mla_model=True),
            sidecar_pools=[SidecarPool(PoolName.MAMBA, mamba), SidecarPool(PoolName.SWA, swa)],
            rank_group=groups[rank],
            settings=ControllerSettings(prefetch_threshold=0),
        )
        recorders.append(recorder)
        controllers.append(controller)
        pools.append((mamba, swa))

    def submit(rank: int) -> Any:
        controller = controllers[rank]
        return controller.backup(KEYS, controller.host_pool.alloc(PAGES), sidecar_transfers=transfers_for(*pools[rank]))

    return run_on_ranks(controllers, groups, submit), recorders


def mamba_and_swa(mamba, swa):
    return [
        PoolTransfer(
            name=PoolName.MAMBA, keys=KEYS[-1:], host_indices=mamba.alloc(1), hit_policy=PoolHitPolicy.TRAILING_PAGES
        ),
        PoolTransfer(
            name=PoolName.SWA, keys=KEYS[-2:], host_indices=swa.alloc(2), hit_policy=PoolHitPolicy.TRAILING_PAGES
        ),
    ]


@pytest.mark.clause("CTL-8", "CTL-15")
def test_a_non_writer_writes_only_rank_sharded_sidecars_and_reports_them():
    backups, recorders = replicated_backup(mamba_and_swa)
    writer, other = recorders
    assert len(writer.calls_of("batch_set_v1")) == 1 and not other.calls_of("batch_set_v1")  # KV: the writer only
    written = [name for call in other.calls_of("batch_set_v2") for name, _, _ in call.transfers]
    assert written == ["mamba"]  # CTL-8: MAMBA state is TP-sharded; SWA is replicated with KV
    assert sorted(name for call in writer.calls_of("batch_set_v2") for name, _, _ in call.transfers) == ["mamba", "swa"]
    assert backups[1].local_completed_tokens == PAGES * PAGE_SIZE  # CTL-15: its sidecar writes all succeeded
    assert [backup.completed_tokens for backup in backups] == [PAGES * PAGE_SIZE] * 2


@pytest.mark.clause("CTL-15")
def test_a_non_writer_reports_nothing_when_a_sidecar_write_fails_or_it_has_none():
    backups, _ = replicated_backup(mamba_and_swa, failing=lambda call, run: {"mamba": [False]})
    assert backups[1].local_completed_tokens == 0
    assert backups[0].local_completed_tokens == PAGES * PAGE_SIZE
    backups, recorders = replicated_backup(lambda mamba, swa: [])
    assert not recorders[1].calls_of("batch_set_v1", "batch_set_v2")
    assert backups[1].local_completed_tokens == 0  # no sidecar written: SGLang 0.5.23 reports 0
    assert backups[0].completed_tokens == PAGES * PAGE_SIZE  # the agreed outcome is the writer's
