"""One rank of a two-process gloo run: ``python -m tests.reference.rank_worker RANK PORT STORED_PAGES``.

Backs up STORED_PAGES pages into its own memory backend, prefetches the whole
chain through a ``TorchDistributedRankGroup`` and prints the result as JSON.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import torch.distributed as distributed

from hicache_reference import CacheController, TorchDistributedRankGroup
from hicache_reference.settings import ControllerSettings
from tests.reference.controller_helpers import PAGE_SIZE, config, keys_for, make_pool, memory_backend

PAGES = 300


def main() -> None:
    rank, port, stored = (int(argument) for argument in sys.argv[1:4])
    distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=30)
    )
    group = TorchDistributedRankGroup(timeout=timedelta(seconds=30))
    keys = keys_for(PAGES)
    pool = make_pool()
    backend = memory_backend(tp_rank=rank, tp_size=2)
    with CacheController(
        backend,
        pool,
        storage_config=config(tp_rank=rank, tp_size=2),
        rank_group=group,
        settings=ControllerSettings(prefetch_threshold=0),
    ) as controller:
        backup = controller.backup(keys[:stored], pool.alloc(stored))  # every rank takes part, even with 0 pages
        backup.wait(30)
        operation = controller.prefetch(keys=keys)
        operation.wait(30)
    distributed.destroy_process_group()
    print(
        json.dumps(
            {
                "rank": group.rank,
                "backend": group.backend,
                "backup_completed": backup.completed_tokens,
                "hit_pages": operation.hit_pages,
                "acks": [ack.model_dump() for ack in operation.acks],
                "page_size": PAGE_SIZE,
            }
        )
    )


if __name__ == "__main__":
    main()
