"""The trace checker's prefix rules: PFX-1, PFX-2, PFX-3, PFX-4, PFX-5, PFX-7, PFX-8, PFX-9.

``check_prefixes(checker)`` and ``check_same_batch(checker)``; see docs/engines.md.
"""

from __future__ import annotations

from typing import Any, Optional

from hicache_spec import prefix_before
from hicache_contracts.capabilities import EXTRA_INFO_METHODS
from hicache_contracts.engine._calls import EXTRA_INFO_ABSENT, EXTRA_INFO_PRESENT
from hicache_contracts.engine._check_base import (
    DERIVED_READ,
    HIT_QUERY,
    KV_READ,
    SIDECAR_READ,
    SIDECAR_WRITE,
    _Checker,
    describe,
    first_difference,
)


def check_prefixes(checker: _Checker) -> None:
    """PFX-1, PFX-2, PFX-3, PFX-4, PFX-7, PFX-9 per call; PFX-5 on calls and on the operation's prefix."""
    for call in checker.calls:
        if call.method not in EXTRA_INFO_METHODS:
            continue
        kind = checker.kind(call)
        state = call.extra_info_state
        checker.check("PFX-1")
        if call.prefix_keys_problem is not None:
            checker.fail(
                "PFX-1",
                f"{kind} {call.method}: {call.prefix_keys_problem}; prefix_keys must be None or a sequence of keys",
                call,
            )
            continue
        if checker.initial is None:
            checker.check("PFX-3")
            if state == EXTRA_INFO_PRESENT and call.prefix_keys is not None:
                checker.fail(
                    "PFX-3",
                    f"{kind} {call.method}: the operation's prefix is None (feature off) but the "
                    f"call received prefix_keys with {describe(call.prefix_keys)}",
                    call,
                )
            continue
        checker.check("PFX-7", "PFX-4")
        if state != EXTRA_INFO_PRESENT:
            how = "no extra_info argument" if state == EXTRA_INFO_ABSENT else "extra_info=None"
            checker.fail(
                "PFX-7",
                f"{kind} {call.method}: the feature is on (operation prefix of "
                f"{describe(checker.initial)}) but the call passed {how}",
                call,
            )
            continue
        if call.prefix_keys is None:
            collapsed = "[] collapsed to None" if not checker.initial else "a list turned into None"
            checker.fail(
                "PFX-4",
                f"{kind} {call.method}: received prefix_keys=None while the feature is on ({collapsed})",
                call,
            )
            continue
        _check_prefix_value(checker, call, kind)
    _check_prefix_immutability(checker)


def _check_prefix_value(checker: _Checker, call: Any, kind: Optional[str]) -> None:
    """PFX-2 and PFX-4 on a sliced call's prefix, PFX-9 on a sidecar call's."""
    received = call.prefix_keys
    if kind in (SIDECAR_READ, SIDECAR_WRITE):
        _check_sidecar_prefix(checker, call, kind, received)
        return
    offset = checker.offset(call)
    if offset is None and kind == HIT_QUERY and not call.all_keys:
        offset = 0  # an empty hit query asks about the operation's start
    if offset is None:
        return
    checker.check("PFX-2")
    expected = checker.expected_prefix(offset)
    if received == expected:
        return
    if not checker.initial and len(received) == 0 and expected:
        checker.fail(
            "PFX-4",
            f"{kind} {call.method} at page {offset}: received [] but {describe(expected)} "
            "precede its first key; an empty prefix must grow like any list",
            call,
        )
        return
    checker.fail(
        "PFX-2",
        f"{kind} {call.method} at page {offset}: received a prefix of {describe(received)}, "
        f"expected the operation's prefix ({describe(checker.initial)}) followed by chain[:{offset}] "
        f"= {describe(expected)}{first_difference(received, expected)}",
        call,
    )


def _check_sidecar_prefix(checker: _Checker, call: Any, kind: Optional[str], received: Any) -> None:
    """PFX-9: a sidecar call's prefix is the operation's prefix followed by the chain before its transfers' keys."""
    checker.check("PFX-9")
    starts = {}
    for transfer in call.transfers or ():
        keys = tuple(transfer.keys or ())
        if not keys:
            continue  # an empty transfer joins any prefix
        start = checker.position.get(keys[0])
        if start is None or keys != checker.chain[start : start + len(keys)]:
            continue  # keys outside the chain are HYB-2/HYB-3 findings, not prefix ones
        starts[start] = transfer.name
    if len(starts) > 1:
        checker.fail(
            "PFX-9",
            f"{kind} {call.method}: transfers whose keys start at pages {sorted(starts)} share "
            "one prefix, which cannot join all of them; one call per trailing-length group",
            call,
        )
        return
    if not starts:
        return
    ((start, name),) = starts.items()
    expected = prefix_before(checker.initial, checker.chain, start)
    if received != expected:
        checker.fail(
            "PFX-9",
            f"{kind} {call.method}: received a prefix of {describe(received)}; transfer "
            f"{name!r} starts at page {start}, so its prefix is the operation's prefix followed by "
            f"chain[:{start}] = {describe(expected)}{first_difference(received, expected)}",
            call,
        )


def _check_prefix_immutability(checker: _Checker) -> None:
    """PFX-5: neither a prefix handed to the backend nor the operation's own prefix changes."""
    for call in checker.calls:
        if call.extra_info_state != EXTRA_INFO_PRESENT or call.prefix_keys is None:
            continue
        checker.check("PFX-5")
        changed, value, problem = call.current_prefix()
        if changed:
            now = problem or describe(value)
            checker.fail(
                "PFX-5",
                f"{call.method}: the prefix handed to the backend changed after the call: "
                f"{describe(call.prefix_keys)} at call time, {now} now",
                call,
            )
    operation = checker.operation
    if "prefix_keys_after" in operation.model_fields_set:
        checker.check("PFX-5")
        after, initial = operation.prefix_keys_after, checker.initial
        if after != initial:
            how = "changed"
            if after is not None and initial is not None and len(after) > len(initial):
                if tuple(after[: len(initial)]) == tuple(initial):
                    grown = len(after) - len(initial)
                    taken = f" (chain[:{grown}])" if tuple(after[len(initial) :]) == checker.chain[:grown] else ""
                    how = f"was extended in place by {grown} key(s){taken}, as by prefix_keys += batch,"
            checker.fail(
                "PFX-5",
                f"the operation's own prefix list {how} during the operation: "
                f"{describe(initial)} when first handed out, {describe(after)} now; build a new list per "
                "batch (prefix_keys + batch_keys)",
            )


def check_same_batch(checker: _Checker) -> None:
    """PFX-8: a KV-derived v2 read carries the prefix of the KV read of its slice."""
    kv_reads_by_offset: dict[int, Any] = {}
    for call in checker.calls:
        kind = checker.kind(call)
        offset = checker.offset(call)
        if kind == KV_READ and offset is not None and call.method in EXTRA_INFO_METHODS:
            kv_reads_by_offset[offset] = call
        elif kind == DERIVED_READ and offset is not None and offset in kv_reads_by_offset:
            kv_read = kv_reads_by_offset[offset]
            checker.check("PFX-8")
            mine = call.prefix_keys if call.extra_info_state == EXTRA_INFO_PRESENT else None
            theirs = kv_read.prefix_keys if kv_read.extra_info_state == EXTRA_INFO_PRESENT else None
            if (mine is None) != (theirs is None) or (mine is not None and mine != theirs):
                checker.fail(
                    "PFX-8",
                    f"KV-derived read at page {offset} carries a prefix of {describe(mine)} "
                    f"({call.extra_info_state} extra_info) but the KV read of that slice (call "
                    f"#{kv_read.index}) carries {describe(theirs)}",
                    call,
                )
