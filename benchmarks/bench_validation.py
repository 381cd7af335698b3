"""Cost of validation at the boundary, next to building plain dataclasses.

One v2 call of a full batch: a ``PoolTransfer`` of 128 pages (keys and a
128 x page_size host-slot tensor) and the ``HiCacheStorageExtraInfo`` beside
it (a prefix of 16,384 pages, already a ``PrefixKeys``). The baseline builds
dataclasses shaped like SGLang's from the same values, which checks nothing.

Also printed: the boundary checks that are not part of model construction
(``validate_host_indices`` for 128 pages of 64 slots, strict
``validate_page_keys`` for 128 keys) and a JSON round trip of the extra info.

Run: ``python benchmarks/bench_validation.py`` (``--quick`` for fewer repeats).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import timeit
from typing import Any, Callable, Optional

import torch

from hicache_contracts import (
    HiCacheStorageExtraInfo,
    PoolName,
    PoolTransfer,
    PrefixKeys,
    validate_host_indices,
    validate_page_keys,
)
from hicache_spec import STORAGE_BATCH_SIZE

PAGE_SIZE = 64
"""Tokens per page: slots per key in host_indices."""
PREFIX_PAGES = 16_384
"""Pages in the prefix handed with the batch."""
TARGET_MICROSECONDS = 10.0
"""Target for one PoolTransfer plus one HiCacheStorageExtraInfo."""


@dataclasses.dataclass
class PlainPoolTransfer:
    """SGLang's shape, no checks."""

    name: Any
    host_indices: Any = None
    device_indices: Any = None
    keys: Optional[list] = None
    hit_policy: Any = "all_pages"
    nodes_to_load: Any = None
    indices_from_pool: Any = None


@dataclasses.dataclass
class PlainExtraInfo:
    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


def microseconds(run: Callable[[], Any], repeats: int, number: int) -> tuple[float, float]:
    """Return the best per-call time in µs over ``repeats`` rounds of ``number`` calls: wall clock, thread CPU time.

    On a shared machine the CPU time (``time.thread_time``) leaves out the time the thread waited for a core.
    """
    wall = min(timeit.repeat(run, repeat=repeats, number=number)) / number * 1e6
    cpu = min(timeit.Timer(run, timer=time.thread_time).repeat(repeat=repeats, number=number)) / number * 1e6
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    arguments = parser.parse_args()
    repeats, number = (3, 2_000) if arguments.quick else (7, 20_000)

    keys = [f"{index:064x}" for index in range(STORAGE_BATCH_SIZE)]
    host = torch.arange(STORAGE_BATCH_SIZE * PAGE_SIZE, dtype=torch.int64)
    prefix_list = [f"{index:064x}" for index in range(PREFIX_PAGES)]
    prefix = PrefixKeys(prefix_list)

    def plain() -> Any:
        return (
            PlainPoolTransfer(name=PoolName.KV, host_indices=host, keys=keys),
            PlainExtraInfo(prefix_keys=prefix_list),
        )

    def contract() -> Any:
        return (
            PoolTransfer(name=PoolName.KV, host_indices=host, keys=keys),
            HiCacheStorageExtraInfo(prefix_keys=prefix),
        )

    built_transfer, _ = contract()
    if built_transfer.host_indices is not host:
        raise SystemExit("the transfer copied its tensor; the benchmark is meaningless")

    info = HiCacheStorageExtraInfo(prefix_keys=prefix_list[:STORAGE_BATCH_SIZE], extra_info={"tenant": "a"})
    info_json = info.model_dump_json()
    rows = [
        ("plain dataclasses (baseline)", microseconds(plain, repeats, number)),
        ("PoolTransfer + HiCacheStorageExtraInfo", microseconds(contract, repeats, number)),
        (
            "  PoolTransfer alone",
            microseconds(lambda: PoolTransfer(name=PoolName.KV, host_indices=host, keys=keys), repeats, number),
        ),
        (
            "  HiCacheStorageExtraInfo alone",
            microseconds(lambda: HiCacheStorageExtraInfo(prefix_keys=prefix), repeats, number),
        ),
        ("HiCacheStorageExtraInfo.extend(128 keys)", microseconds(lambda: info.extend(keys), repeats, number)),
        (
            "validate_host_indices(128 x 64 slots)",
            microseconds(lambda: validate_host_indices(host, STORAGE_BATCH_SIZE, PAGE_SIZE), repeats, number // 10),
        ),
        (
            "validate_page_keys(128 keys, strict)",
            microseconds(lambda: validate_page_keys(keys, strict=True), repeats, number),
        ),
        (
            "extra info JSON round trip (128-key prefix)",
            microseconds(lambda: HiCacheStorageExtraInfo.model_validate_json(info_json), repeats, number // 10),
        ),
    ]
    baseline, baseline_cpu = rows[0][1]
    print(
        f"validation of one {STORAGE_BATCH_SIZE}-page batch (page_size {PAGE_SIZE}, prefix {PREFIX_PAGES} pages), "
        f"best of {repeats} x {number} calls, by the wall clock and by the thread's CPU time"
    )
    print(f"{'':46}{'µs':>10}{'x baseline':>12}{'CPU µs':>10}{'x baseline':>12}")
    for label, (cost, cpu) in rows:
        print(f"{label:46}{cost:10.2f}{cost / baseline:12.1f}{cpu:10.2f}{cpu / baseline_cpu:12.1f}")
    contract_cost, contract_cpu = rows[1][1]
    for clock, value in (("wall clock", contract_cost), ("CPU time", contract_cpu)):
        verdict = "met" if value < TARGET_MICROSECONDS else "NOT met"
        print(
            f"PoolTransfer + HiCacheStorageExtraInfo, {clock}: {value:.2f} µs, "
            f"{value / (baseline if clock == 'wall clock' else baseline_cpu):.1f}x the plain dataclasses "
            f"(target < {TARGET_MICROSECONDS:.0f} µs: {verdict})"
        )


if __name__ == "__main__":
    main()
