"""Per-batch prefix metadata: PrefixKeys versus rebuilding a list per batch.

An operation of 16,384 pages behind a prefix of 16,384 pages is cut into
batches of 128 (STORAGE_BATCH_SIZE); every batch receives its own
``HiCacheStorageExtraInfo`` whose prefix is the operation's prefix followed by
every earlier batch (PFX-2), and which must never change afterwards (PFX-5).

- baseline: ``prefix = prefix + batch`` (a new list per batch, O(prefix
  length) each) wrapped in a plain dataclass shaped like SGLang's;
- contract: ``info = info.extend(batch)`` on the frozen model, whose
  ``PrefixKeys`` shares the parent's keys (O(batch) each).

Printed: the total for all batches, the ratio baseline / contract, and the
cost of the first and the last batch of each (flatness: last / first).

Run: ``python benchmarks/bench_prefix_keys.py`` (``--quick`` for fewer repeats).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Callable, Optional

from hicache_contracts import HiCacheStorageExtraInfo, PrefixKeys
from hicache_spec import STORAGE_BATCH_SIZE

PREFIX_PAGES = 16_384
"""Pages before the operation's first page."""
OPERATION_PAGES = 16_384
"""Pages of the operation itself: 128 batches of 128."""


@dataclasses.dataclass
class PlainExtraInfo:
    """SGLang's shape: a mutable dataclass holding a list."""

    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


def make_keys(count: int, start: int) -> list:
    return [f"{index:064x}" for index in range(start, start + count)]


def batches_of(keys: list) -> list:
    return [keys[start : start + STORAGE_BATCH_SIZE] for start in range(0, len(keys), STORAGE_BATCH_SIZE)]


def run_list_rebuild(prefix: list, batches: list, clock: list) -> list:
    """Baseline: a new list and a plain info per batch; ``clock`` receives each batch's nanoseconds."""
    infos = []
    current = prefix
    for batch in batches:
        started = time.perf_counter_ns()
        infos.append(PlainExtraInfo(prefix_keys=current))
        current = current + batch
        clock.append(time.perf_counter_ns() - started)
    return infos


def run_prefix_keys(prefix: PrefixKeys, batches: list, clock: list) -> list:
    """Contract: one frozen info per batch, each extended from the one before."""
    infos = []
    info = HiCacheStorageExtraInfo(prefix_keys=prefix)
    for batch in batches:
        started = time.perf_counter_ns()
        infos.append(info)
        info = info.extend(batch)
        clock.append(time.perf_counter_ns() - started)
    return infos


def measure(run: Callable, prefix: object, batches: list, repeats: int) -> tuple[float, float, float]:
    """Return (median total µs, median first-batch µs, median last-batch µs) over ``repeats`` runs."""
    totals, firsts, lasts = [], [], []
    for _ in range(repeats):
        clock: list = []
        started = time.perf_counter_ns()
        infos = run(prefix, batches, clock)
        totals.append((time.perf_counter_ns() - started) / 1000)
        firsts.append(clock[0] / 1000)
        lasts.append(clock[-1] / 1000)
        del infos
    return statistics.median(totals), statistics.median(firsts), statistics.median(lasts)


def check_same_metadata(prefix_list: list, batches: list) -> None:
    """Both ways hand every batch the same prefix (so the timing compares like with like)."""
    expected = run_list_rebuild(prefix_list, batches, [])
    actual = run_prefix_keys(PrefixKeys(prefix_list), batches, [])
    if len(expected) != len(actual) or any(
        plain.prefix_keys != info.prefix_keys
        for plain, info in zip(expected[:: len(expected) - 1], actual[:: len(actual) - 1])
    ):
        raise SystemExit("the two ways disagree on the metadata; the benchmark is meaningless")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    arguments = parser.parse_args()
    repeats = 5 if arguments.quick else 30

    prefix_list = make_keys(PREFIX_PAGES, 0)
    batches = batches_of(make_keys(OPERATION_PAGES, PREFIX_PAGES))
    check_same_metadata(prefix_list, batches)
    prefix_keys = PrefixKeys(prefix_list)

    list_total, list_first, list_last = measure(run_list_rebuild, prefix_list, batches, repeats)
    keys_total, keys_first, keys_last = measure(run_prefix_keys, prefix_keys, batches, repeats)

    print(
        f"per-batch prefix metadata: {OPERATION_PAGES} pages behind a {PREFIX_PAGES}-page prefix, "
        f"{len(batches)} batches of {STORAGE_BATCH_SIZE}, median of {repeats} runs"
    )
    print(f"{'':32}{'total µs':>12}{'first µs':>12}{'last µs':>12}{'last/first':>12}")
    print(
        f"{'list rebuild + dataclass':32}{list_total:12.1f}{list_first:12.2f}{list_last:12.2f}"
        f"{list_last / list_first:12.2f}"
    )
    print(
        f"{'PrefixKeys + frozen model':32}{keys_total:12.1f}{keys_first:12.2f}{keys_last:12.2f}"
        f"{keys_last / keys_first:12.2f}"
    )
    print(f"ratio (list rebuild / PrefixKeys), total: {list_total / keys_total:.1f}x  (target >= 20x)")


if __name__ == "__main__":
    main()
