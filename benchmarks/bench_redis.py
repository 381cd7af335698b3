"""Backup and prefetch through the reference controller into Redis, against raw pipelined SET/GET, in one run.

Workload: 4,096 pages of 64 KiB (``--quick``: 1,024 pages, one repeat) on a
standalone Redis on loopback: ``--url`` or ``$HICACHE_REDIS_URL`` when given,
else a private ``redis-server`` (from PATH) that the benchmark starts on a free
loopback port, without persistence, and stops afterwards, as the tests do
(tests/redis_support.py).

- baseline: the same page payloads, as ready-made ``bytes``, written with
  redis-py pipelines of 128 ``SET`` commands and read back with pipelines of
  128 ``GET`` (what a minimal client of the same server does);
- contract: ``CacheController.backup`` of the whole chain (32 slices of 128
  pages through ``RedisBackend.batch_set_v1``), then
  ``CacheController.prefetch`` of it (hit query, rank agreement, host
  allocation, 32 ``batch_get_v1`` slices into the host pool, acks);
- for diagnosis, the backend alone: the same 32 ``batch_set_v1`` and
  ``batch_get_v1`` calls made directly, without the controller.

Everything runs twice, once per reply parser: hiredis (the C parser redis-py
uses when it is installed, a dependency of the project) and redis-py's
pure-Python parser, each phase of a run using the same parser as its
baseline; the parsers take turns within each repeat, and the speed-up of
hiredis over the Python parser is printed for the baseline and the controller
alike.

The heap is warmed first (``warm_the_heap``), so that the baseline's replies
do not pay page faults a long-lived client would not pay. Each repeat runs
the three in turn (rotating which goes first), and before
each phase waits until the server has no lazily freed memory pending, so
that no phase pays for the previous one's deletions. Printed: MB/s of each
(best of the repeats) and the ratio to the baseline (target: at least 0.8).
Every loaded page is compared with its source, outside the timed part. Keys
live under a fresh prefix and are deleted afterwards (never FLUSHDB).

Run: python benchmarks/bench_redis.py [--quick] [--repeats N] [--url redis://host:port/0] [--parser hiredis|python|both]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Iterator, Optional, Sequence

import redis
import torch
from redis._parsers import _HiredisParser, _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

from hicache_contracts import HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends import tensor_bytes
from hicache_reference.backends.redis_backend import RedisBackend
from hicache_reference.settings import ControllerSettings

PAGE_SIZE = 64
"""Tokens per page; with 4 layers x 4 heads x 16 dims of float16 K and V, a page is 64 KiB."""
LAYERS, HEADS, HEAD_DIM = 4, 4, 16
PIPELINE = 128
"""Commands per baseline pipeline, as many as the controller's pages per slice."""
PARSERS = {"hiredis": _HiredisParser, "python": _RESP2Parser}
"""redis-py's reply parsers: the C one (hiredis) and the pure-Python one."""


@contextlib.contextmanager
def private_server() -> Iterator[str]:
    """Start ``redis-server`` on a free loopback port (no persistence, its files in a temporary directory); yield
    its URL; stop it afterwards. Raises RuntimeError when there is no ``redis-server`` or it does not answer."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("no redis-server on PATH (scripts/install_redis.sh installs one), and no --url given")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="hicache-bench-redis-")
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(command + ["--dir", directory], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {port} did not start") from None
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(directory, ignore_errors=True)


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

    def __init__(self, url: str, pages: int, parser: type = _RESP2Parser) -> None:
        self.url = url
        self.pages = pages
        self.parser = parser
        """The reply parser of every client in this workload, the backend's included."""
        self.pool = HostPagePool(
            2 * pages,
            PAGE_SIZE,
            LAYERS,
            HEADS,
            HEAD_DIM,
            dtype=torch.float16,
            kind="mha",
            layout="page_first",
            pin_memory=False,
        )
        self.source_slots = self.pool.alloc(pages)
        self.pool.kv_buffer.copy_(torch.randn(self.pool.kv_buffer.shape, generator=torch.Generator().manual_seed(0)))
        self.payloads = [
            bytes(tensor_bytes(self.pool.get_data_page(int(start)))) for start in self.source_slots[::PAGE_SIZE]
        ]
        self.keys = page_keys(pages)
        self.tokens = pages * PAGE_SIZE
        self.prefix = f"hicache-bench-{uuid.uuid4().hex[:8]}:"
        self.client = redis.Redis.from_url(url, parser_class=parser)

    def check_loaded(self, loaded: torch.Tensor) -> None:
        for index in range(self.pages):
            source = self.pool.get_data_page(int(self.source_slots[index * PAGE_SIZE]))
            if not torch.equal(self.pool.get_data_page(int(loaded[index * PAGE_SIZE])), source):
                raise RuntimeError(f"page {index} came back with wrong bytes")

    def backend(self) -> tuple[RedisBackend, HiCacheStorageConfig]:
        config = HiCacheStorageConfig.single_rank(model_name=f"bench-{uuid.uuid4().hex[:8]}")
        backend = RedisBackend(config, {"redis_url": self.url, "key_prefix": self.prefix})
        # The backend's pool has made no connection yet: each one it makes gets this parser.
        backend.nodes._standalone.connection_pool.connection_kwargs["parser_class"] = self.parser
        return backend, config

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
        with CacheController(
            backend, self.pool, storage_config=config, settings=ControllerSettings(prefetch_threshold=0)
        ) as controller:
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
            if not all(
                backend.batch_set_v1(self.keys[start:end], self.source_slots[start * PAGE_SIZE : end * PAGE_SIZE])
            ):
                raise RuntimeError("batch_set_v1 failed")
        written = time.perf_counter()
        for start in range(0, self.pages, PIPELINE):
            end = min(start + PIPELINE, self.pages)
            if not all(backend.batch_get_v1(self.keys[start:end], target[start * PAGE_SIZE : end * PAGE_SIZE])):
                raise RuntimeError("batch_get_v1 missed")
        read = time.perf_counter()
        self.check_loaded(target)
        self.pool.free(target)
        backend.clear()
        backend.close()
        return written - started, read - written


PHASES = ("raw", "controller", "backend_alone")
"""The workload's phases, each returning (write seconds, read seconds)."""


def warm_the_heap() -> None:
    """Free one 30 MiB buffer, so that the C allocator keeps the baseline's freed replies for the next pipeline.

    The baseline's GET replies are new ``bytes`` objects, 8 MiB a pipeline, freed
    before the next one. In a fresh process the allocator gives that memory back
    to the system each time, so every pipeline pays its page faults again (raw
    GET at 1.1-1.3 GB/s against 1.7-1.9 GB/s in a process that had freed a large
    block before, such as run_all.py's). glibc raises its trim threshold to twice
    the size of a freed mapped block of up to 32 MiB; after one of 30 MiB it is
    above a pipeline's size, the baseline runs as fast as in a long-lived
    client, and the backend's ratio is not flattered by the baseline's page
    faults. Elsewhere (another allocator) this changes nothing.
    """
    block = bytearray(30 << 20)
    del block


def measure(url: str, pages: int, repeats: int, parsers: Sequence[str]) -> dict:
    """Run the phases ``repeats`` times with each parser; return, per parser, MB/s (best) and ratios to raw.

    The parsers take turns within each repeat (and the phases rotate), so that
    a change of load on a shared machine hits both alike.
    """
    warm_the_heap()
    workload = Workload(url, pages)
    own_client = workload.client
    clients = {name: redis.Redis.from_url(url, parser_class=PARSERS[name]) for name in parsers}
    megabytes = pages * workload.pool.page_bytes / 1e6
    timings: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {phase: [] for phase in PHASES} for name in parsers
    }
    try:
        for repeat in range(repeats):
            turn = list(parsers)[repeat % len(parsers) :] + list(parsers)[: repeat % len(parsers)]
            for name in turn:
                workload.parser, workload.client = PARSERS[name], clients[name]
                for phase in PHASES[repeat % 3 :] + PHASES[: repeat % 3]:
                    timings[name][phase].append(getattr(workload, phase)())
    finally:
        delete_prefix(workload.client, workload.prefix)
        for client in (own_client, *clients.values()):
            client.close()
    results = {}
    for name in parsers:
        rates = {}
        for phase, label in zip(PHASES, ("raw", "controller", "backend")):
            for which, direction in ((0, "write"), (1, "read")):
                rates[f"{label}_{direction}"] = megabytes / min(timing[which] for timing in timings[name][phase])
        results[name] = {
            "megabytes": megabytes,
            "rates_mb_s": rates,
            "backup_over_raw_set": rates["controller_write"] / rates["raw_write"],
            "prefetch_over_raw_get": rates["controller_read"] / rates["raw_read"],
            "backend_set_over_raw_set": rates["backend_write"] / rates["raw_write"],
            "backend_get_over_raw_get": rates["backend_read"] / rates["raw_read"],
        }
    return results


def run(
    quick: bool = False,
    url: Optional[str] = None,
    repeats: Optional[int] = None,
    parsers: Sequence[str] = ("hiredis", "python"),
) -> dict:
    """Measure with each parser; return the figures per parser and hiredis's speed-up over the Python parser.

    The server: ``url``, else ``$HICACHE_REDIS_URL``, else a private one on a free port (``private_server``)."""
    url = url or os.environ.get("HICACHE_REDIS_URL")
    if url is None:
        with private_server() as private_url:
            results = run(quick, private_url, repeats, parsers)
        results["server"] = "private redis-server on a free loopback port"
        return results
    pages = 1024 if quick else 4096
    repeats = repeats or (1 if quick else 5)
    if not HIREDIS_AVAILABLE:
        parsers = [name for name in parsers if name != "hiredis"]
    results: dict = {
        "url": url,
        "server": "given",
        "pages": pages,
        "repeats": repeats,
        "hiredis_available": HIREDIS_AVAILABLE,
    }
    results.update(measure(url, pages, repeats, list(parsers)))
    if "hiredis" in results and "python" in results:
        results["hiredis_speedup"] = {
            key: results["hiredis"]["rates_mb_s"][key] / results["python"]["rates_mb_s"][key]
            for key in results["hiredis"]["rates_mb_s"]
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,024 pages, one repeat")
    parser.add_argument(
        "--url", default=None, help="a server to use (default $HICACHE_REDIS_URL, else a private one on a free port)"
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--parser", choices=("hiredis", "python", "both"), default="both")
    arguments = parser.parse_args()
    parsers = ("hiredis", "python") if arguments.parser == "both" else (arguments.parser,)
    results = run(arguments.quick, arguments.url, arguments.repeats, parsers)
    print(
        f"{results['pages']} pages x 64 KiB, Redis at {results['url']} ({results['server']}), "
        f"{results['repeats']} repeat(s), "
        f"pipelines / slices of {PIPELINE}" + ("" if results["hiredis_available"] else "; hiredis not installed")
    )
    rows = [
        ("raw pipelined SET (baseline)", "raw_write", "raw_write"),
        ("backup, controller", "controller_write", "raw_write"),
        ("batch_set_v1 slices, backend alone", "backend_write", "raw_write"),
        ("raw pipelined GET (baseline)", "raw_read", "raw_read"),
        ("prefetch, controller", "controller_read", "raw_read"),
        ("batch_get_v1 slices, backend alone", "backend_read", "raw_read"),
    ]
    for name in parsers:
        if name not in results:
            continue
        rates = results[name]["rates_mb_s"]
        print(f"parser: {name}")
        print(f"  {'':40s} {'MB/s':>7s}   ratio to raw (same parser)")
        for label, key, baseline in rows:
            print(f"  {label:40s} {rates[key]:7.0f}   {rates[key] / rates[baseline]:5.2f}x")
    if "hiredis_speedup" in results:
        speedup = results["hiredis_speedup"]
        print(
            "hiredis / python parser, throughput: " + ", ".join(f"{key} {value:.2f}x" for key, value in speedup.items())
        )


if __name__ == "__main__":
    main()
