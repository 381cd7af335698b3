"""The trace checker's page rules: offsets and sizes (CTL-2), the reads of a prefetch and what they confirmed.

``locate``, ``check_sizes``, ``read_slices`` (CTL-4, RANK-2, HYB-1, CTL-11),
``check_sidecar_reads`` (HYB-2, HYB-3) and the sidecar helpers HYB-5 shares, each
taking a ``_Checker``; see docs/engines.md.
"""

from __future__ import annotations

from typing import Any, Optional

from hicache_spec import TRAILING_PAGES, compute_trailing_window, plan_batches
from hicache_contracts.engine._check_base import (
    DERIVED_READ,
    HIT_QUERY,
    KV_READ,
    KV_WRITE,
    SIDECAR_READ,
    SIDECAR_WRITE,
    SLICED_KINDS,
    _Checker,
    describe,
    leading_flags,
)


def locate(checker: _Checker) -> None:
    """Find each sliced call's offset in the chain; a call whose keys are not a run of it breaks CTL-2."""
    for call in checker.calls:
        kind = checker.kind(call)
        if kind not in SLICED_KINDS:
            continue
        keys = call.all_keys
        if kind == DERIVED_READ:
            first = call.transfers[0].keys if call.transfers else None
            for transfer in call.transfers[1:]:
                if transfer.keys != first:  # HYB-1: a first transfer of no keys (None) differs from a second of some
                    checker.fail(
                        "HYB-1",
                        f"{kind} {call.method}: transfer {transfer.name!r} has other keys than "
                        f"transfer {call.transfers[0].name!r}; every KV-derived transfer of a slice "
                        "reads the slice's KV keys",
                        call,
                    )
                    checker.check("HYB-1")
        if not keys:
            checker.offsets[id(call)] = None
            continue
        offset = checker.position.get(keys[0])
        if offset is None or tuple(keys) != checker.chain[offset : offset + len(keys)]:
            where = (
                "its first key is not in the operation's chain"
                if offset is None
                else (f"its keys are not the run of the chain that starts at page {offset}")
            )
            checker.fail("CTL-2", f"{kind} {call.method} with {describe(keys)}: {where}", call)
            checker.offsets[id(call)] = None
            continue
        checker.offsets[id(call)] = offset


def check_sizes(checker: _Checker) -> None:
    """CTL-2: no call carries more than batch_size keys; IO and backup calls start at multiples of it."""
    batch_size = checker.batch_size
    for call in checker.calls:
        kind = checker.kind(call)
        if kind is None:
            continue
        checker.check("CTL-2")
        counts = [len(call.keys)] if call.keys is not None else []
        counts += [len(transfer.keys) for transfer in call.transfers or () if transfer.keys is not None]
        largest = max(counts, default=0)
        if kind in (HIT_QUERY, SIDECAR_READ, SIDECAR_WRITE):
            continue  # not sliced: the whole-chain hit query and the trailing-length groups (docs/engines.md)
        if largest > batch_size:
            checker.fail(
                "CTL-2", f"{kind} {call.method} carries {largest} keys, more than batch_size {batch_size}", call
            )
        offset = checker.offset(call)
        if kind in (KV_READ, DERIVED_READ, KV_WRITE) and offset is not None and offset % batch_size:
            checker.fail(
                "CTL-2",
                f"{kind} {call.method} starts at page {offset}, not a multiple of batch_size {batch_size}",
                call,
            )


def read_slices(checker: _Checker, agreed: Optional[int]) -> tuple[list[int], list[int], bool]:
    """CTL-4, HYB-1, RANK-2; return (pages asked per slice read, pages loaded per slice read, stopped early)."""
    reads = checker.of_kind(KV_READ)
    derived = checker.of_kind(DERIVED_READ)
    derived_by_offset: dict[int, list[Any]] = {}
    for call in derived:
        offset = checker.offset(call)
        if offset is not None:
            derived_by_offset.setdefault(offset, []).append(call)
    asked: list[int] = []
    loaded: list[int] = []
    stop: Optional[str] = None
    read_offsets = set()
    if reads:
        checker.check("CTL-4")
        if agreed is not None:
            checker.check("RANK-2")
    batch_size = checker.batch_size
    terminated = checker.operation.terminated_before_slice
    for slice_index, call in enumerate(reads):
        offset = checker.offset(call)
        keys = call.all_keys
        got = 0 if call.raised is not None else leading_flags(call.result, len(keys))
        checker.confirmed_pages += got
        if stop is None and terminated is not None and slice_index >= terminated:
            stop = f"the operation was terminated before slice {terminated}"
        if stop is not None:
            checker.fail("CTL-4", f"KV read of pages [{offset}...) after {stop}", call)
            continue
        start = slice_index * batch_size
        end = start + batch_size if agreed is None else min(start + batch_size, agreed)
        last = slice_index == len(reads) - 1
        in_order = offset == start and (
            len(keys) == end - start or (agreed is None and last and len(keys) < end - start)
        )
        if (
            offset is not None
            and offset % batch_size == 0
            and not in_order
            and start < (len(checker.chain) if agreed is None else agreed)
        ):
            checker.fail(
                "CTL-4",
                f"KV read {slice_index} reads pages [{offset}, {offset + len(keys)}) but slice "
                f"{slice_index} of the agreed keys is pages [{start}, {end})",
                call,
            )
        if agreed is not None and offset is not None and offset + len(keys) > agreed:
            checker.fail(
                "RANK-2",
                f"KV read of pages [{offset}, {offset + len(keys)}) goes beyond the agreed hit of {agreed} pages",
                call,
            )
        for sidecar in () if offset is None else derived_by_offset.get(offset, ()):
            checker.check("HYB-1")
            for transfer in sidecar.transfers:
                flags = (sidecar.result or {}).get(transfer.name) if isinstance(sidecar.result, dict) else None
                sidecar_got = 0 if sidecar.raised is not None else leading_flags(flags, len(transfer.keys or ()))
                got = min(got, sidecar_got)
        if offset is not None:
            read_offsets.add(offset)
        asked.append(len(keys))
        loaded.append(got)
        if got < len(keys):
            stop = f"slice {slice_index} loaded {got} of {len(keys)} pages"
    for call in derived:
        offset = checker.offset(call)
        if offset is not None and offset not in read_offsets:
            checker.check("HYB-1")
            checker.fail(
                "HYB-1",
                f"KV-derived read of pages [{offset}...) has no KV read of the same slice (or follows the end of IO)",
                call,
            )
    stopped = stop is not None or (terminated is not None and terminated <= len(asked))
    if reads and agreed is not None and not stopped and sum(asked) < agreed:
        checker.fail(
            "CTL-4",
            f"IO read {sum(asked)} of the {agreed} agreed pages and stopped although no slice "
            "was short and the operation was not terminated",
            reads[-1],
        )
    return asked, loaded, stopped


def check_sidecar_reads(checker: _Checker, kv_complete: bool, loaded_pages: int) -> None:
    """HYB-2 (once, after KV completed) and HYB-3 (trailing windows end at the hit), read with CTL-2.

    A pool's window is the keys of its transfers joined in call order.
    """
    sidecars = checker.of_kind(SIDECAR_READ)
    if not sidecars:
        return
    checker.check("HYB-2")
    last_kv = max((call.index for call in checker.calls if checker.kind(call) in (KV_READ, DERIVED_READ)), default=-1)
    keys_per_pool, policy_per_pool = sidecar_pages(sidecars)
    fail_extra_calls(
        checker,
        "HYB-2",
        sidecars,
        keys_per_pool,
        "read number {number}: other sidecars are read once per prefetch (in {needed} call(s): {why})",
    )
    for call in sidecars:
        if not kv_complete:
            checker.fail(
                "HYB-2",
                "sidecar read although KV IO did not complete (a short slice, termination or a partial read)",
                call,
            )
        if call.index < last_kv:
            checker.fail("HYB-2", f"sidecar read before KV IO finished (KV call #{last_kv} comes later)", call)
    fail_repeated_pages(
        checker, "HYB-2", keys_per_pool, "read twice; other sidecars are read once per prefetch", sidecars[-1]
    )
    for name, keys in keys_per_pool.items():
        if policy_per_pool[name] != TRAILING_PAGES or not keys:
            continue
        checker.check("HYB-3")
        start, end = compute_trailing_window(loaded_pages, len(keys))
        if tuple(keys) != checker.chain[start:end]:
            where = checker.position.get(keys[0])
            checker.fail(
                "HYB-3",
                f"TRAILING_PAGES transfer {name!r} reads {describe(keys)} from page {where}; "
                f"its window is pages [{start}, {end}), ending at the hit of {loaded_pages} pages",
                sidecars[0],
            )


def sidecar_pages(calls: list[Any]) -> tuple[dict[Any, list[Any]], dict[Any, Any]]:
    """Each sidecar pool's keys over ``calls``, joined in call order, and the pool's hit policy (HYB-2, HYB-5)."""
    keys_per_pool: dict[Any, list[Any]] = {}
    policy_per_pool: dict[Any, Any] = {}
    for call in calls:
        for transfer in call.transfers or ():
            keys_per_pool.setdefault(transfer.name, []).extend(transfer.keys or ())
            policy_per_pool[transfer.name] = transfer.hit_policy
    return keys_per_pool, policy_per_pool


def fail_extra_calls(
    checker: _Checker, clause: str, calls: list[Any], keys_per_pool: dict[Any, list[Any]], what: str
) -> None:
    """Fail ``clause`` on each sidecar call past those allowed (``sidecar_calls_allowed``): "sidecar <what>",
    ``what`` formatted with the call's ``number`` from 1, ``needed`` and ``why`` (the rule for how many)."""
    needed = sidecar_calls_allowed(checker, keys_per_pool)
    why = "one per trailing-length group, or as few as CTL-2 needs to split the longest pool"
    for number, call in enumerate(calls[needed:], needed + 1):
        checker.fail(clause, "sidecar " + what.format(number=number, needed=needed, why=why), call)


def fail_repeated_pages(
    checker: _Checker, clause: str, keys_per_pool: dict[Any, list[Any]], what: str, call: Any
) -> None:
    """Fail ``clause`` once per sidecar pool that names a page twice: "sidecar pool 'x' had a page <what>"."""
    for name, keys in keys_per_pool.items():
        if len(set(keys)) != len(keys):
            checker.fail(clause, f"sidecar pool {name!r} had a page {what}", call)


def sidecar_calls_allowed(checker: _Checker, keys_per_pool: dict[Any, list[Any]]) -> int:
    """How many sidecar v2 calls an operation may make: one per trailing-length group (PFX-9), or CTL-2's split."""
    groups = len({len(set(keys)) for keys in keys_per_pool.values()})
    longest = max((len(set(keys)) for keys in keys_per_pool.values()), default=0)
    return max(1, groups, len(plan_batches(longest, checker.batch_size)))
