"""Where a Redis prefetch spends its time: cProfile of every thread, beside raw pipelined GET and the backend alone.

The workload of bench_redis.py (pages of 64 KiB, hiredis, a private
``redis-server`` unless ``--url`` is given): the pages are written once by a
backup, then read three ways, each profiled:

1. raw ``GET`` pipelines of 128 (the baseline), on this thread;
2. the backend alone, ``batch_get_v1`` slices of 128, on this thread;
3. ``CacheController.prefetch`` of the whole chain: every thread the
   controller starts is profiled from its first call (``threading.setprofile``).

Printed per way: wall time, the CPU time of each thread, and the functions
with the most own time. A diagnosis tool, not a benchmark: cProfile slows
Python code several times more than C code, so compare shares, not totals.

Run: python benchmarks/profile_redis.py [--pages N] [--url redis://host:port/0] [--top N]
"""

from __future__ import annotations

import argparse
import cProfile
import contextlib
import io
import pstats
import sys
import threading
import time
import uuid
from typing import Any

from redis._parsers import _HiredisParser

from bench_redis import PAGE_SIZE, PIPELINE, Workload, private_server, settle
from hicache_contracts import HiCacheStorageConfig
from hicache_reference import CacheController
from hicache_reference.backends.redis_backend import RedisBackend
from hicache_reference.settings import ControllerSettings


def top(profile: cProfile.Profile, count: int) -> str:
    """The ``count`` functions with the most own time, as pstats prints them."""
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(count)
    lines = out.getvalue().splitlines()
    start = next(index for index, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    return "\n".join(lines[start : start + count + 1])


def profiled(label: str, run: Any, count: int) -> None:
    profile = cProfile.Profile()
    cpu, wall = time.thread_time(), time.perf_counter()
    profile.enable()
    run()
    profile.disable()
    print(f"\n== {label}: {time.perf_counter() - wall:.3f} s wall, {time.thread_time() - cpu:.3f} s CPU (this thread)")
    print(top(profile, count))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_024)
    parser.add_argument("--url", default=None)
    parser.add_argument("--top", type=int, default=12)
    arguments = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = arguments.url or stack.enter_context(private_server())
        work = Workload(url, arguments.pages, _HiredisParser)
        config = HiCacheStorageConfig.single_rank(model_name=f"profile-{uuid.uuid4().hex[:8]}")

        def backend() -> RedisBackend:
            made = RedisBackend(config, {"redis_url": url, "key_prefix": work.prefix})
            made.nodes._standalone.connection_pool.connection_kwargs["parser_class"] = _HiredisParser
            return made

        writer = backend()
        with CacheController(
            writer, work.pool, storage_config=config, settings=ControllerSettings(prefetch_threshold=0)
        ) as controller:
            if not controller.backup(work.keys, work.source_slots).wait(600):
                raise RuntimeError("backup incomplete")
        raw_keys = [f"{work.prefix}raw:{index}" for index in range(work.pages)]
        for start in range(0, work.pages, PIPELINE):
            pipeline = work.client.pipeline(transaction=False)
            for index in range(start, min(start + PIPELINE, work.pages)):
                pipeline.set(raw_keys[index], work.payloads[index])
            pipeline.execute()
        settle(work.client)

        def raw_get() -> None:
            for start in range(0, work.pages, PIPELINE):
                pipeline = work.client.pipeline(transaction=False)
                for index in range(start, min(start + PIPELINE, work.pages)):
                    pipeline.get(raw_keys[index])
                pipeline.execute()

        reader = backend()
        reader.register_mem_pool_host(work.pool)
        target = work.pool.alloc(work.pages)

        def backend_get() -> None:
            for start in range(0, work.pages, PIPELINE):
                end = min(start + PIPELINE, work.pages)
                reader.batch_get_v1(work.keys[start:end], target[start * PAGE_SIZE : end * PAGE_SIZE])

        raw_get()  # warm the connections
        profiled(f"raw GET, pipelines of {PIPELINE}, {work.pages} pages", raw_get, arguments.top)
        profiled(f"backend alone, batch_get_v1 slices of {PIPELINE}", backend_get, arguments.top)
        work.check_loaded(target)
        work.pool.free(target)

        profiles: list[tuple[str, cProfile.Profile, list[float]]] = []

        def start_profile(*_: Any) -> None:
            sys.setprofile(None)
            profile = cProfile.Profile()
            clock = [time.thread_time()]
            profiles.append((threading.current_thread().name, profile, clock))
            profile.enable()

        threading.setprofile(start_profile)
        try:
            main_profile = cProfile.Profile()
            wall, cpu = time.perf_counter(), time.thread_time()
            main_profile.enable()
            with CacheController(
                backend(), work.pool, storage_config=config, settings=ControllerSettings(prefetch_threshold=0)
            ) as controller:
                operation = controller.prefetch(keys=work.keys)
                if not operation.wait(600) or operation.loaded_tokens != work.tokens:
                    raise RuntimeError("prefetch incomplete")
                elapsed = time.perf_counter() - wall
            main_profile.disable()
        finally:
            threading.setprofile(None)
        print(f"\n== controller prefetch: {elapsed:.3f} s wall; main thread {time.thread_time() - cpu:.3f} s CPU")
        print(top(main_profile, arguments.top))
        for name, profile, _ in profiles:
            profile.disable()
            stats = pstats.Stats(profile)
            if stats.total_tt < 0.005:
                continue
            print(f"\n-- thread {name}: {stats.total_tt:.3f} s profiled")
            print(top(profile, arguments.top))
        work.check_loaded(operation.loaded_host_indices)
        writer.clear()


if __name__ == "__main__":
    main()
