"""What every rule family of the trace checker reads: the kinds of call, the findings, one operation's state.

``_Findings`` collects violations and the clauses checked; ``_Checker`` adds
one ``TraceOperation``'s calls, each call's kind and offset. The rules are in
docs/engines.md ("The rules, clause by clause").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from hicache_spec import KV, TRAILING_PAGES, expected_prefixes, prefix_before
from hicache_spec.confirmation import confirmed_hit, confirmed_pages
from hicache_spec.values import is_count
from hicache_contracts.errors import ContractViolation
from hicache_contracts.engine._report import TraceReport, TraceViolation
from hicache_contracts.engine._trace import TraceOperation

HIT_QUERY = "hit query"
KV_READ = "KV read"
DERIVED_READ = "KV-derived read"
SIDECAR_READ = "sidecar read"
KV_WRITE = "KV write"
SIDECAR_WRITE = "sidecar write"

_KIND_BY_METHOD = {
    "batch_exists": HIT_QUERY,
    "batch_exists_v2": HIT_QUERY,
    "batch_get_v1": KV_READ,
    "batch_get": KV_READ,
    "batch_set_v1": KV_WRITE,
    "batch_set": KV_WRITE,
    "batch_set_v2": SIDECAR_WRITE,
}
SLICED_KINDS = (HIT_QUERY, KV_READ, DERIVED_READ, KV_WRITE)
"""Kinds whose keys are a run of the chain, so that the call has an offset."""


def kind_of(call: Any) -> Optional[str]:
    """Return the role of a call in its operation, or None for a call the checker does not look at."""
    if call.method == "batch_get_v2":
        transfers = call.transfers or ()
        if transfers and all(transfer.indices_from_pool == KV for transfer in transfers):
            return DERIVED_READ
        return SIDECAR_READ
    return _KIND_BY_METHOD.get(call.method)


def kinds_of(calls: Sequence[Any]) -> dict[int, Optional[str]]:
    """Return each call's role (by ``id``), a batch_get_v2 that reads a slice's KV keys counted as KV-derived."""
    kinds = {id(call): kind_of(call) for call in calls}
    last_kv_read: dict[Any, Any] = {}
    for call in calls:
        kind = kinds[id(call)]
        if kind == KV_READ:
            last_kv_read[call.thread_id] = call
        elif kind == SIDECAR_READ:
            read = last_kv_read.get(call.thread_id)
            transfers = call.transfers or ()
            if (
                read is not None
                and transfers
                and all(
                    transfer.hit_policy != TRAILING_PAGES and tuple(transfer.keys or ()) == tuple(read.all_keys)
                    for transfer in transfers
                )
            ):
                kinds[id(call)] = DERIVED_READ
        if kind not in (KV_READ, None):
            last_kv_read.pop(call.thread_id, None)
    return kinds


def hit_count(call: Any) -> int:
    """Return the pages a hit-query call reported, clamped to its keys; a raise or a malformed result is 0 (CTL-11)."""
    if call.raised is not None:
        return 0
    result = call.result
    if isinstance(result, dict):
        result = result.get("kv_hit_pages")
    return confirmed_hit(result, len(call.all_keys))


def queried_chain(calls: Sequence[Any], kinds: dict[int, Optional[str]], chain: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return ``chain``, or the keys the hit query asked for when ``chain`` stops at the hit they found."""
    queried: list[Any] = []
    hit = 0
    for call in calls:
        if kinds[id(call)] != HIT_QUERY:
            continue
        keys = tuple(call.all_keys)
        found = hit_count(call)
        queried.extend(keys)
        hit += found
        if found < len(keys):
            break
    queried_keys = tuple(queried)
    if len(chain) < len(queried_keys) and len(chain) <= hit and queried_keys[: len(chain)] == chain:
        return queried_keys
    return chain


def leading_flags(result: Any, count: int) -> int:
    """Return the pages a v1/v2/legacy read or write confirmed (CTL-11); a recorded tuple is the engine's list."""
    return confirmed_pages(result, count, snapshot=True)


def describe(keys: Any) -> str:
    if keys is None:
        return "None"
    return f"{len(keys)} key(s)" if len(keys) != 1 else "1 key"


def first_difference(received: Sequence[Any], expected: Optional[Sequence[Any]]) -> str:
    for position, (got, wanted) in enumerate(zip(received, expected or ())):
        if got != wanted:
            return f"; first difference at position {position}"
    return ""


def check_int(name: str, value: Any, minimum: int, clause_id: str, *, optional: bool = True) -> None:
    """Raise ContractViolation naming ``name`` unless ``value`` is an int >= ``minimum`` (or None when optional)."""
    if value is None and optional:
        return
    if not is_count(value, minimum):
        raise ContractViolation(name, f"must be an int >= {minimum}", value, clause_id)


class _Findings:
    """The findings of one check: violations in the order found, and the clauses it had material for."""

    def __init__(self, operation_id: Any = None) -> None:
        self.operation_id = operation_id
        self.violations: list[TraceViolation] = []
        self.checked: dict[str, None] = {}

    def fail(self, clause_id: str, message: str, call: Any = None, ack_index: Optional[int] = None) -> None:
        self.violations.append(
            TraceViolation(
                clause=clause_id,
                message=message,
                call_index=None if call is None else call.index,
                ack_index=ack_index,
            )
        )

    def check(self, *clause_ids: str) -> None:
        for clause_id in clause_ids:
            self.checked[clause_id] = None

    def report(self) -> TraceReport:
        return TraceReport(
            violations=tuple(self.violations), checked=tuple(self.checked), operation_id=self.operation_id
        )


class _Checker(_Findings):
    """One operation being checked: its settings, its calls with their kinds and offsets, the findings so far.

    ``calls`` defaults to the operation's own; ``check_trace`` passes the live recorded calls.
    """

    def __init__(self, operation: TraceOperation, calls: Optional[Sequence[Any]] = None) -> None:
        super().__init__(operation.operation_id)
        self.operation = operation
        self.calls = list(operation.calls if calls is None else calls)
        self.kinds = kinds_of(self.calls)
        self.chain = queried_chain(self.calls, self.kinds, operation.chain)
        self.initial = operation.prefix_keys
        self.batch_size = operation.batch_size
        self.position: dict[str, int] = {}
        for index, key in enumerate(self.chain):
            self.position.setdefault(key, index)
        initial, chain, batch_size = self.initial, self.chain, self.batch_size
        self.expected_by_slice = None if initial is None else expected_prefixes(initial, chain, batch_size)
        self.offsets: dict[int, Optional[int]] = {}
        """Each sliced call's offset in the chain (by ``id``), None when its keys are not a run of it."""
        self.confirmed_pages = 0
        """Pages every KV read confirmed, the reads that broke a rule included (CTL-11)."""

    def kind(self, call: Any) -> Optional[str]:
        return self.kinds[id(call)]

    def offset(self, call: Any) -> Optional[int]:
        return self.offsets.get(id(call))

    def of_kind(self, kind: str) -> list[Any]:
        return [call for call in self.calls if self.kinds[id(call)] == kind]

    def expected_prefix(self, offset: int) -> Optional[tuple[str, ...]]:
        if offset % self.batch_size == 0 and self.expected_by_slice is not None:
            slot = offset // self.batch_size
            if slot < len(self.expected_by_slice):
                return self.expected_by_slice[slot]
        return prefix_before(self.initial, self.chain, offset)

    def slice_keys(self, slice_index: int) -> tuple[Any, ...]:
        start = slice_index * self.batch_size
        return self.chain[start : start + self.batch_size]
