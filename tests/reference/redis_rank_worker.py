"""One TP rank of a two-process run sharing one Redis: ``python -m tests.reference.redis_rank_worker RANK PORT SPEC``.

SPEC is a JSON object: ``extra`` (the backend's extra config), ``model_name``,
``backend`` ("RedisBackend" or the name of a planted class in this module) and
``scenarios``, a list of ``{"name", "replicated", "stored": [pages of rank 0, pages of rank 1]}``.

Per scenario the rank backs up its first ``stored[rank]`` pages through a
``CacheController`` on a gloo ``TorchDistributedRankGroup``, then prefetches
the whole chain and checks every loaded page against the bytes it expects.
With ``replicated`` (``is_mla_model``) both ranks hold the same data and only
rank 0 writes (CTL-8); otherwise each rank holds its own data under its own
namespace. The result of every scenario is printed as one JSON line.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as distributed

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController, TorchDistributedRankGroup
from hicache_reference.backends.redis_backend import RedisBackend
from hicache_reference.settings import ControllerSettings
from tests.reference.backend_checks import page_keys

PAGE_SIZE = 4
PAGES = 300
"""Three slices: 128, 128 and 44 pages."""


class ReplicatedKvNotShared(RedisBackend):
    """Keeps the TP rank in the namespace even for replicated KV: rank 1 never finds what rank 0 wrote."""

    def __init__(self, storage_config: Any = None, extra_config: Any = None) -> None:
        super().__init__(storage_config, extra_config)
        self.namespace = self.namespace.replace("tp-shared", f"tp{storage_config.tp_rank}")


BACKENDS = {"RedisBackend": RedisBackend, "ReplicatedKvNotShared": ReplicatedKvNotShared}


def run_scenario(rank: int, group: TorchDistributedRankGroup, spec: dict, scenario: dict) -> dict:
    replicated = scenario["replicated"]
    config = HiCacheStorageConfig(
        tp_rank=rank,
        tp_size=2,
        pp_rank=0,
        pp_size=1,
        attn_cp_rank=0,
        attn_cp_size=1,
        is_mla_model=replicated,
        enable_storage_metrics=True,
        is_page_first_layout=False,
        model_name=f"{spec['model_name']}-{scenario['name']}",
    )
    backend = BACKENDS[spec["backend"]](config, spec["extra"])
    pool = HostPagePool(
        page_count=2 * PAGES,
        page_size=PAGE_SIZE,
        layer_num=2,
        head_num=1,
        head_dim=8,
        kind="mla" if replicated else "mha",
        pin_memory=False,
    )
    seed = 11 if replicated else 11 + rank  # replicated KV: the same bytes on every rank
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape, generator=torch.Generator().manual_seed(seed)))
    slots = pool.alloc(PAGES)
    assert slots is not None
    expected = [pool.get_data_page(int(start)) for start in slots[::PAGE_SIZE]]
    keys = page_keys(PAGES, start=5000)
    stored = scenario["stored"][rank]
    with CacheController(
        backend, pool, storage_config=config, rank_group=group, settings=ControllerSettings(prefetch_threshold=0)
    ) as controller:
        backup = controller.backup(keys[:stored], slots[: stored * PAGE_SIZE])
        backup_done = backup.wait(30)  # agreed across ranks: the writer has finished when this returns
        operation = controller.prefetch(keys=keys)
        prefetch_done = operation.wait(30)
        loaded = operation.loaded_host_indices
        wrong_pages = sum(
            not torch.equal(pool.get_data_page(int(loaded[index * PAGE_SIZE])), expected[index])
            for index in range(loaded.numel() // PAGE_SIZE)
        )
        errors = list(controller.internal_errors)
    group.all_reduce_min(0)  # every rank has read before anyone clears
    backend.clear()
    stats = backend.get_stats()
    assert stats is not None
    backend.close()
    return {
        "scenario": scenario["name"],
        "rank": rank,
        "backup_done": backup_done,
        "backup_completed": backup.completed_tokens,
        "wrote_kv": backup.wrote_kv,
        "prefetch_done": prefetch_done,
        "local_hit_pages": operation.local_hit_pages,
        "hit_pages": operation.hit_pages,
        "loaded_tokens": operation.loaded_tokens,
        "wrong_pages": wrong_pages,
        "acks": [ack.model_dump(mode="json") for ack in operation.acks],
        "pages_written": stats.pages_written,
        "internal_errors": errors,
    }


def main() -> None:
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    spec = json.loads(sys.argv[3])
    distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=30)
    )
    try:
        group = TorchDistributedRankGroup(timeout=timedelta(seconds=30))
        for scenario in spec["scenarios"]:
            print(json.dumps(run_scenario(rank, group, spec, scenario)), flush=True)
    finally:
        distributed.destroy_process_group()


if __name__ == "__main__":
    main()
