"""The file backend's v1 calls against plain file IO of the same pages, and against SGLang's HiCacheFile.

N pages of 64 KiB (16 tokens x 2 components x 4 layers x 4 heads x 64, float16)
move between a host page pool and files under one directory, in slices of
128 pages:

  write  batch_set_v1          vs  per page, from prepared bytes: open a temporary name + os.write + close +
                                   os.replace onto the page's name (plain write, the target's baseline);
                                   the same with os.writev of the pool's own page ranges (plain writev);
                                   open the page's name + os.write + close, no rename (bare write)
  read   batch_get_v1          vs  per page, into the pool's own page ranges: open + the size by lseek to the
                                   end and back + os.readv + close (plain read into pool, the target's
                                   baseline); the same without the size check (bare read into pool); into
                                   one reused buffer (plain read)

The plain files live at the same depth as the backend's (a directory per
namespace part and pool, NS-1..NS-5), each way's in its own directory that
holds as many files as the backend's, and the target's baselines do what the
backend's guarantees need and no more: a page is never visible half written
(BE-7: a temporary name, then a rename) and a file of the wrong size is a miss
that touches nothing (BE-13: the size known before the read). The bare ways
show what those guarantees cost.

Peer: SGLang's ``HiCacheFile`` (``batch_set_v2`` / ``batch_get_v2`` of the
same pages on the same pools) when a pinned release is importable
(``--sglang-version``, default ``$HICACHE_SGLANG_RELEASE`` or the newest
pinned release in the release cache); the output says when it is not.

Every write round writes new files (as a backup writes new pages;
HiCacheFile skips a page whose file exists); the ways alternate round by
round, a different one going first each round (the first after the previous
round's files were removed paid for their removal), and each round's files
are removed untimed. Each figure is the best of
the rounds; reads run against the page cache. Beside the wall-clock figures,
the same rounds' CPU time of the calling thread (``time.thread_time``: the
syscalls and the Python around them; everything here runs on that thread)
gives a second set of ratios that the other work on a shared machine disturbs
far less.
The target ratios are also given round by round (``paired: ...``: the median
over rounds of the baseline's time over the backend's in the same round): the
file system's speed drifts during a run (a page file's creation took 35 us in
one run here and 340 us in the next, for the backend and the baselines alike),
and ways that ran in the same round met the same phase of it.
Targets: backend >= 0.9x the plain write / plain read into the pool's pages;
>= 1.2x HiCacheFile's write and >= 2x its read.

Run: python benchmarks/bench_file_backend.py [--quick] [--pages N] [--layout L] [--directory PATH]
         [--sglang-version V|none]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable, Optional

import torch

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import FileBackend, tensor_bytes
from hicache_reference.backends.base import host_bytes
from hicache_spec import STORAGE_BATCH_SIZE

PAGE_SIZE, LAYERS, HEADS, HEAD_DIM = 16, 4, 4, 64
"""Pool geometry: 16 tokens x (2 x 4 x 4 x 64 x 2 bytes) = 64 KiB per page."""
TARGETS = {
    "write / plain write": 0.9,
    "read / plain read into pool": 0.9,
    "write / HiCacheFile write": 1.2,
    "read / HiCacheFile read": 2.0,
}
TARGETS.update({f"paired: {name}": target for name, target in list(TARGETS.items())})


def make_pool(pages: int, layout: str = "page_first") -> HostPagePool:
    pool = HostPagePool(
        pages, PAGE_SIZE, LAYERS, HEADS, HEAD_DIM, dtype=torch.float16, kind="mha", layout=layout, pin_memory=False
    )
    pool.kv_buffer.normal_()
    return pool


def load_peer(version: Optional[str]) -> tuple[Any, str]:
    """Return (SGLang's storage module or None, a line saying which release or why none)."""
    if version == "none":
        return None, "HiCacheFile peer: not run (--sglang-version none)"
    try:
        from hicache_contracts.sglang_release import cache_root, storage_module
        from hicache_spec.releases import SGLANG_RELEASES

        if version is None:
            cached = [release for release in SGLANG_RELEASES if (cache_root() / release / "sglang").is_dir()]
            if not cached:
                return None, "HiCacheFile peer: not run (no pinned SGLang release in the release cache)"
            version = cached[-1]
        module = storage_module(version, fetch=False)
        return module, f"HiCacheFile peer: SGLang {version}"
    except Exception as error:  # the peer is optional: say why and go on
        return None, f"HiCacheFile peer: not run ({type(error).__name__}: {error})"


def page_ranges(pool: HostPagePool, pages: int) -> list[list[memoryview]]:
    """Each page's byte ranges in ``pool`` as writable views, in flat-page order."""
    pointers, sizes = pool.get_page_buffer_meta(torch.arange(pages * PAGE_SIZE))
    per_page = pool.ranges_per_page()
    views = [host_bytes(pointer, size) for pointer, size in zip(pointers, sizes)]
    return [views[page * per_page : (page + 1) * per_page] for page in range(pages)]


def measure(
    pages: int, rounds: int, directory: str, layout: str = "page_first", peer: Any = None
) -> tuple[dict[str, float], dict[str, float]]:
    """Return bytes per second of each way (best round), and the paired ratios (``paired_ratios``)."""
    writer_pool, reader_pool = make_pool(pages, layout), make_pool(pages, layout)
    page_bytes = writer_pool.page_bytes
    slots = torch.arange(pages * PAGE_SIZE, dtype=torch.int64)
    slices = [(start, min(start + STORAGE_BATCH_SIZE, pages)) for start in range(0, pages, STORAGE_BATCH_SIZE)]
    root = os.path.join(directory, "backend")
    backend, reader, staged_reader = (FileBackend(HiCacheStorageConfig.single_rank(), {"path": root}) for _ in range(3))
    staged_reader.reads_into_ranges = False  # the fallback: a staging buffer, then a copy into the host slots
    backend.register_mem_pool_host(writer_pool)
    reader.register_mem_pool_host(reader_pool)
    staged_reader.register_mem_pool_host(reader_pool)
    # As deep as the backend's, and one directory per way, each holding as many files as the backend's.
    plain_directory, writev_directory, bare_directory = (
        os.path.join(directory, way, backend.namespace, "kv") for way in ("plain", "plain_writev", "bare")
    )
    for made in (plain_directory, writev_directory, bare_directory):
        os.makedirs(made, exist_ok=True)
    prepared = [tensor_bytes(writer_pool.get_data_page(index * PAGE_SIZE)) for index in range(pages)]
    buffer = memoryview(bytearray(page_bytes))
    writer_ranges, reader_ranges = page_ranges(writer_pool, pages), page_ranges(reader_pool, pages)
    current = [0]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    temporary_flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL

    def keys_of(round_number: int) -> list[str]:
        return [f"{round_number:08x}{index:056x}" for index in range(pages)]

    def backend_write() -> None:
        keys = keys_of(current[0])
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

    def published(directory: str, payloads: list, write: Callable[[int, Any], Any]) -> Callable[[], None]:
        """Per page: write ``write(descriptor, payload)`` to a temporary name, close it, rename it into place."""

        def run() -> None:
            for key, payload in zip(keys_of(current[0]), payloads):
                final = os.path.join(directory, key)
                descriptor = os.open(final + ".tmp", temporary_flags, 0o600)
                write(descriptor, payload)
                os.close(descriptor)
                os.replace(final + ".tmp", final)

        return run

    plain_write = published(plain_directory, prepared, os.write)
    plain_writev = published(writev_directory, writer_ranges, os.writev)

    def bare_write() -> None:
        for key, data in zip(keys_of(current[0]), prepared):
            descriptor = os.open(os.path.join(bare_directory, key), flags, 0o644)
            os.write(descriptor, data)
            os.close(descriptor)

    def plain_read() -> None:
        for key in keys_of(0):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_RDONLY)
            if os.readv(descriptor, [buffer]) != page_bytes:
                raise RuntimeError("short read")
            os.close(descriptor)

    def plain_read_into_pool() -> None:
        for key, parts in zip(keys_of(0), reader_ranges):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_RDONLY)
            if os.lseek(descriptor, 0, os.SEEK_END) != page_bytes:
                raise RuntimeError("wrong size")
            os.lseek(descriptor, 0, os.SEEK_SET)
            if os.readv(descriptor, parts) != page_bytes:
                raise RuntimeError("short read")
            os.close(descriptor)

    def bare_read_into_pool() -> None:
        for key, parts in zip(keys_of(0), reader_ranges):
            descriptor = os.open(os.path.join(plain_directory, key), os.O_RDONLY)
            if os.readv(descriptor, parts) != page_bytes:
                raise RuntimeError("short read")
            os.close(descriptor)

    write_ways = [
        ("plain write", plain_write),
        ("plain writev", plain_writev),
        ("bare write", bare_write),
        ("backend write", backend_write),
    ]
    read_ways = [
        ("plain read", plain_read),
        ("plain read into pool", plain_read_into_pool),
        ("bare read into pool", bare_read_into_pool),
        ("backend read", read_with(reader)),
        ("backend read, staged", read_with(staged_reader)),
    ]
    peer_directory = os.path.join(directory, "hicache_file")
    if peer is not None:
        from hicache_contracts.interop import to_sglang
        from hicache_contracts.models import PoolTransfer

        def peer_instance(pool: HostPagePool) -> Any:
            config = HiCacheStorageConfig.single_rank(
                model_name="bench", extra_config={"file_storage_path": peer_directory}
            )
            instance = peer.HiCacheFile(to_sglang(config, storage_module=peer))
            instance.register_mem_pool_host(pool)
            instance.register_mem_host_pool_v2(pool, peer.PoolName.KV)
            return instance

        peer_writer, peer_reader = peer_instance(writer_pool), peer_instance(reader_pool)

        def transfers(keys: list[str]) -> list[Any]:
            return [
                to_sglang(
                    PoolTransfer(
                        name="kv", keys=keys[start:end], host_indices=slots[start * PAGE_SIZE : end * PAGE_SIZE]
                    ),
                    storage_module=peer,
                )
                for start, end in slices
            ]

        def peer_io(method: Callable, keys_for_round: Callable[[], list[str]]) -> Callable[[], None]:
            def io() -> None:
                for transfer in transfers(keys_for_round()):
                    if not all(next(iter(method([transfer]).values()))):
                        raise RuntimeError(f"HiCacheFile.{method.__name__} failed")

            return io

        write_ways.append(("HiCacheFile write", peer_io(peer_writer.batch_set_v2, lambda: keys_of(current[0]))))
        read_ways.append(("HiCacheFile read", peer_io(peer_reader.batch_get_v2, lambda: keys_of(0))))

    def remove_round(round_number: int) -> None:
        backend_directory = os.path.join(root, backend.namespace, "kv")
        for key in keys_of(round_number):
            os.unlink(os.path.join(plain_directory, key))
            os.unlink(os.path.join(writev_directory, key))
            os.unlink(os.path.join(bare_directory, key))
            os.unlink(os.path.join(backend_directory, key))
            if peer is not None:
                os.unlink(os.path.join(peer_directory, f"{peer_writer._get_suffixed_key(key)}.bin"))

    # Round 0 (untimed) leaves the files the reads use; later rounds' files are removed untimed.
    write_times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in write_ways}
    for round_number in range(rounds + 1):
        current[0] = round_number
        turn = round_number % len(write_ways)  # the ways take turns going first: deletions and the journal vary
        for name, write in write_ways[turn:] + write_ways[:turn]:
            write_times[name].append(timed(write))
        if round_number:
            remove_round(round_number)
    total = pages * page_bytes
    results = best_rates(write_times, total, skip=1)
    # Reads: each way first runs once into a zeroed pool and is checked, then the ways alternate round by round.
    for name, function in read_ways:
        reader_pool.kv_buffer.zero_()
        function()
        if name != "plain read" and not torch.equal(reader_pool.kv_buffer, writer_pool.kv_buffer):
            raise RuntimeError(f"{name}: the pages read back differ from the pages written")
    read_times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in read_ways}
    for round_number in range(rounds):
        turn = round_number % len(read_ways)
        for name, function in read_ways[turn:] + read_ways[:turn]:
            read_times[name].append(timed(function))
    results.update(best_rates(read_times, total))
    return results, paired_ratios(write_times, read_times)


def timed(function: Callable[[], None]) -> tuple[float, float]:
    """Run ``function``; return its wall-clock seconds and the calling thread's CPU seconds."""
    wall, cpu = time.perf_counter(), time.thread_time()
    function()
    return time.perf_counter() - wall, time.thread_time() - cpu


def best_rates(times: dict[str, list[tuple[float, float]]], total: int, skip: int = 0) -> dict[str, float]:
    """Bytes per second of each way, best round, by wall clock (``name``) and by CPU time (``name, cpu``)."""
    rates = {}
    for name, rounds in times.items():
        rates[name] = total / min(wall for wall, _ in rounds[skip:])
        rates[f"{name}, cpu"] = total / max(min(cpu for _, cpu in rounds[skip:]), 1e-9)
    return rates


PAIRS = (
    ("write", "backend write", "plain write"),
    ("read", "backend read", "plain read into pool"),
    ("write", "backend write", "HiCacheFile write"),
    ("read", "backend read", "HiCacheFile read"),
)
"""The target ratios also taken round by round: (direction, the backend's way, its baseline)."""


def paired_ratios(
    write_times: dict[str, list[tuple[float, float]]], read_times: dict[str, list[tuple[float, float]]]
) -> dict[str, float]:
    """The median over rounds of baseline time / backend time within each round (write round 0 left out).

    The file system's speed drifts during a run, several-fold between runs on a
    shared disk: a best round of one way and a best round of another may come
    from different phases of it. Ways that ran in the same round met the same
    phase, so the median of the per-round ratios is steadier than the ratio of the
    best rounds.
    """
    out = {}
    for direction, mine, baseline in PAIRS:
        times = write_times if direction == "write" else read_times
        if mine not in times or baseline not in times:
            continue
        skip = 1 if direction == "write" else 0
        pairs = [theirs[0] / ours[0] for ours, theirs in zip(times[mine][skip:], times[baseline][skip:])]
        out[f"paired: {direction} / {baseline}"] = statistics.median(pairs)
    return out


def ratios(results: dict[str, float]) -> dict[str, float]:
    """The ratios the targets are on (and the diagnostic ones), from ``measure``'s figures."""
    write, read = results["backend write"], results["backend read"]
    out = {
        "write / plain write": write / results["plain write"],
        "write / plain writev": write / results["plain writev"],
        "write / bare write": write / results["bare write"],
        "read / plain read into pool": read / results["plain read into pool"],
        "read / bare read into pool": read / results["bare read into pool"],
        "read / plain read": read / results["plain read"],
        "staged read / plain read into pool": results["backend read, staged"] / results["plain read into pool"],
        "cpu: write / plain write": results["backend write, cpu"] / results["plain write, cpu"],
        "cpu: write / bare write": results["backend write, cpu"] / results["bare write, cpu"],
        "cpu: read / plain read into pool": results["backend read, cpu"] / results["plain read into pool, cpu"],
        "cpu: read / bare read into pool": results["backend read, cpu"] / results["bare read into pool, cpu"],
    }
    if "HiCacheFile write" in results:
        out["write / HiCacheFile write"] = write / results["HiCacheFile write"]
        out["read / HiCacheFile read"] = read / results["HiCacheFile read"]
    return out


def run(
    quick: bool = False,
    pages: Optional[int] = None,
    layout: str = "page_first",
    directory: Optional[str] = None,
    sglang_version: Optional[str] = None,
) -> dict:
    """Measure once; return the figures (GiB/s per way), the ratios and which peer ran."""
    pages = pages or (128 if quick else 512)
    rounds = 3 if quick else 7
    peer, peer_line = load_peer(
        sglang_version if sglang_version is not None else os.environ.get("HICACHE_SGLANG_RELEASE") or None
    )
    where = tempfile.mkdtemp(prefix="hicache-bench-", dir=directory)
    try:
        results, paired = measure(pages, rounds, where, layout, peer)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return {
        "pages": pages,
        "rounds": rounds,
        "layout": layout,
        "peer": peer_line,
        "gib_s": {name: value / 1024**3 for name, value in results.items()},
        "ratios": {**ratios(results), **paired},
        "targets": TARGETS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pages and rounds")
    parser.add_argument("--pages", type=int, default=None, help="pages per run (default 512, quick 128)")
    parser.add_argument(
        "--layout",
        choices=("page_first", "layer_first"),
        default="page_first",
        help="host pool layout: 2 byte ranges per page (page_first) or 8 (layer_first)",
    )
    parser.add_argument("--directory", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument(
        "--sglang-version", default=None, help="SGLang release whose HiCacheFile runs as a peer, or 'none'"
    )
    arguments = parser.parse_args()
    figures = run(arguments.quick, arguments.pages, arguments.layout, arguments.directory, arguments.sglang_version)
    print(
        f"{figures['pages']} pages x 64 KiB = {figures['pages'] * 64 / 1024:.1f} MiB, {figures['layout']}, "
        f"best of {figures['rounds']} rounds"
    )
    print(figures["peer"])
    for name, value in figures["gib_s"].items():
        print(f"{name:27s} {value:7.2f} GiB/s")
    for name, value in figures["ratios"].items():
        target = TARGETS.get(name)
        print(f"{name:45s} {value:5.2f}x" + (f"  (target >= {target}x)" if target else ""))


if __name__ == "__main__":
    main()
