"""Two TP ranks as two processes (torch.distributed, gloo) sharing one Redis through the reference controller.

- replicated KV (``is_mla_model``): only rank 0 writes, rank 1 finds and loads
  the very pages rank 0 wrote (NS-5, CTL-8);
- sharded KV: each rank writes its own pages under its own namespace; rank 1
  stores fewer pages, and both ranks agree on the smaller hit (NS-1, RANK-1,
  RANK-2).

In both, every rank emits the same acks (RANK-3), nothing loaded is wrong,
and nothing hangs: every wait is bounded and the children are killed when
the run fails. The workers run ``tests.reference.redis_rank_worker``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.reference.rank_processes import run_rank_processes
from tests.redis_support import delete_prefix, require_mode, unique_key_prefix, unique_model_name

pytestmark = pytest.mark.redis

PAGES = 300
PAGE_SIZE = 4
SCENARIOS = [
    {"name": "replicated", "replicated": True, "stored": [PAGES, PAGES]},
    {"name": "sharded", "replicated": False, "stored": [PAGES, 200]},
]
CHILD_TIMEOUT = 90
"""Seconds both ranks together may take (imports, gloo rendezvous, two scenarios)."""


def run_two_ranks(extra: dict, backend: str = "RedisBackend", scenarios: list = SCENARIOS) -> dict[str, list[dict]]:
    """Run both ranks; return scenario name → [rank 0 result, rank 1 result]. Kills the children on any failure."""
    spec = json.dumps(
        {"extra": extra, "model_name": unique_model_name("ranks"), "backend": backend, "scenarios": scenarios}
    )
    outputs = run_rank_processes("tests.reference.redis_rank_worker", [[spec]] * 2, timeout=CHILD_TIMEOUT)
    results: dict[str, list[dict]] = {}
    for out in outputs:
        for line in out.strip().splitlines():
            if line.startswith("{"):
                result = json.loads(line)
                results.setdefault(result["scenario"], []).append(result)
    return results


@pytest.fixture(scope="module")
def redis_extra() -> Any:
    extra = {**require_mode("standalone"), "key_prefix": unique_key_prefix()}
    yield extra
    delete_prefix(extra, extra["key_prefix"])


@pytest.fixture(scope="module")
def ranks(redis_extra: dict) -> dict[str, list[dict]]:
    return run_two_ranks(redis_extra)


def check_ranks_agree(pair: list[dict], agreed_pages: int) -> None:
    """RANK-1..RANK-3: both ranks finish, agree on the hit and emit identical acks; nothing loaded is wrong."""
    assert [result["rank"] for result in pair] == [0, 1]
    for result in pair:
        assert result["backup_done"] and result["prefetch_done"], "an operation did not finish in time"
        assert result["internal_errors"] == []
        assert result["hit_pages"] == agreed_pages, f"rank {result['rank']} agreed on {result['hit_pages']}"
        assert result["loaded_tokens"] == agreed_pages * PAGE_SIZE
        assert result["wrong_pages"] == 0, f"rank {result['rank']} loaded wrong bytes"
        assert result["acks"][-1]["kind"] == "final"
    assert pair[0]["acks"] == pair[1]["acks"], "the ranks emitted different acks"
    progress = [ack for ack in pair[0]["acks"] if ack["kind"] == "progress"]
    assert len(progress) == -(-agreed_pages // 128)


def check_replicated(pair: list[dict]) -> None:
    """NS-5, CTL-8: rank 0 alone writes; rank 1 finds every page and loads rank 0's bytes."""
    check_ranks_agree(pair, PAGES)
    writer, reader = pair
    assert writer["wrote_kv"] and writer["pages_written"] == PAGES
    assert not reader["wrote_kv"] and reader["pages_written"] == 0, "rank 1 wrote replicated KV"
    assert reader["local_hit_pages"] == PAGES, "rank 1 did not see the pages rank 0 wrote"


def check_sharded(pair: list[dict]) -> None:
    """NS-1, RANK-1, RANK-2: each rank sees only its own pages; both cut to the smaller hit."""
    check_ranks_agree(pair, 200)
    assert [result["local_hit_pages"] for result in pair] == [PAGES, 200], "a rank saw the other rank's pages"
    assert [result["pages_written"] for result in pair] == [PAGES, 200]


@pytest.mark.clause("NS-5", "CTL-8", "RANK-1", "RANK-3")
def test_replicated_kv_rank_zero_writes_rank_one_reads(ranks: dict) -> None:
    check_replicated(ranks["replicated"])


@pytest.mark.clause("NS-1", "RANK-1", "RANK-2", "RANK-3")
def test_sharded_kv_each_rank_its_own_pages(ranks: dict) -> None:
    check_sharded(ranks["sharded"])


@pytest.mark.clause("NS-5")
def test_replicated_check_catches_planted_bug(redis_extra: dict) -> None:
    """A backend that keeps the TP rank in replicated namespaces: rank 1 misses, the agreed hit drops to 0."""
    results = run_two_ranks(redis_extra, backend="ReplicatedKvNotShared", scenarios=SCENARIOS[:1])
    with pytest.raises(AssertionError):
        check_replicated(results["replicated"])


@pytest.mark.clause("RANK-1")
def test_agreement_check_catches_a_disagreement(ranks: dict) -> None:
    """The agreement check is not vacuous: one rank's result altered to another hit is refused."""
    pair = [dict(result) for result in ranks["sharded"]]
    pair[1]["hit_pages"] = PAGES
    with pytest.raises(AssertionError):
        check_sharded(pair)
