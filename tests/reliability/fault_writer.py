"""Writes pages with the file backend for ever (until killed): ``python -m tests.reliability.fault_writer ROOT``.

Page i holds the float16 value ``i % 1000`` in every element, under the key ``key_of(i)``; the fault tests kill
it with SIGKILL in the middle and check what it left.
"""

from __future__ import annotations

import hashlib
import sys

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend

PAGE_SIZE = 4
BATCH = 16


def key_of(number: int) -> str:
    return hashlib.sha256(f"fault-{number}".encode()).hexdigest()


def make_pool() -> HostPagePool:
    """A BATCH-page MHA host pool (fp16, layer first, not pinned)."""
    return HostPagePool(BATCH, PAGE_SIZE, layer_num=2, head_num=2, head_dim=64, pin_memory=False)


def backend_at(root: str) -> FileBackend:
    backend = FileBackend(HiCacheStorageConfig.single_rank(model_name="faults"), {"path": root})
    backend.register_mem_pool_host(make_pool())
    return backend


def fill(pool: HostPagePool, page: int, value: float) -> None:
    shape = pool.get_data_page(page * PAGE_SIZE, flat=True).shape
    pool.set_from_flat_data_page(page * PAGE_SIZE, torch.full(shape, value, dtype=torch.float16))


def main(root: str) -> None:
    backend = backend_at(root)
    pool = backend.mem_pool_host
    number = 0
    print("writing", flush=True)
    while True:
        for page in range(BATCH):
            fill(pool, page, float((number + page) % 1000))
        keys = [key_of(number + page) for page in range(BATCH)]
        backend.batch_set_v1(keys, torch.arange(BATCH * PAGE_SIZE))
        number += BATCH


if __name__ == "__main__":
    main(sys.argv[1])
