"""The controller's per-slice prefix metadata: cost per call against the operation's length and the prefix depth.

The reference controller hands every call of an operation its own extra info
(PFX-2): the operation's prefix followed by every key before the call's
first key. This script drives the controller's own
``PrefixInfo.for_slice`` (``hicache_reference.controller_parts``) over an operation of S slices of
128 pages (S = 1 … 1,024) behind a prefix of D pages (D = 0 … 1M), calling
it slice by slice as a backup or the prefetch IO does, and times every call.

- contract: the controller as it is (each call's info extends the previous
  call's by one batch);
- baseline: what it did before, ``base_info.extend(keys[:start])`` per call
  (O(start) per call, so O(S²) per operation), run up to 256 slices.

Printed per (S, D): the mean µs per call, the first and last slice's cost
(each the minimum over the repeats) and last / first (flat: near 1; the
target is ≤ 1.5 at 1,024 slices). ``run()`` returns the same figures for
``benchmarks/run_all.py``.

Run: ``python benchmarks/bench_controller_prefix.py`` (``--quick``: fewer
repeats, prefix depths up to 64k pages).
"""

from __future__ import annotations

import statistics
import time
import types

from hicache_contracts import HiCacheStorageExtraInfo, PrefixKeys
from hicache_reference.controller_parts import PrefixInfo
from hicache_spec import STORAGE_BATCH_SIZE
from _args import quick_flag  # the benchmarks folder, on the path when a script or run_all runs

SLICE_COUNTS = (1, 4, 16, 64, 256, 1024)
"""Slices per operation (128 pages each): 128 to 131,072 pages."""
PREFIX_DEPTHS = (0, 1024, 65_536, 1_048_576)
"""Pages before the operation's first page."""
QUICK_DEPTHS = (0, 1024, 65_536)
BASELINE_MAX_SLICES = 256
"""The quadratic baseline is run up to this many slices (1,024 would take seconds per repeat)."""
EDGE_SLICES = 8
"""first / last: the median of the first and the last few slices' minimum cost."""


def make_keys(count: int, start: int) -> tuple:
    return tuple(f"{index:064x}" for index in range(start, start + count))


def operation_for(keys: tuple, prefix: PrefixKeys) -> types.SimpleNamespace:
    """What ``PrefixInfo.for_slice`` reads of an operation: its keys and its operation-level info."""
    return types.SimpleNamespace(keys=keys, base_info=HiCacheStorageExtraInfo(prefix_keys=prefix))


def controller_slices(operation: types.SimpleNamespace, starts: range, clock: list) -> list:
    """The controller's own method, called slice by slice; ``clock`` gets each call's nanoseconds."""
    method = PrefixInfo(pass_prefix_keys=True).for_slice
    infos = []
    for start in starts:
        began = time.perf_counter_ns()
        infos.append(method(operation, start))
        clock.append(time.perf_counter_ns() - began)
    return infos


def rebuilt_slices(operation: types.SimpleNamespace, starts: range, clock: list) -> list:
    """Baseline: the operation's info extended by every earlier key, for every call."""
    infos = []
    for start in starts:
        began = time.perf_counter_ns()
        infos.append(operation.base_info.extend(operation.keys[:start]))
        clock.append(time.perf_counter_ns() - began)
    return infos


def measure(way, keys: tuple, prefix: PrefixKeys, slices: int, repeats: int) -> dict:
    """Per-call figures of ``way`` over ``repeats`` fresh operations (µs)."""
    starts = range(0, slices * STORAGE_BATCH_SIZE, STORAGE_BATCH_SIZE)
    per_slice = [float("inf")] * slices
    means = []
    for _ in range(repeats):
        clock: list = []
        infos = way(operation_for(keys, prefix), starts, clock)
        means.append(sum(clock) / len(clock) / 1000)
        per_slice = [min(best, spent / 1000) for best, spent in zip(per_slice, clock)]
        del infos
    edge = min(EDGE_SLICES, slices)
    first = statistics.median(per_slice[:edge])
    last = statistics.median(per_slice[-edge:])
    return {"mean_us": statistics.median(means), "first_us": first, "last_us": last, "last_over_first": last / first}


def check_values(keys: tuple, prefix: PrefixKeys, slices: int) -> None:
    """Both ways hand every call the same prefix (so the timing compares like with like)."""
    starts = range(0, slices * STORAGE_BATCH_SIZE, STORAGE_BATCH_SIZE)
    ours = controller_slices(operation_for(keys, prefix), starts, [])
    theirs = rebuilt_slices(operation_for(keys, prefix), starts, [])
    for start, mine, reference in zip(starts, ours, theirs):
        if mine.prefix_keys != reference.prefix_keys or len(mine.prefix_keys) != len(prefix) + start:
            raise SystemExit(f"slice at {start}: the two ways disagree on the prefix; the benchmark is meaningless")


def run(quick: bool = False) -> dict:
    """Measure every (slices, depth) pair; return the figures (µs) keyed ``"<slices>x<depth>"``."""
    repeats = 3 if quick else 9
    depths = QUICK_DEPTHS if quick else PREFIX_DEPTHS
    longest = max(SLICE_COUNTS) * STORAGE_BATCH_SIZE
    results: dict = {"controller": {}, "rebuilt": {}, "repeats": repeats}
    for depth in depths:
        prefix = PrefixKeys(make_keys(depth, 0))
        keys = make_keys(longest, depth)
        check_values(keys, prefix, 20)
        for slices in SLICE_COUNTS:
            label = f"{slices}x{depth}"
            results["controller"][label] = measure(controller_slices, keys, prefix, slices, repeats)
            if slices <= BASELINE_MAX_SLICES:
                results["rebuilt"][label] = measure(rebuilt_slices, keys, prefix, slices, max(1, repeats // 3))
        del prefix, keys
    flat = [
        figures["last_over_first"]
        for label, figures in results["controller"].items()
        if label.startswith(f"{max(SLICE_COUNTS)}x")
    ]
    results["worst_last_over_first_at_1024"] = max(flat)
    at_256 = f"{BASELINE_MAX_SLICES}x0"
    results["rebuilt_over_controller_256_slices"] = (
        results["rebuilt"][at_256]["mean_us"] / results["controller"][at_256]["mean_us"]
    )
    return results


def main() -> None:
    results = run(quick_flag(__doc__, "fewer repeats, depths up to 64k pages"))
    print(
        f"controller per-slice extra info, {STORAGE_BATCH_SIZE}-page slices, "
        f"minimum per slice over {results['repeats']} operations"
    )
    print(
        f"{'slices':>7}{'depth':>10}{'mean µs':>10}{'first µs':>10}{'last µs':>10}{'last/first':>11}"
        f"{'rebuilt mean µs':>17}{'last/first':>11}"
    )
    for label, figures in results["controller"].items():
        slices, depth = label.split("x")
        rebuilt = results["rebuilt"].get(label)
        tail = f"{rebuilt['mean_us']:17.1f}{rebuilt['last_over_first']:11.1f}" if rebuilt else f"{'—':>17}{'':>11}"
        print(
            f"{slices:>7}{depth:>10}{figures['mean_us']:10.2f}{figures['first_us']:10.2f}"
            f"{figures['last_us']:10.2f}{figures['last_over_first']:11.2f}{tail}"
        )
    print(f"worst last/first at 1,024 slices: {results['worst_last_over_first_at_1024']:.2f} (target <= 1.5)")
    print(
        f"rebuilt / controller, mean per call at 256 slices, no prefix: "
        f"{results['rebuilt_over_controller_256_slices']:.0f}x"
    )


if __name__ == "__main__":
    main()
