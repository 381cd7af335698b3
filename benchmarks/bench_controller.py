"""The reference controller's throughput against plain torch copies of the same bytes, measured in one run.

Backup then prefetch of PAGES pages of 64 KiB (16 tokens x 8 layers x K/V x
2 heads x 64 dims, float16) through ``CacheController`` with the in-memory
backend, against:

  backup    vs  one ``copy_`` of the pool's bytes into a separate buffer (what storing them costs at least)
  prefetch  vs  one ``copy_`` of the same bytes back into a pool buffer

and against the same backend calls made directly, slice by slice, without
the controller (what the controller itself adds: threads, validation, acks);
and the L2 -> L1 page copier (``PageCopier.load``, a CPU device buffer here)
against one ``copy_`` of the same bytes, for pages in one run and scattered.

Ratios are throughput ratios: controller bytes/s divided by baseline bytes/s
(1.0 = as fast as the raw copy; the target is at least 0.8).

Run: python benchmarks/bench_controller.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController, PageCopier
from hicache_reference.backends.memory import MemoryBackend
from hicache_reference.settings import ControllerSettings

PAGE_SIZE = 16
LAYERS = 8
HEADS = 2
HEAD_DIM = 64
BATCH = 128


def make_pool(pages: int) -> HostPagePool:
    return HostPagePool(pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, kind="mha", pin_memory=False)


def best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def keys_for(pages: int, round_index: int) -> list[str]:
    return [f"{round_index:08x}{page:056x}" for page in range(pages)]


def direct_round(writer, reader, source_slots, target, keys, pages) -> tuple[float, float]:
    """The same backend calls as the controller makes, slice by slice, on this thread."""
    start = time.perf_counter()
    for first in range(0, pages, BATCH):
        writer.batch_set_v1(keys[first : first + BATCH], source_slots[first * PAGE_SIZE : (first + BATCH) * PAGE_SIZE])
    backup = time.perf_counter() - start
    slots = target.alloc(pages)
    start = time.perf_counter()
    for first in range(0, pages, BATCH):
        reader.batch_exists(keys[first : first + BATCH])
    for first in range(0, pages, BATCH):
        reader.batch_get_v1(keys[first : first + BATCH], slots[first * PAGE_SIZE : (first + BATCH) * PAGE_SIZE])
    prefetch = time.perf_counter() - start
    target.free(slots)
    return backup, prefetch


def measure_controller(pages: int, repeat: int) -> dict[str, float]:
    config = HiCacheStorageConfig.single_rank()
    source, target = make_pool(pages), make_pool(pages)
    source.kv_buffer.copy_(torch.randn(source.kv_buffer.shape).to(source.dtype))
    baseline_store = torch.empty_like(source.kv_buffer)
    baseline_store.copy_(source.kv_buffer)  # touched once, so the timed copies never pay its page faults
    writer = MemoryBackend(config, {})
    reader = MemoryBackend(config, {"store": writer.store})
    source_slots = source.alloc(pages)
    names = (
        "backup",
        "copy_to_store",
        "copy_to_store_one_thread",
        "prefetch",
        "copy_back",
        "copy_back_one_thread",
        "direct_backup",
        "direct_prefetch",
    )
    times: dict[str, list[float]] = {name: [] for name in names}

    def timed(name: str, function) -> Any:
        start = time.perf_counter()
        value = function()
        times[name].append(time.perf_counter() - start)
        return value

    with (
        CacheController(writer, source, storage_config=config) as backup_side,
        CacheController(
            reader, target, storage_config=config, settings=ControllerSettings(prefetch_threshold=0)
        ) as prefetch_side,
    ):
        for round_index in range(repeat):  # every way alternates with the others, so noise hits all alike
            keys = keys_for(pages, 2 * round_index)  # new keys each round: every write is a real write
            backup = timed("backup", lambda: _waited(backup_side.backup(keys, source_slots)))
            if backup.completed_tokens != pages * PAGE_SIZE:
                raise RuntimeError(f"backup stopped at {backup.completed_tokens} tokens")
            timed("copy_to_store", lambda: baseline_store.copy_(source.kv_buffer))
            timed("copy_to_store_one_thread", lambda: one_thread(lambda: baseline_store.copy_(source.kv_buffer)))
            operation = timed("prefetch", lambda: _waited(prefetch_side.prefetch(keys=keys)))
            if operation.loaded_tokens != pages * PAGE_SIZE:
                raise RuntimeError(f"prefetch loaded {operation.loaded_tokens} tokens")
            loaded = operation.loaded_host_indices
            if round_index == 0 and not torch.equal(
                target.kv_buffer[:, :, loaded], source.kv_buffer[:, :, source_slots]
            ):
                raise RuntimeError("prefetched bytes differ from the backed-up bytes")
            target.free(loaded)
            timed("copy_back", lambda: target.kv_buffer.copy_(baseline_store))
            timed("copy_back_one_thread", lambda: one_thread(lambda: target.kv_buffer.copy_(baseline_store)))
            writer.clear()
            direct = direct_round(writer, reader, source_slots, target, keys_for(pages, 2 * round_index + 1), pages)
            times["direct_backup"].append(direct[0])
            times["direct_prefetch"].append(direct[1])
            writer.clear()
    result = {name: min(values) for name, values in times.items()}
    result["bytes"] = source.kv_buffer.numel() * source.element_size
    return result


def one_thread(function) -> Any:
    """Run ``function`` with torch limited to one thread (the controller's IO runs on one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return function()
    finally:
        torch.set_num_threads(threads)


def _waited(operation: Any) -> Any:
    operation.wait()
    return operation


def measure_copier(pages: int, repeat: int) -> dict[str, float]:
    pool = make_pool(2 * pages)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape).to(pool.dtype))
    copier = PageCopier.allocate(pool, pages, device="cpu")
    page_slots = torch.arange(PAGE_SIZE)

    def slots(page_list: torch.Tensor) -> torch.Tensor:
        return (page_list[:, None] * PAGE_SIZE + page_slots[None, :]).reshape(-1)

    contiguous_host = slots(torch.arange(pages))
    scattered_host = slots(torch.randperm(2 * pages)[:pages])
    device_slots = slots(torch.arange(pages))
    source = pool.kv_buffer.narrow(2, 0, pages * PAGE_SIZE)
    baseline = best(lambda: copier.device_buffer.copy_(source), repeat)
    return {
        "bytes": copier.device_buffer.numel() * copier.device_buffer.element_size(),
        "baseline": baseline,
        "one run": best(lambda: copier.load(contiguous_host, device_slots).wait(), repeat),
        "scattered": best(lambda: copier.load(scattered_host, device_slots).wait(), repeat),
    }


def gigabytes_per_second(size: int, seconds: float) -> float:
    return size / seconds / 1e9


def run(quick: bool = False) -> dict:
    """Measure everything; return GB/s and the ratios (throughput ratios, 1.0 = as fast as the baseline)."""
    pages, repeat = (512, 3) if quick else (4096, 5)
    result = measure_controller(pages, repeat)
    size = result["bytes"]
    figures: dict = {"pages": pages, "repeats": repeat, "torch_threads": torch.get_num_threads()}
    for name, baseline in (("backup", "copy_to_store"), ("prefetch", "copy_back")):
        mine = gigabytes_per_second(size, result[name])
        theirs = gigabytes_per_second(size, result[baseline])
        single = gigabytes_per_second(size, result[f"{baseline}_one_thread"])
        direct = gigabytes_per_second(size, result[f"direct_{name}"])
        figures[name] = {
            "gb_s": mine,
            "torch_copy_gb_s": theirs,
            "one_thread_copy_gb_s": single,
            "direct_gb_s": direct,
            "over_torch_copy": mine / theirs,
            "over_one_thread_copy": mine / single,
            "over_direct": mine / direct,
            "direct_over_torch_copy": direct / theirs,
        }
    copier = measure_copier(pages, repeat)
    base = gigabytes_per_second(copier["bytes"], copier["baseline"])
    for name in ("one run", "scattered"):
        mine = gigabytes_per_second(copier["bytes"], copier[name])
        figures[f"page_copier_{name.replace(' ', '_')}"] = {
            "gb_s": mine,
            "torch_copy_gb_s": base,
            "over_torch_copy": mine / base,
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="512 pages, 3 repeats")
    figures = run(parser.parse_args().quick)
    page_bytes = PAGE_SIZE * LAYERS * 2 * HEADS * HEAD_DIM * 2
    print(
        f"{figures['pages']} pages of {page_bytes // 1024} KiB ({figures['pages'] * page_bytes / 2**20:.0f} MiB), "
        f"best of {figures['repeats']}; torch copy on {figures['torch_threads']} threads"
    )
    for name in ("backup", "prefetch"):
        row = figures[name]
        print(
            f"controller {name:9s} {row['gb_s']:6.2f} GB/s   torch copy {row['torch_copy_gb_s']:6.2f} GB/s   "
            f"ratio {row['over_torch_copy']:5.2f}x   one-thread copy {row['one_thread_copy_gb_s']:6.2f} GB/s   "
            f"ratio {row['over_one_thread_copy']:5.2f}x   direct backend calls {row['direct_gb_s']:6.2f} GB/s   "
            f"ratio {row['over_direct']:5.2f}x"
        )
    for name in ("one run", "scattered"):
        row = figures[f"page_copier_{name.replace(' ', '_')}"]
        print(
            f"PageCopier.load ({name:9s}) {row['gb_s']:6.2f} GB/s   torch copy {row['torch_copy_gb_s']:6.2f} GB/s   "
            f"ratio {row['over_torch_copy']:5.2f}x"
        )


if __name__ == "__main__":
    main()
