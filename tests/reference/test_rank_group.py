"""Rank groups: one rank, ranks as threads, and two processes on gloo (RANK-1, RANK-3).

The two-process run starts two interpreters that each run a controller
through ``TorchDistributedRankGroup``; rank 1's backend holds fewer pages (or
none), and both must agree on the minimum and emit the same acks, so nothing
hangs. Every wait is bounded and the children are killed on failure.
"""

from __future__ import annotations

import json
import threading

import pytest

from hicache_reference import LocalRankGroup, RankAgreementError, RankGroup, ThreadRankGroup
from tests.reference.rank_processes import run_rank_processes


def test_local_group_is_the_identity():
    group = LocalRankGroup()
    assert isinstance(group, RankGroup)
    assert (group.rank, group.world_size) == (0, 1)
    assert group.all_reduce_min(7) == 7 and group.channel("x").all_reduce_min(3) == 3


@pytest.mark.clause("RANK-1")
def test_thread_group_reduces_min_per_channel():
    groups = ThreadRankGroup.create(3, timeout=10)
    results = {}

    def run(group):
        channel = group.channel("hits")
        results[group.rank] = [channel.all_reduce_min(10 + group.rank * value) for value in (1, -1, 0)]

    threads = [threading.Thread(target=run, args=(group,)) for group in groups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {rank: [10, 8, 10] for rank in range(3)}


def test_thread_group_times_out_instead_of_hanging():
    groups = ThreadRankGroup.create(2, timeout=0.2)
    with pytest.raises(RankAgreementError, match="not every rank joined within 0.2 s"):
        groups[0].all_reduce_min(1)
    with pytest.raises(RankAgreementError):  # the channel stays broken for the other rank too
        groups[1].all_reduce_min(1)


def test_thread_group_size_is_checked():
    with pytest.raises(ValueError, match=r"ThreadRankGroup.world_size: must be an int >= 1 \(got 0\)"):
        ThreadRankGroup.create(0)


def run_two_ranks(stored: tuple[int, int]) -> list[dict]:
    outputs = run_rank_processes("tests.reference.rank_worker", [[str(pages)] for pages in stored], timeout=50)
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


@pytest.mark.clause("RANK-1", "RANK-2", "RANK-3", "CTL-5", "CTL-6")
@pytest.mark.parametrize("stored", [(300, 200), (300, 0)])
def test_two_processes_on_gloo_agree(stored):
    first, second = run_two_ranks(stored)
    assert (first["rank"], second["rank"]) == (0, 1) and first["backend"] == "gloo"
    agreed = min(stored)
    for result in (first, second):
        assert result["hit_pages"] == agreed
        assert result["backup_completed"] == agreed * result["page_size"]
        assert result["acks"][-1]["kind"] == "final"
    assert first["acks"] == second["acks"]
    progress = [ack for ack in first["acks"] if ack["kind"] == "progress"]
    assert len(progress) == (0 if agreed == 0 else -(-agreed // 128))
