"""The reference backends' batch fast paths against their plain per-page path, in the same run.

Each reference backend moves pages by a named strategy
(reference/backends/strategies.py): ``PER_PAGE``, one page at a time through
the single-object primitives, the path that reads like the clauses; and the
fast paths, ``BATCHED`` (the store's batch forms: one loop per call for
files, one pipeline per call for Redis, reads straight into the pool's page
ranges) and, for memory, ``SLAB_ROWS`` (whole batches between host pages and
the store's slab rows in one foreach copy).

For every backend and strategy, N pages of 16 KiB (16 tokens x 4 layers x
K/V x 2 heads x 32 dims, float16, page_first) move between two host page
pools in slices of 128 pages:

  write   batch_set_v1 of every page (new keys each round)
  read    batch_get_v1 of every page just written
  exists  batch_exists of every page just written (the hit query)

The strategies of one backend alternate round by round, a different one
going first each round; each figure is the best of the rounds. A ratio is
the per-page path's time over the fast path's (above 1: the fast path is
faster). The vendor suite gives the same verdicts with every strategy
(tests/reference/test_strategies.py); this only measures. Redis runs
against ``$HICACHE_REDIS_URL`` when it is set, else a private
``redis-server`` from PATH (left out, saying why, when there is none).

Run: python benchmarks/bench_strategies.py [--quick]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from typing import Any, Callable, Iterator, Optional

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend, MemoryBackend, MemoryStore
from hicache_reference.backends.strategies import BATCHED, PER_PAGE, SLAB_ROWS, PageStrategy
from _args import quick_flag  # the benchmarks folder, on the path when a script or run_all runs

PAGE_SIZE, LAYERS, HEADS, HEAD_DIM = 16, 4, 2, 32
"""16 KiB pages: 16 tokens x 4 layers x K/V x 2 heads x 32 dims of float16."""
BATCH = 128
OPERATIONS = ("write", "read", "exists")


def make_pool(pages: int) -> HostPagePool:
    return HostPagePool(pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, kind="mha", layout="page_first", pin_memory=False)


def in_slices(call: Callable[[list[str], torch.Tensor], Any], keys: list[str], slots: torch.Tensor) -> float:
    """Seconds to pass ``keys`` (with their slots) to ``call`` in BATCH-page slices; raises if a page fails."""
    started = time.perf_counter()
    for first in range(0, len(keys), BATCH):
        result = call(keys[first : first + BATCH], slots[first * PAGE_SIZE : (first + BATCH) * PAGE_SIZE])
        expected = min(BATCH, len(keys) - first)
        if result != expected and result != [True] * expected:
            raise RuntimeError(f"{getattr(call, '__name__', call)} failed a page: {result!r}")
    return time.perf_counter() - started


def measure(build: Callable[[PageStrategy], tuple[Any, Any]], strategies: tuple, pages: int, rounds: int) -> dict:
    """Best seconds per strategy and operation; ``build(strategy)`` returns a (writer, reader) pair."""
    source, target = make_pool(pages), make_pool(pages)
    source.kv_buffer.normal_()
    source_slots, target_slots = source.alloc(pages), target.alloc(pages)
    pairs = {}
    for strategy in strategies:
        writer, reader = build(strategy)
        writer.register_mem_pool_host(source)
        reader.register_mem_pool_host(target)
        pairs[strategy.name] = (writer, reader)
    best = {name: dict.fromkeys(OPERATIONS, float("inf")) for name in pairs}
    names = list(pairs)
    for round_index in range(rounds):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            writer, reader = pairs[name]
            keys = [f"{uuid.uuid4().hex}{page:032x}" for page in range(pages)]
            figures = best[name]
            figures["write"] = min(figures["write"], in_slices(writer.batch_set_v1, keys, source_slots))
            figures["read"] = min(figures["read"], in_slices(reader.batch_get_v1, keys, target_slots))
            figures["exists"] = min(
                figures["exists"], in_slices(lambda chunk, _slots: reader.batch_exists(chunk), keys, target_slots)
            )
            if round_index == 0 and not torch.equal(target.kv_buffer, source.kv_buffer):
                raise RuntimeError(f"{name}: pages read back differ from the pages written")
            target.kv_buffer.zero_()
            writer.clear()
    for writer, reader in pairs.values():
        writer.close()
        reader.close()
    return best


def ratios(best: dict) -> dict:
    """Per fast path and operation: the per-page path's best time over the fast path's."""
    plain = best[PER_PAGE.name]
    return {
        f"{name} / {PER_PAGE.name}: {operation}": round(plain[operation] / figures[operation], 3)
        for name, figures in best.items()
        if name != PER_PAGE.name
        for operation in OPERATIONS
    }


def with_strategy(backend_class: type, strategy: PageStrategy) -> type:
    return type(backend_class.__name__, (backend_class,), {"strategy": strategy})


@contextlib.contextmanager
def redis_url() -> Iterator[Optional[str]]:
    """``$HICACHE_REDIS_URL``, else a private server's URL, else None (no redis-server on PATH)."""
    if os.environ.get("HICACHE_REDIS_URL"):
        yield os.environ["HICACHE_REDIS_URL"]
        return
    if shutil.which("redis-server") is None:
        yield None
        return
    from bench_redis import private_server

    with private_server() as url:
        yield url


def run(quick: bool = False) -> dict:
    """Measure every reference backend with every strategy; return the seconds and the ratios."""
    pages = 512 if quick else 2048
    rounds = 3 if quick else 7
    config = HiCacheStorageConfig.single_rank(model_name="bench-strategies")
    figures: dict = {"pages": pages, "page_bytes": 2 * LAYERS * PAGE_SIZE * HEADS * HEAD_DIM * 2, "backends": {}}

    def memory(strategy: PageStrategy) -> tuple[Any, Any]:
        store, cls = MemoryStore(), with_strategy(MemoryBackend, strategy)
        return cls(config, {"store": store}), cls(config, {"store": store})

    figures["backends"]["memory"] = measure(memory, (PER_PAGE, BATCHED, SLAB_ROWS), pages, rounds)
    where = tempfile.mkdtemp(prefix="hicache-bench-strategies-")
    try:

        def files(strategy: PageStrategy) -> tuple[Any, Any]:
            cls, extra = with_strategy(FileBackend, strategy), {"path": os.path.join(where, strategy.name)}
            return cls(config, extra), cls(config, extra)

        figures["backends"]["file"] = measure(files, (PER_PAGE, BATCHED), pages, rounds)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    with redis_url() as url:
        if url is None:
            figures["redis_left_out"] = "no redis-server on PATH and no $HICACHE_REDIS_URL"
        else:
            from hicache_reference.backends.redis_backend import RedisBackend

            def redis(strategy: PageStrategy) -> tuple[Any, Any]:
                cls = with_strategy(RedisBackend, strategy)
                extra = {"redis_url": url, "key_prefix": f"bench-strategies-{uuid.uuid4().hex[:8]}:"}
                return cls(config, extra), cls(config, extra)

            figures["backends"]["redis"] = measure(redis, (PER_PAGE, BATCHED), pages, rounds)
    figures["ratios"] = {
        f"{backend} {name}": value
        for backend, best in figures["backends"].items()
        for name, value in ratios(best).items()
    }
    return figures


def main() -> None:
    quick = quick_flag(__doc__, "fewer pages and rounds")
    figures = run(quick)
    size = figures["page_bytes"] // 1024
    print(f"{figures['pages']} pages of {size} KiB, slices of {BATCH}; best of the rounds, seconds")
    for backend, best in figures["backends"].items():
        for name, seconds in best.items():
            shown = "  ".join(f"{operation} {seconds[operation]:.4f}" for operation in OPERATIONS)
            print(f"  {backend:<7} {name:<10} {shown}")
    if "redis_left_out" in figures:
        print(f"  redis left out: {figures['redis_left_out']}")
    print("per-page time over the fast path's (above 1: the fast path is faster)")
    for name, value in figures["ratios"].items():
        print(f"  {name}: {value:.2f}x")


if __name__ == "__main__":
    main()
