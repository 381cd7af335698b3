"""The engine trace recorder and checker: what recording costs, and what checking a long operation costs.

Measured in one run, as ratios against baselines from the same run:

1. one 128-page storage call through ``RecordingBackend`` against the same
   call on the bare in-memory reference backend, for
   - ``batch_get_v1`` (the IO call; pages of 64 KiB and of 64 B) and
     ``batch_exists`` (the cheapest call, the worst case for relative cost);
   - the prefix handed over as an immutable ``PrefixKeys`` (what the
     contract models carry: recorded without a copy), as one plain ``list``
     handed to every call (what SGLang's dataclass carries, one list per
     batch for the batch's calls: copied once, the snapshot reused while
     the list looks unchanged), as a new list of the same keys each call
     (compared key for key with a private copy of the last snapshot, which
     is then reused) and as a new list one batch longer each call (``prefix
     + batch``, as SGLang builds them: compared the same way, and the last
     snapshot extended by the new batch), each as long as it is for the
     last slice of a 16,384-page operation;
2. a 16,384-page prefetch by the reference controller, with and without the
   recorder, then ``check_trace`` on its 256 recorded calls and 130 acks
   (the check time is given as a ratio to the prefetch itself).

Run: python benchmarks/bench_recorder.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch

from hicache_contracts import HiCacheStorageConfig, HiCacheStorageExtraInfo, PrefixKeys
from hicache_contracts.engine import RecordingBackend, check_trace
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController
from hicache_reference.backends import MemoryBackend, MemoryStore
from hicache_reference.settings import ControllerSettings
from hicache_spec import STORAGE_BATCH_SIZE, compute_key_chain

OPERATION_PAGES = 16_384
"""Pages of the long operation (128 slices of 128)."""
GROWING = 64
"""Lists in the growing-list case, each one batch longer than the one before."""


@dataclass
class SGLangStyleExtraInfo:
    """A mutable extra info holding a plain list, shaped like SGLang's dataclass."""

    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


def interleaved_best(
    bare: Any, recorded: Any, number: int, repeat: int, setup: Any
) -> tuple[float, float, float, float]:
    """Seconds per call of ``bare`` and of ``recorded``, by the wall clock and by the thread's CPU time.

    Each is the best of ``repeat`` alternating rounds of ``number`` calls (both clocks read around the same
    rounds). Alternating the two keeps a burst of load on the machine from landing on one side only; the
    CPU time (``time.thread_time``) leaves out the time the thread waited for a core.
    """
    best = [float("inf")] * 4
    for _ in range(repeat):
        for side, run in ((0, bare), (1, recorded)):
            if side:
                setup()
            wall, cpu = time.perf_counter(), time.thread_time()
            for _ in range(number):
                run()
            best[side] = min(best[side], (time.perf_counter() - wall) / number)
            best[side + 2] = min(best[side + 2], (time.thread_time() - cpu) / number)
    return best[0], best[1], best[2], best[3]


class NullBackend:
    """Answers at once with results built in advance: what remains of a call is the recorder's own work."""

    def __init__(self, count: int) -> None:
        self.flags = [True] * count
        self.count = count

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        return self.flags

    def batch_exists(self, keys, extra_info=None):
        return self.count


def filled_backend(keys: tuple, pool: HostPagePool) -> tuple[MemoryStore, HiCacheStorageConfig]:
    config = HiCacheStorageConfig.single_rank()
    store = MemoryStore()
    backend = MemoryBackend(config, {"store": store})
    backend.register_mem_pool_host(pool)
    slots = pool.alloc(len(keys))
    if backend.batch_set_v1(list(keys), slots) != [True] * len(keys):
        raise RuntimeError("could not fill the store")
    pool.free(slots)
    return store, config


def measure_batch(page_size: int, layers: int, heads: int, head_dim: int, number: int, repeat: int) -> dict:
    """Per-call ratios recorder / bare for one 128-page slice at the end of a 16,384-page operation."""
    pool = HostPagePool(2 * STORAGE_BATCH_SIZE, page_size, layers, heads, head_dim, kind="mha", pin_memory=False)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape).to(pool.dtype))
    prefix_length = OPERATION_PAGES - STORAGE_BATCH_SIZE
    chain = compute_key_chain(tuple(range((prefix_length + STORAGE_BATCH_SIZE) * page_size)), page_size)
    keys = list(chain[prefix_length:])
    store, config = filled_backend(tuple(keys), pool)
    bare = MemoryBackend(config, {"store": store})
    bare.register_mem_pool_host(pool)
    recorder = RecordingBackend(MemoryBackend(config, {"store": store}))
    recorder.register_mem_pool_host(pool)
    slots = pool.alloc(STORAGE_BATCH_SIZE)
    # "list": one list handed to every call (as SGLang hands one batch's list to its calls);
    # "new list": a different list object each call (16 in turn), so no snapshot can be reused whole;
    # "growing list": a new list each call, one batch longer than the last (prefix + batch, as SGLang builds it),
    # GROWING of them in turn, the longest as long as the others' prefix.
    infos = {
        "PrefixKeys": itertools.repeat(HiCacheStorageExtraInfo(prefix_keys=PrefixKeys(chain[:prefix_length]))),
        "list": itertools.repeat(SGLangStyleExtraInfo(prefix_keys=list(chain[:prefix_length]))),
        "new list": itertools.cycle([SGLangStyleExtraInfo(prefix_keys=list(chain[:prefix_length])) for _ in range(16)]),
        "growing list": itertools.cycle(
            [
                SGLangStyleExtraInfo(
                    prefix_keys=list(chain[: prefix_length - (GROWING - 1 - step) * STORAGE_BATCH_SIZE])
                )
                for step in range(GROWING)
            ]
        ),
    }
    null = NullBackend(STORAGE_BATCH_SIZE)
    recorded_null = RecordingBackend(NullBackend(STORAGE_BATCH_SIZE))
    ratios = {}
    for prefix_kind, info in infos.items():
        for method, call in (
            ("batch_get_v1", lambda backend, info=info: backend.batch_get_v1(keys, slots, next(info))),
            ("batch_exists", lambda backend, info=info: backend.batch_exists(keys, next(info))),
        ):
            baseline, recorded, baseline_cpu, _ = interleaved_best(
                lambda: call(bare), lambda: call(recorder), number, repeat, recorder.clear_calls
            )
            null_bare, null_recorded, null_bare_cpu, null_recorded_cpu = interleaved_best(
                lambda: call(null), lambda: call(recorded_null), number * 20, repeat * 3, recorded_null.clear_calls
            )
            overhead = max(0.0, null_recorded - null_bare)
            overhead_cpu = max(0.0, null_recorded_cpu - null_bare_cpu)
            ratios[(method, prefix_kind)] = (
                recorded / baseline,
                1 + overhead / baseline,
                baseline,
                overhead,
                1 + overhead_cpu / baseline_cpu,
                baseline_cpu,
                overhead_cpu,
            )
    return ratios


def measure_operation(quick: bool) -> dict:
    """A 16,384-page prefetch with and without the recorder, then check_trace on the recording."""
    page_size = 2
    keys = compute_key_chain(tuple(range(OPERATION_PAGES * page_size)), page_size)
    source = HostPagePool(OPERATION_PAGES, page_size, 2, 1, 4, kind="mha", pin_memory=False)
    store, config = filled_backend(keys, source)
    timings: dict[str, float] = {}
    rounds = 1 if quick else 3
    for wrapped in (False, True):
        best = float("inf")
        for _ in range(rounds):
            inner = MemoryBackend(config, {"store": store})
            backend = RecordingBackend(inner) if wrapped else inner
            target = HostPagePool(OPERATION_PAGES, page_size, 2, 1, 4, kind="mha", pin_memory=False)
            start = time.perf_counter()
            with CacheController(
                backend,
                target,
                storage_config=config,
                settings=ControllerSettings(pass_prefix_keys=True, prefetch_threshold=0),
            ) as controller:
                operation = controller.prefetch(keys=keys, prefix_keys=[])
                if not operation.wait(600) or operation.loaded_tokens != OPERATION_PAGES * page_size:
                    raise RuntimeError(f"the prefetch did not complete: {operation!r}")
            best = min(best, time.perf_counter() - start)
        timings["recorded" if wrapped else "bare"] = best
    start = time.perf_counter()
    report = check_trace(
        backend.calls, chain=keys, prefix_keys=operation.base_info.prefix_keys, page_size=page_size, acks=operation.acks
    )
    timings["check"] = time.perf_counter() - start
    if not report.ok:
        raise RuntimeError(report.format_table())
    timings["calls"] = len(backend.calls)
    timings["acks"] = len(operation.acks)
    return timings


def run(quick: bool = False) -> dict:
    """Measure everything; return the per-call ratios (keyed "pages method prefix") and the operation's timings."""
    number, repeat = (5, 3) if quick else (30, 7)
    calls = {}
    for label, shape in (("64 KiB pages", (16, 4, 4, 64)), ("64 B pages", (2, 2, 1, 4))):
        for (method, prefix_kind), (
            direct,
            isolated,
            baseline,
            overhead,
            isolated_cpu,
            baseline_cpu,
            overhead_cpu,
        ) in measure_batch(*shape, number, repeat).items():
            calls[f"{label}, {method}, {prefix_kind}"] = {
                "pages": label,
                "method": method,
                "prefix": prefix_kind,
                "direct": direct,
                "isolated": isolated,
                "bare_us": baseline * 1e6,
                "recorder_us": overhead * 1e6,
                "isolated_cpu": isolated_cpu,
                "bare_cpu_us": baseline_cpu * 1e6,
                "recorder_cpu_us": overhead_cpu * 1e6,
            }
    timings = measure_operation(quick)
    return {
        "calls": calls,
        "operation": timings,
        "prefetch_recorded_over_bare": timings["recorded"] / timings["bare"],
        "check_over_recorded_prefetch": timings["check"] / timings["recorded"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, noisier ratios)")
    figures = run(parser.parse_args().quick)
    print(
        f"one {STORAGE_BATCH_SIZE}-page call, prefix of {OPERATION_PAGES - STORAGE_BATCH_SIZE} keys "
        "(the last slice of a 16,384-page operation); ratio = recorder / bare backend"
    )
    print("  (direct: timed side by side; isolated: 1 + the recorder's own cost, measured on a backend that")
    print("   answers at once, over the bare call; the isolated ratio is the stable one on a loaded machine;")
    print("   [CPU]: the same from the calling thread's CPU time, which leaves out waiting for a core)")
    for row in figures["calls"].values():
        label, method, prefix_kind = row["pages"], row["method"], row["prefix"]
        print(
            f"  {label:12s} {method:13s} prefix as {prefix_kind:12s} direct {row['direct']:6.3f}x  "
            f"isolated {row['isolated']:6.3f}x [CPU {row['isolated_cpu']:6.3f}x]  "
            f"(bare {row['bare_us']:7.1f} us, recorder {row['recorder_us']:5.1f} us; "
            f"CPU {row['bare_cpu_us']:7.1f} / {row['recorder_cpu_us']:5.1f} us)"
        )
    timings = figures["operation"]
    print(
        f"{OPERATION_PAGES}-page prefetch by the reference controller "
        f"({timings['calls']} recorded calls, {timings['acks']} acks)"
    )
    print(
        f"  prefetch, recorder / bare backend   {figures['prefetch_recorded_over_bare']:6.3f}x  "
        f"(bare {timings['bare'] * 1e3:.0f} ms)"
    )
    print(
        f"  check_trace / recorded prefetch     {figures['check_over_recorded_prefetch']:6.3f}x  "
        f"(check {timings['check'] * 1e3:.0f} ms)"
    )


if __name__ == "__main__":
    main()
