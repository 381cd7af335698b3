"""The file backend's v1 calls against plain os.write / os.readv of the same bytes, measured in one run.

N pages of 64 KiB (16 tokens x 2 components x 4 layers x 4 heads x 64, float16)
move between a host page pool and files under one directory:

  write  batch_set_v1 in slices of 128 pages   vs  open + os.write + close per page, from prepared bytes
  read   batch_get_v1 in slices of 128 pages   vs  open + os.readv + close per page, into one reused
                                                   buffer, and into the pool's own page ranges

The backend does more per page than the baseline: a copy out of the host pool
(get_data_page), a temporary file and an os.replace per write (atomicity,
BE-7); an object name, an fstat size check and the page's byte ranges from
get_page_buffer_meta per read (BE-13, BE-15), which then lands straight in
those ranges. Each figure is the best of several rounds, the ways alternating
round by round so that all meet the same machine load; reads run against the
page cache. Target: the backend moves at least 0.7x the baseline's bytes per
second.

Run: python benchmarks/bench_file_backend.py [--quick] [--pages N] [--layout L] [--directory PATH]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import tempfile
import time
from typing import Callable

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend, tensor_bytes
from hicache_spec import STORAGE_BATCH_SIZE

PAGE_SIZE, LAYERS, HEADS, HEAD_DIM = 16, 4, 4, 64
"""Pool geometry: 16 tokens x (2 x 4 x 4 x 64 x 2 bytes) = 64 KiB per page."""


def make_pool(pages: int, layout: str = "page_first") -> HostPagePool:
    pool = HostPagePool(pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, dtype=torch.float16, kind="mha",
                        layout=layout, pin_memory=False)
    pool.kv_buffer.normal_()
    return pool


def measure(pages: int, rounds: int, directory: str, layout: str = "page_first") -> dict[str, float]:
    """Return bytes per second of each way; every write round writes new files, as a backup writes new pages."""
    writer_pool, reader_pool = make_pool(pages, layout), make_pool(pages, layout)
    page_bytes = writer_pool.page_bytes
    slots = torch.arange(pages * PAGE_SIZE, dtype=torch.int64)
    slices = [(start, min(start + STORAGE_BATCH_SIZE, pages)) for start in range(0, pages, STORAGE_BATCH_SIZE)]
    backend = FileBackend(HiCacheStorageConfig.single_rank(), {"path": os.path.join(directory, "backend")})
    reader = FileBackend(HiCacheStorageConfig.single_rank(), {"path": os.path.join(directory, "backend")})
    staged_reader = FileBackend(HiCacheStorageConfig.single_rank(), {"path": os.path.join(directory, "backend")})
    staged_reader.reads_into_ranges = False  # the fallback: a staging buffer, then a copy into the host slots
    backend.register_mem_pool_host(writer_pool)
    reader.register_mem_pool_host(reader_pool)
    staged_reader.register_mem_pool_host(reader_pool)
    plain_directory = os.path.join(directory, "plain")
    os.makedirs(plain_directory, exist_ok=True)
    prepared = [tensor_bytes(writer_pool.get_data_page(index * PAGE_SIZE)) for index in range(pages)]
    buffer = memoryview(bytearray(page_bytes))
    rounds_written = [0]

    def keys_of(round_number: int) -> list[str]:
        return [f"{round_number:08x}{index:056x}" for index in range(pages)]

    def backend_write() -> None:
        keys = keys_of(rounds_written[0])
        for start, end in slices:
            if not all(backend.batch_set_v1(keys[start:end], slots[start * PAGE_SIZE : end * PAGE_SIZE])):
                raise RuntimeError("batch_set_v1 failed")

    def read_with(instance: FileBackend) -> Callable[[], None]:
        def read() -> None:
            keys = keys_of(0)
            for start, end in slices:
                if not all(instance.batch_get_v1(keys[start:end], slots[start * PAGE_SIZE : end * PAGE_SIZE])):
                    raise RuntimeError("batch_get_v1 failed")
        return read

    def plain_write() -> None:
        for key, data in zip(keys_of(rounds_written[0]), prepared):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(descriptor, data)
            os.close(descriptor)

    def plain_read() -> None:
        for key in keys_of(0):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_RDONLY)
            if os.readv(descriptor, [buffer]) != page_bytes:
                raise RuntimeError("short read")
            os.close(descriptor)

    # Each page's byte ranges in the reader pool, as writable views: readv can scatter straight into them.
    pointers, sizes = reader_pool.get_page_buffer_meta(slots)
    per_page = reader_pool.ranges_per_page()
    ranges = [
        [memoryview((ctypes.c_char * size).from_address(pointer)).cast("B")
         for pointer, size in zip(pointers[page * per_page : (page + 1) * per_page],
                                  sizes[page * per_page : (page + 1) * per_page])]
        for page in range(pages)
    ]

    def plain_read_into_pool() -> None:
        for key, page_ranges in zip(keys_of(0), ranges):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_RDONLY)
            if os.readv(descriptor, page_ranges) != page_bytes:
                raise RuntimeError("short read")
            os.close(descriptor)

    def remove_round(round_number: int) -> None:
        for key in keys_of(round_number):
            os.unlink(os.path.join(plain_directory, key))
        backend_directory = os.path.join(directory, "backend", backend.namespace, "kv")
        for key in keys_of(round_number):
            os.unlink(os.path.join(backend_directory, key))

    # Writes alternate between the two ways, round by round, so both meet the same page-cache state;
    # each round's files are removed (untimed) before the next, except round 0, which the reads use.
    write_times: dict[str, list[float]] = {"plain write": [], "backend write": []}
    for round_number in range(rounds + 1):
        rounds_written[0] = round_number
        for name, write in (("plain write", plain_write), ("backend write", backend_write)):
            start = time.perf_counter()
            write()
            write_times[name].append(time.perf_counter() - start)
        if round_number:
            remove_round(round_number)
    total = pages * page_bytes
    results = {name: total / min(times[1:] or times) for name, times in write_times.items()}
    # Reads: each way first runs once into a zeroed pool and is checked, then the ways alternate round by round.
    read_ways = (("plain read", plain_read), ("plain read into pool", plain_read_into_pool),
                 ("backend read", read_with(reader)), ("backend read, staged", read_with(staged_reader)))
    for name, function in read_ways:
        reader_pool.kv_buffer.zero_()
        function()
        if name != "plain read" and not torch.equal(reader_pool.kv_buffer, writer_pool.kv_buffer):
            raise RuntimeError(f"{name}: the pages read back differ from the pages written")
    read_times: dict[str, list[float]] = {name: [] for name, _ in read_ways}
    for _ in range(rounds):
        for name, function in read_ways:
            start = time.perf_counter()
            function()
            read_times[name].append(time.perf_counter() - start)
    results.update({name: total / min(times) for name, times in read_times.items()})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pages and rounds")
    parser.add_argument("--pages", type=int, default=None, help="pages per run (default 512, quick 128)")
    parser.add_argument("--layout", choices=("page_first", "layer_first"), default="page_first",
                        help="host pool layout: 2 byte ranges per page (page_first) or 8 (layer_first)")
    parser.add_argument("--directory", default=None, help="where to write (default: a temporary directory)")
    arguments = parser.parse_args()
    pages = arguments.pages or (128 if arguments.quick else 512)
    rounds = 3 if arguments.quick else 7
    directory = tempfile.mkdtemp(prefix="hicache-bench-", dir=arguments.directory)
    try:
        results = measure(pages, rounds, directory, arguments.layout)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    gib = 1024 ** 3
    print(f"{pages} pages x 64 KiB = {pages * 64 / 1024:.1f} MiB, {arguments.layout}, best of {rounds} rounds, "
          f"in {directory}")
    for name in ("plain write", "backend write", "plain read", "plain read into pool", "backend read",
                 "backend read, staged"):
        print(f"{name:20s} {results[name] / gib:7.2f} GiB/s")
    read, staged = results["backend read"], results["backend read, staged"]
    print(f"write ratio (backend / plain): {results['backend write'] / results['plain write']:.2f}x  (target >= 0.7x)")
    print(f"read ratio  (backend / plain): {read / results['plain read']:.2f}x  (target >= 0.7x)"
          f"  staged: {staged / results['plain read']:.2f}x")
    print(f"read ratio  (backend / plain read into the pool's pages): {read / results['plain read into pool']:.2f}x"
          f"  staged: {staged / results['plain read into pool']:.2f}x")


if __name__ == "__main__":
    main()
