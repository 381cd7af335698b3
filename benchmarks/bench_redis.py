"""Backup and prefetch through the reference controller into Redis, against raw pipelined SET/GET, in one run.

Workload: 4,096 pages of 64 KiB (``--quick``: 1,024 pages, one repeat) on a
standalone Redis on loopback (``--url``, default ``$HICACHE_REDIS_URL`` or
redis://127.0.0.1:6390/0).

- baseline: the same page payloads, as ready-made ``bytes``, written with
  redis-py pipelines of 128 ``SET`` commands and read back with pipelines of
  128 ``GET`` (what a minimal client of the same server does);
- contract: ``CacheController.backup`` of the whole chain (32 slices of 128
  pages through ``RedisBackend.batch_set_v1``), then
  ``CacheController.prefetch`` of it (hit query, rank agreement, host
  allocation, 32 ``batch_get_v1`` slices into the host pool, acks);
- for diagnosis, the backend alone: the same 32 ``batch_set_v1`` and
  ``batch_get_v1`` calls made directly, without the controller.

Each repeat runs the three in turn (rotating which goes first), and before
each phase waits until the server has no lazily freed memory pending, so
that no phase pays for the previous one's deletions. Printed: MB/s of each
(best of the repeats) and the ratio to the baseline (target: at least 0.8).
Every loaded page is compared with its source, outside the timed part. Keys
live under a fresh prefix and are deleted afterwards (never FLUSHDB).

Run: python benchmarks/bench_redis.py [--quick] [--repeats N] [--url redis://host:port/0]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
import uuid
from typing import Callable

import redis
import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends import tensor_bytes
from hicache_reference.backends.redis_backend import RedisBackend

PAGE_SIZE = 64
"""Tokens per page; with 4 layers x 4 heads x 16 dims of float16 K and V, a page is 64 KiB."""
LAYERS, HEADS, HEAD_DIM = 4, 4, 16
PIPELINE = 128
"""Commands per baseline pipeline, as many as the controller's pages per slice."""


def page_keys(count: int) -> list[str]:
    return [hashlib.sha256(f"bench-page-{number}".encode()).hexdigest() for number in range(count)]


def delete_prefix(client: redis.Redis, prefix: str) -> None:
    batch = []
    for key in client.scan_iter(match=prefix + "*", count=1000):
        batch.append(key)
        if len(batch) >= 512:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


def settle(client: redis.Redis) -> None:
    """Wait (at most 30 s) until the server has freed everything deleted lazily."""
    deadline = time.monotonic() + 30
    while client.info("memory").get("lazyfree_pending_objects", 0) and time.monotonic() < deadline:
        time.sleep(0.01)


class Workload:
    """The pages, their keys and the host pool, shared by every phase."""

    def __init__(self, url: str, pages: int) -> None:
        self.url = url
        self.pages = pages
        self.pool = HostPagePool(2 * pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, dtype=torch.float16, kind="mha",
                                 layout="page_first", pin_memory=False)
        self.source_slots = self.pool.alloc(pages)
        self.pool.kv_buffer.copy_(torch.randn(self.pool.kv_buffer.shape, generator=torch.Generator().manual_seed(0)))
        self.payloads = [bytes(tensor_bytes(self.pool.get_data_page(int(start))))
                         for start in self.source_slots[::PAGE_SIZE]]
        self.keys = page_keys(pages)
        self.tokens = pages * PAGE_SIZE
        self.prefix = f"hicache-bench-{uuid.uuid4().hex[:8]}:"
        self.client = redis.Redis.from_url(url)

    def check_loaded(self, loaded: torch.Tensor) -> None:
        for index in range(self.pages):
            source = self.pool.get_data_page(int(self.source_slots[index * PAGE_SIZE]))
            if not torch.equal(self.pool.get_data_page(int(loaded[index * PAGE_SIZE])), source):
                raise RuntimeError(f"page {index} came back with wrong bytes")

    def backend(self) -> tuple[RedisBackend, HiCacheStorageConfig]:
        config = HiCacheStorageConfig.single_rank(model_name=f"bench-{uuid.uuid4().hex[:8]}")
        return RedisBackend(config, {"redis_url": self.url, "key_prefix": self.prefix}), config

    # ------------------------------------------------------------ phases: each returns (write s, read s)
    def raw(self) -> tuple[float, float]:
        keys = [f"{self.prefix}raw:{index}" for index in range(self.pages)]
        settle(self.client)
        started = time.perf_counter()
        for start in range(0, self.pages, PIPELINE):
            pipeline = self.client.pipeline(transaction=False)
            for index in range(start, min(start + PIPELINE, self.pages)):
                pipeline.set(keys[index], self.payloads[index])
            pipeline.execute()
        written = time.perf_counter()
        for start in range(0, self.pages, PIPELINE):
            pipeline = self.client.pipeline(transaction=False)
            for index in range(start, min(start + PIPELINE, self.pages)):
                pipeline.get(keys[index])
            if any(reply is None for reply in pipeline.execute()):
                raise RuntimeError("baseline GET missed a page it had just written")
        read = time.perf_counter()
        delete_prefix(self.client, self.prefix + "raw:")
        return written - started, read - written

    def controller(self) -> tuple[float, float]:
        backend, config = self.backend()
        settle(self.client)
        with CacheController(backend, self.pool, storage_config=config, prefetch_threshold=0) as controller:
            started = time.perf_counter()
            backup = controller.backup(self.keys, self.source_slots)
            if not backup.wait(600) or backup.completed_tokens != self.tokens:
                raise RuntimeError(f"backup incomplete: {backup.completed_tokens} of {self.tokens} tokens")
            written = time.perf_counter()
            operation = controller.prefetch(keys=self.keys)
            if not operation.wait(600) or operation.loaded_tokens != self.tokens:
                raise RuntimeError(f"prefetch incomplete: {operation.loaded_tokens} of {self.tokens} tokens")
            read = time.perf_counter()
            self.check_loaded(operation.loaded_host_indices)
            self.pool.free(operation.loaded_host_indices)
        backend.clear()
        backend.close()
        return written - started, read - written

    def backend_alone(self) -> tuple[float, float]:
        backend, _ = self.backend()
        backend.register_mem_pool_host(self.pool)
        target = self.pool.alloc(self.pages)
        settle(self.client)
        started = time.perf_counter()
        for start in range(0, self.pages, PIPELINE):
            end = min(start + PIPELINE, self.pages)
            if not all(backend.batch_set_v1(self.keys[start:end],
                                            self.source_slots[start * PAGE_SIZE:end * PAGE_SIZE])):
                raise RuntimeError("batch_set_v1 failed")
        written = time.perf_counter()
        for start in range(0, self.pages, PIPELINE):
            end = min(start + PIPELINE, self.pages)
            if not all(backend.batch_get_v1(self.keys[start:end], target[start * PAGE_SIZE:end * PAGE_SIZE])):
                raise RuntimeError("batch_get_v1 missed")
        read = time.perf_counter()
        self.check_loaded(target)
        self.pool.free(target)
        backend.clear()
        backend.close()
        return written - started, read - written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,024 pages, one repeat")
    parser.add_argument("--url", default=os.environ.get("HICACHE_REDIS_URL") or "redis://127.0.0.1:6390/0")
    parser.add_argument("--repeats", type=int, default=None)
    arguments = parser.parse_args()
    pages = 1024 if arguments.quick else 4096
    repeats = arguments.repeats or (1 if arguments.quick else 5)
    workload = Workload(arguments.url, pages)
    megabytes = pages * workload.pool.page_bytes / 1e6
    print(f"{pages} pages x {workload.pool.page_bytes // 1024} KiB = {megabytes:.0f} MB, Redis at {arguments.url}, "
          f"{repeats} repeat(s), pipelines / slices of {PIPELINE}")
    phases: dict[str, Callable[[], tuple[float, float]]] = {
        "raw": workload.raw, "controller": workload.controller, "backend": workload.backend_alone,
    }
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in phases}
    order = list(phases)
    try:
        for repeat in range(repeats):
            for name in order[repeat % 3:] + order[: repeat % 3]:
                timings[name].append(phases[name]())
    finally:
        delete_prefix(workload.client, workload.prefix)
        workload.client.close()

    def rate(name: str, which: int) -> float:
        return megabytes / min(timing[which] for timing in timings[name])

    print(f"{'':40s} {'MB/s':>7s}   ratio to raw")
    rows = [
        ("raw pipelined SET (baseline)", "raw", 0), ("backup, controller", "controller", 0),
        ("batch_set_v1 slices, backend alone", "backend", 0),
        ("raw pipelined GET (baseline)", "raw", 1), ("prefetch, controller", "controller", 1),
        ("batch_get_v1 slices, backend alone", "backend", 1),
    ]
    for label, name, which in rows:
        print(f"{label:40s} {rate(name, which):7.0f}   {rate(name, which) / rate('raw', which):5.2f}x")


if __name__ == "__main__":
    main()
