"""The memory backend's throughput against the number of pages, beside a torch copy of the same bytes.

For N pages of 16 KiB (N = 1,024 … 65,536; ``--quick``: 1,024 and 4,096),
one backend writes N host pages in 128-page ``batch_set_v1`` slices into a
fresh private store, and a second one on the same store reads them back in
128-page ``batch_get_v1`` slices into another pool; the baseline is one
``copy_`` of the same bytes between two buffers, in the same round (torch's
intra-op threads, as many as it has; the backend copies on the calling
thread for reads). Each figure is the best of the rounds; the first round
also compares the bytes read with the bytes written.

Flat curves mean the per-page cost does not grow with the store: slab rows
are reused, name lookups are dict lookups, nothing walks the store.

Run: ``python benchmarks/bench_memory_scaling.py`` (``--quick``). ``run()``
returns the figures for ``benchmarks/run_all.py``.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends.memory import MemoryBackend, MemoryStore
from _args import quick_flag  # the benchmarks folder, on the path when a script or run_all runs

PAGE_SIZE, LAYERS, HEADS, HEAD_DIM = 16, 4, 2, 32
"""16 KiB pages: 16 tokens x 4 layers x K/V x 2 heads x 32 dims of float16."""
BATCH = 128
PAGE_COUNTS = (1024, 4096, 16384, 65536)
QUICK_PAGE_COUNTS = (1024, 4096)


def make_pool(pages: int) -> HostPagePool:
    return HostPagePool(pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, kind="mha", pin_memory=False)


def timed_slices(method: Callable[..., list], keys: list[str], slots: torch.Tensor, failure: str) -> float:
    """Seconds to move ``keys`` through ``method`` (batch_set_v1 or batch_get_v1) in BATCH-page slices."""
    started = time.perf_counter()
    for first in range(0, len(keys), BATCH):
        if not all(method(keys[first : first + BATCH], slots[first * PAGE_SIZE : (first + BATCH) * PAGE_SIZE])):
            raise RuntimeError(failure)
    return time.perf_counter() - started


def measure(pages: int, rounds: int) -> dict:
    """GB/s of the backend's writes and reads and of the torch copy, for ``pages`` pages."""
    config = HiCacheStorageConfig.single_rank()
    source, target = make_pool(pages), make_pool(pages)
    source.kv_buffer.normal_()
    copy_target = torch.empty_like(source.kv_buffer)
    copy_target.copy_(source.kv_buffer)  # touched once, as the store's slabs are after the first round
    store = MemoryStore()
    writer, reader = MemoryBackend(config, {"store": store}), MemoryBackend(config, {"store": store})
    writer.register_mem_pool_host(source)
    reader.register_mem_pool_host(target)
    source_slots, target_slots = source.alloc(pages), target.alloc(pages)
    best = {"write": float("inf"), "read": float("inf"), "copy": float("inf")}
    for round_index in range(rounds):
        keys = [f"{round_index:08x}{page:056x}" for page in range(pages)]
        best["write"] = min(best["write"], timed_slices(writer.batch_set_v1, keys, source_slots, "a write failed"))
        best["read"] = min(best["read"], timed_slices(reader.batch_get_v1, keys, target_slots, "a read missed"))
        if round_index == 0 and not torch.equal(target.kv_buffer, source.kv_buffer):
            raise RuntimeError("pages read back differ from the pages written")
        started = time.perf_counter()
        copy_target.copy_(source.kv_buffer)
        best["copy"] = min(best["copy"], time.perf_counter() - started)
        writer.clear()
    size = source.kv_buffer.numel() * source.element_size
    rates = {name: size / seconds / 1e9 for name, seconds in best.items()}
    return {
        "write_gb_s": rates["write"],
        "read_gb_s": rates["read"],
        "torch_copy_gb_s": rates["copy"],
        "write_over_copy": rates["write"] / rates["copy"],
        "read_over_copy": rates["read"] / rates["copy"],
        "held_bytes_after_clear": store.held_bytes(),
        "bytes": size,
    }


def run(quick: bool = False) -> dict:
    """Measure every page count; return the figures keyed by page count."""
    counts = QUICK_PAGE_COUNTS if quick else PAGE_COUNTS
    rounds = 3 if quick else 4
    return {
        "page_bytes": make_pool(1).page_bytes,
        "rounds": rounds,
        "torch_threads": torch.get_num_threads(),
        "by_pages": {str(pages): measure(pages, rounds) for pages in counts},
    }


def main() -> None:
    results = run(quick_flag(__doc__, "1,024 and 4,096 pages"))
    print(
        f"memory backend, pages of {results['page_bytes']} B, best of {results['rounds']} rounds, "
        f"torch copy on {results['torch_threads']} threads"
    )
    print(f"{'pages':>7}{'write GB/s':>12}{'read GB/s':>11}{'copy GB/s':>11}{'write/copy':>12}{'read/copy':>11}")
    for pages, row in results["by_pages"].items():
        print(
            f"{pages:>7}{row['write_gb_s']:12.2f}{row['read_gb_s']:11.2f}{row['torch_copy_gb_s']:11.2f}"
            f"{row['write_over_copy']:12.2f}{row['read_over_copy']:11.2f}"
        )


if __name__ == "__main__":
    main()
