"""Several ranks as threads of one process: agreement on hits, acks, termination and backups (RANK-1..4, CTL-8).

Each rank has its own controller, host pool and backend namespace
(``tp_rank`` r of ``tp_size`` 2) on one shared store, and a
``ThreadRankGroup`` wrapped to count every collective per channel.
"""

from __future__ import annotations

from collections import Counter

import pytest

from hicache_reference import CacheController, ThreadRankGroup
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE
from tests.reference.controller_checks import check_frees, check_prefetch_acks
from tests.reference.controller_helpers import (
    PAGE_SIZE,
    FaultingRecorder,
    config,
    fill_random,
    keys_for,
    make_pool,
    memory_backend,
    on_call,
    raising,
    wait_all,
)

PAGES = 300
KEYS = keys_for(PAGES)


class CountingGroup:
    """Wraps a rank group; counts collectives per channel name."""

    def __init__(self, inner, name="root", counts=None):
        self.inner = inner
        self.name = name
        self.counts = counts if counts is not None else Counter()

    @property
    def rank(self):
        return self.inner.rank

    @property
    def world_size(self):
        return self.inner.world_size

    def all_reduce_min(self, value):
        self.counts[self.name] += 1
        return self.inner.all_reduce_min(value)

    def channel(self, name):
        return CountingGroup(self.inner.channel(name), name, self.counts)


class Rank:
    def __init__(self, rank, group, store, stored_pages, *, faults=None, mla=False, **settings):
        self.config = config(tp_rank=rank, tp_size=2, is_mla_model=mla)
        self.pool = make_pool()
        fill_random(self.pool, rank)
        backend = memory_backend(store=store, tp_rank=rank, tp_size=2, is_mla_model=mla)
        if stored_pages:
            backend.register_mem_pool_host(self.pool)
            slots = self.pool.alloc(stored_pages)
            for start in range(0, stored_pages, STORAGE_BATCH_SIZE):
                end = min(start + STORAGE_BATCH_SIZE, stored_pages)
                backend.batch_set_v1(list(KEYS[start:end]), slots[start * PAGE_SIZE : end * PAGE_SIZE])
            self.pool.free(slots)
        self.backend = FaultingRecorder(backend, faults)
        self.group = CountingGroup(group)
        self.controller = CacheController(
            self.backend,
            self.pool,
            storage_config=self.config,
            rank_group=self.group,
            settings=ControllerSettings(prefetch_threshold=0, register_host_pools=not stored_pages),
            **settings,
        )


def make_ranks(stored=(PAGES, PAGES), faults=(None, None), **settings):
    groups = ThreadRankGroup.create(2, timeout=20)
    store = memory_backend().store
    return [Rank(rank, groups[rank], store, stored[rank], faults=faults[rank], **settings) for rank in range(2)]


def close(ranks):
    for rank in ranks:
        assert rank.controller.close()


@pytest.mark.clause("RANK-1", "RANK-2", "RANK-3")
@pytest.mark.parametrize("stored", [(300, 300), (300, 200), (300, 0), (100, 300)])
def test_ranks_agree_on_the_minimum_hit_and_emit_the_same_acks(stored, threads_before):
    ranks = make_ranks(stored)
    operations = [rank.controller.prefetch(keys=KEYS) for rank in ranks]
    wait_all(*operations)
    close(ranks)
    agreed = min(stored)
    for rank, operation in zip(ranks, operations):
        assert operation.hit_pages == agreed  # RANK-1
        assert len(operation.agreed_keys) == agreed and rank.pool.used_pages() == agreed  # RANK-2
        reads = rank.backend.calls_of("batch_get_v1")
        assert sum(len(call.keys) for call in reads) == agreed
        check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE)
        check_frees(rank.pool, operation.loaded_host_indices)
        assert rank.group.counts["hit_query"] == 1  # exactly once, also for a miss
    assert operations[0].acks == operations[1].acks  # RANK-3
    assert ranks[0].group.counts == ranks[1].group.counts


@pytest.mark.clause("RANK-3", "RANK-4", "CTL-4", "CTL-11")
def test_a_failing_rank_freezes_every_rank(threads_before):
    ranks = make_ranks(faults=(None, {"batch_get_v1": on_call(1, raising())}))
    operations = [rank.controller.prefetch(keys=KEYS) for rank in ranks]
    wait_all(*operations)
    close(ranks)
    for rank, operation in zip(ranks, operations):
        check_prefetch_acks(operation, PAGE_SIZE, STORAGE_BATCH_SIZE)
        assert [ack.tokens for ack in operation.progress_acks] == [256, 256, 256]
        assert operation.final_ack.tokens == 256
        check_frees(rank.pool, operation.loaded_host_indices)
    assert len(ranks[0].backend.calls_of("batch_get_v1")) == 2  # stopped at the same agreed slice
    assert operations[0].acks[:-1] == operations[1].acks[:-1]


@pytest.mark.clause("RANK-4", "CTL-9")
def test_termination_on_one_rank_terminates_all(threads_before):
    holder = {}

    def terminate_then_read(call, run):
        holder["operation"].terminate()
        return run()

    ranks = make_ranks(faults=({"batch_get_v1": on_call(0, terminate_then_read)}, None))
    holder["operation"] = ranks[0].controller.prefetch(keys=KEYS)
    other = ranks[1].controller.prefetch(keys=KEYS)
    wait_all(holder["operation"], other)
    close(ranks)
    for operation in (holder["operation"], other):
        assert [ack.tokens for ack in operation.progress_acks] == [256, 256, 256]
    assert len(ranks[0].backend.calls_of("batch_get_v1")) == 1
    assert len(ranks[1].backend.calls_of("batch_get_v1")) <= 2  # may have read one slice more, then freed it
    check_frees(ranks[1].pool, other.loaded_host_indices)


@pytest.mark.clause("CTL-8", "RANK-3")
@pytest.mark.parametrize("fail_slice,completed", [(None, PAGES), (1, 128)])
def test_replicated_kv_is_written_by_rank_zero_and_acked_by_all(fail_slice, completed, threads_before):
    faults = {"batch_set_v1": on_call(fail_slice, raising())} if fail_slice is not None else None
    ranks = make_ranks(stored=(0, 0), faults=(faults, None), mla=True)
    backups = [rank.controller.backup(KEYS, rank.pool.alloc(PAGES)) for rank in ranks]
    wait_all(*backups)
    close(ranks)
    assert ranks[0].backend.calls_of("batch_set_v1") and not ranks[1].backend.calls_of("batch_set_v1")
    assert [backup.completed_tokens for backup in backups] == [completed * PAGE_SIZE] * 2
    assert backups[1].wrote_kv is False and backups[0].wrote_kv is True


@pytest.mark.clause("RANK-1", "RANK-3")
def test_many_operations_keep_the_channels_in_step(threads_before):
    ranks = make_ranks(stored=(PAGES, 150))
    operations = [[rank.controller.prefetch(keys=KEYS[:length]) for length in (5, 150, 0, 300)] for rank in ranks]
    wait_all(*operations[0], *operations[1])
    close(ranks)
    for first, second in zip(*operations):
        assert first.acks == second.acks
    assert ranks[0].group.counts == ranks[1].group.counts
    assert ranks[0].group.counts["hit_query"] == 4
