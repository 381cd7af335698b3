"""Planted-bug controllers: the reference controller with one method overridden to break one rule.

Each class names the bug it plants; ``test_planted_controllers.py`` runs it
and asserts the trace checker reports the clause it breaks. Most bugs are
ones SGLang releases shipped (CONTRACT.md §5, §6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from hicache_contracts import HiCacheStorageExtraInfo, PoolName, PoolTransfer
from hicache_reference import CacheController
from hicache_reference.calls import confirmed_exists, confirmed_pool_pages


@dataclass
class MutableExtraInfo:
    """An extra info shaped like SGLang's dataclass: mutable, holding the list it was given (not a copy)."""

    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


class InPlacePrefixController(CacheController):
    """PFX-5: one prefix list per operation, grown in place with ``+=`` and shared by every info handed out."""

    def _extra_info_for_slice(self, operation: Any, start: int) -> Any:
        lists = self.__dict__.setdefault("_shared_prefixes", {})
        base = operation.base_info.prefix_keys
        if base is None:
            return MutableExtraInfo(prefix_keys=None)
        prefix, covered = lists.get(id(operation), (list(base), 0))
        if start > covered:
            prefix += operation.keys[covered:start]  # the bug: in place, on the list earlier calls received
            covered = start
        lists[id(operation)] = (prefix, covered)
        return MutableExtraInfo(prefix_keys=prefix)


class ExtendOnlyWhenNonEmptyController(CacheController):
    """PFX-4: the prefix is extended only when it is non-empty, so ``[]`` never grows (SGLang before the fix)."""

    def _extra_info_for_slice(self, operation: Any, start: int) -> Any:
        if operation.base_info.prefix_keys:
            return super()._extra_info_for_slice(operation, start)
        return operation.base_info


class EmptyPrefixAsNoneInHitQueryController(CacheController):
    """PFX-4: the hit query turns ``[]`` into None (``prefix_keys or None``)."""

    def _exists_slice(self, operation: Any, slice_index: int, start: int, end: int) -> int:
        keys = list(operation.keys[start:end])
        prefix = self._extra_info_for_slice(operation, start).prefix_keys
        extra_info = HiCacheStorageExtraInfo(prefix_keys=prefix or None)  # the bug
        outcome = self.caller.call("batch_exists", keys, extra_info, quiescence=operation.quiescence)
        return confirmed_exists(outcome.result, len(keys)) if outcome.returned else 0


class DerivedReadWithoutExtraInfoController(CacheController):
    """PFX-7, PFX-8: the KV-derived v2 read is made without extra_info (SGLang before the fix)."""

    def _read_derived_slice(self, operation: Any, keys: list, slots: Any, extra_info: Any) -> int:
        transfers = [
            PoolTransfer(name=pool.name, host_indices=slots, keys=keys, indices_from_pool=PoolName.KV)
            for pool in self.derived_pools
        ]
        outcome = self.caller.call("batch_get_v2", transfers, quiescence=operation.quiescence)  # the bug
        if not outcome.returned:
            return 0
        return min(confirmed_pool_pages(outcome.result, pool.name, len(keys)) for pool in self.derived_pools)


class OperationPrefixForSidecarsController(CacheController):
    """PFX-9: every sidecar call carries the operation-level prefix, also a trailing window's (the old decision)."""

    def _sidecar_groups(self, operation: Any, span: Any, transfers: list) -> list:
        return [(operation.base_info, group) for _, group in super()._sidecar_groups(operation, span, transfers)]


class HitQueryIgnoresShortSliceController(CacheController):
    """CTL-1: the hit query goes on after a slice that is not fully hit."""

    def _hit_query_v1(self, operation: Any) -> int:
        hit, stopped = 0, False
        for slice_index, (start, end) in enumerate(self._slices(len(operation.keys))):
            found = self._exists_slice(operation, slice_index, start, end)  # the bug: no break on a short slice
            if not stopped:
                hit += found
            stopped = stopped or found < end - start
        return hit

    def _slices(self, count: int) -> list:
        return [(start, min(start + self.batch_size, count)) for start in range(0, count, self.batch_size)]


class IgnoresTerminationController(CacheController):
    """CTL-4, CTL-9: termination is never seen, so IO goes on after the operation was terminated."""

    def _should_terminate(self, operation: Any) -> bool:
        return False


class CountsUnconfirmedPagesController(CacheController):
    """CTL-4, CTL-11: every slice counts as fully loaded, whatever the backend confirmed."""

    def _read_slice(self, operation: Any, slice_index: int, start: int, end: int) -> int:
        super()._read_slice(operation, slice_index, start, end)
        return end - start  # the bug


class NoFinalAckAfterBackendErrorController(CacheController):
    """CTL-6: when the backend raised, the IO thread finishes without the final ack."""

    def _finish_prefetch(self, operation: Any) -> None:
        if operation.error and "raised" in operation.error:
            operation._finish()  # the bug: the scheduler never hears of it
            return
        super()._finish_prefetch(operation)
