"""Hand-written traces: what a conforming controller does, call by call, with a batch size of 4.

The chain has 10 pages, so an operation has three slices: [0, 4), [4, 8),
[8, 10). ``prefetch_trace`` and ``backup_trace`` build a conforming
``TraceOperation``; the tests change one thing in it (``replace_call``,
``drop_call`` ...) and expect the checker to name the clause it breaks.
"""

from __future__ import annotations

from typing import Any, Optional

from hicache_contracts import FinalAck, PoolHitsAck, ProgressAck
from hicache_contracts.engine import TraceCall, TraceOperation, TraceTransfer

BATCH = 4
PAGE_SIZE = 16
SWA_WINDOW = 2


def key(number: int) -> str:
    return f"{number:064x}"


CHAIN = tuple(key(100 + index) for index in range(10))
PREFIX = (key(1), key(2))
PREFIXES = {"none": None, "empty": (), "anchor": PREFIX}
SLICES = ((0, 4), (4, 8), (8, 10))


class _Calls:
    """Accumulates TraceCalls with consecutive indices."""

    def __init__(self, prefix: Optional[tuple]) -> None:
        self.prefix = prefix
        self.calls: list[TraceCall] = []

    def info(self, offset: Optional[int]) -> dict:
        """The extra_info fields of a call at ``offset`` (None: the operation-level prefix)."""
        if self.prefix is None:
            return {"extra_info_state": "present", "prefix_keys": None}
        before = () if offset is None else CHAIN[:offset]
        return {"extra_info_state": "present", "prefix_keys": self.prefix + before}

    def add(self, method: str, **fields: Any) -> None:
        self.calls.append(TraceCall(index=len(self.calls), method=method, **fields))

    def add_window(self, method: str) -> None:
        """The SWA sidecar call: its trailing window at the chain's end, with the prefix that joins its keys (PFX-9)."""
        self.add(
            method,
            transfers=(TraceTransfer(name="swa", keys=CHAIN[-SWA_WINDOW:], hit_policy="trailing_pages"),),
            result={"swa": [True] * SWA_WINDOW},
            **self.info(len(CHAIN) - SWA_WINDOW),
        )

    def operation(self, **fields: Any) -> TraceOperation:
        """A TraceOperation over the whole chain made of these calls; ``fields`` add to or replace its fields."""
        whole = dict(
            chain=CHAIN, prefix_keys=self.prefix, batch_size=BATCH, page_size=PAGE_SIZE, calls=tuple(self.calls)
        )
        return TraceOperation(**{**whole, **fields})


def prefetch_trace(
    prefix: str = "anchor", *, hybrid: bool = False, whole_chain_query: bool = False, **operation: Any
) -> TraceOperation:
    """A conforming prefetch of the whole chain: hit query, reads (and sidecars), acks.

    The plain hit query is slice by slice unless ``whole_chain_query`` (SGLang 0.5.21+: one
    ``batch_exists`` over the chain); the hybrid one is always one ``batch_exists_v2``.
    """
    calls = _Calls(PREFIXES[prefix])
    if whole_chain_query and not hybrid:
        calls.add("batch_exists", keys=CHAIN, result=len(CHAIN), **calls.info(0))
    elif hybrid:
        calls.add(
            "batch_exists_v2",
            keys=CHAIN,
            transfers=(
                TraceTransfer(name="indexer", keys=CHAIN, indices_from_pool="kv"),
                TraceTransfer(name="swa", keys=CHAIN[-SWA_WINDOW:], hit_policy="trailing_pages"),
            ),
            result={"kv_hit_pages": 10, "extra_pool_hit_pages": {"kv": 10, "indexer": 10, "swa": 10}},
            **calls.info(0),
        )
    else:
        for start, end in SLICES:
            calls.add("batch_exists", keys=CHAIN[start:end], result=end - start, **calls.info(start))
    acks: list[Any] = []
    for number, (start, end) in enumerate(SLICES):
        calls.add("batch_get_v1", keys=CHAIN[start:end], result=[True] * (end - start), **calls.info(start))
        if hybrid:
            calls.add(
                "batch_get_v2",
                transfers=(TraceTransfer(name="indexer", keys=CHAIN[start:end], indices_from_pool="kv"),),
                result={"indexer": [True] * (end - start)},
                **calls.info(start),
            )
        acks.append(ProgressAck(operation_id="op", slice_index=number, tokens=end * PAGE_SIZE))
    if hybrid:
        calls.add_window("batch_get_v2")
        acks.append(PoolHitsAck(operation_id="op", pool_hits={"swa": 10}))  # type: ignore[arg-type]
    acks.append(FinalAck(operation_id="op", tokens=10 * PAGE_SIZE))
    return calls.operation(**{"operation_id": "op", "acks": tuple(acks), **operation})


def backup_trace(prefix: str = "anchor", *, hybrid: bool = False, **operation: Any) -> TraceOperation:
    """A conforming backup of the whole chain: sidecars first (hybrid), then KV slice by slice.

    Sidecars as SGLang 0.5.23 writes them: one ``batch_set_v2`` per trailing-length group over the
    whole span, each with the prefix that joins its keys (PFX-9, HYB-5).
    """
    calls = _Calls(PREFIXES[prefix])
    if hybrid:
        calls.add(
            "batch_set_v2",
            transfers=(TraceTransfer(name="indexer", keys=CHAIN, indices_from_pool="kv"),),
            result={"indexer": [True] * len(CHAIN)},
            **calls.info(0),
        )
        calls.add_window("batch_set_v2")
    for start, end in SLICES:
        calls.add("batch_set_v1", keys=CHAIN[start:end], result=[True] * (end - start), **calls.info(start))
    return calls.operation(**{"operation_id": "backup", "backup_completed_tokens": 10 * PAGE_SIZE, **operation})


# ------------------------------------------------------------------ edits
def _given(model: Any) -> dict:
    """The fields a model was built with (a left-out selective field stays left out)."""
    return {name: getattr(model, name) for name in model.model_fields_set}


def find(operation: TraceOperation, method: str, number: int = 0, *, derived: Optional[bool] = None) -> int:
    """Return the position of the ``number``-th call of ``method`` (for batch_get_v2: KV-derived or not)."""
    seen = 0
    for position, call in enumerate(operation.calls):
        if call.method != method:
            continue
        if derived is not None and any(t.indices_from_pool == "kv" for t in call.transfers or ()) != derived:
            continue
        if seen == number:
            return position
        seen += 1
    raise LookupError(f"no call {number} of {method}")


def replace_call(operation: TraceOperation, position: int, **changes: Any) -> TraceOperation:
    calls = list(operation.calls)
    calls[position] = TraceCall(**{**_given(calls[position]), **changes})
    return operation.model_copy(update={"calls": tuple(calls)})


def drop_call(operation: TraceOperation, position: int) -> TraceOperation:
    return renumber(operation, [call for index, call in enumerate(operation.calls) if index != position])


def move_call(operation: TraceOperation, position: int, to: int) -> TraceOperation:
    calls = list(operation.calls)
    calls.insert(to, calls.pop(position))
    return renumber(operation, calls)


def duplicate_call(operation: TraceOperation, position: int) -> TraceOperation:
    calls = list(operation.calls)
    calls.insert(position + 1, calls[position])
    return renumber(operation, calls)


def renumber(operation: TraceOperation, calls: list) -> TraceOperation:
    numbered = tuple(TraceCall(**{**_given(call), "index": index}) for index, call in enumerate(calls))
    return operation.model_copy(update={"calls": numbered})


def with_fields(operation: TraceOperation, **changes: Any) -> TraceOperation:
    """Return the operation rebuilt (validated) with ``changes``."""
    return TraceOperation(**{**_given(operation), **changes})
