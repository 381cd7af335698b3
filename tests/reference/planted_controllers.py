"""Planted-bug controllers: each a small subclass of the reference controller that breaks one rule.

The checks in ``controller_helpers`` must catch every one of them
(``test_controller_planted.py``); the engine trace checker can reuse them.
"""

from __future__ import annotations

from types import SimpleNamespace

from hicache_contracts import HiCacheStorageExtraInfo
from hicache_reference import CacheController
from hicache_reference.calls import confirmed_pages
from hicache_spec import plan_batches


class PrefixNotExtended(CacheController):
    """PFX-2: every slice gets the operation's prefix, never the keys before the slice."""

    def _extra_info_for_slice(self, operation, start):
        return operation.base_info.extend([])


class EmptyPrefixCollapsed(CacheController):
    """PFX-4: an empty prefix is sent as None (SGLang extended the prefix only when non-empty)."""

    def _operation_extra_info(self, prefix):
        info = super()._operation_extra_info(prefix)
        return HiCacheStorageExtraInfo(prefix_keys=None) if info.prefix_keys == [] else info


class PrefixAlwaysOn(CacheController):
    """PFX-3: the feature is off but backends receive an empty list."""

    def _operation_extra_info(self, prefix):
        return HiCacheStorageExtraInfo(prefix_keys=list(prefix or ()))


class PrefixMutatedInPlace(CacheController):
    """PFX-5: one list per operation, extended in place with ``+=`` after each call."""

    def _extra_info_for_slice(self, operation, start):
        shared = operation.__dict__.setdefault(
            "_shared_prefix",
            SimpleNamespace(prefix_keys=list(operation.base_info.prefix_keys or ()), extra_info=None, start=0),
        )
        if shared.prefix_keys is not None:
            shared.prefix_keys += list(operation.keys[shared.start : start])
        shared.start = start
        return shared


class OversizedKvSlices(CacheController):
    """CTL-2: each KV read asks for the keys of two slices at once."""

    def _read_slice(self, operation, slice_index, start, end):
        return super()._read_slice(operation, slice_index, start, min(operation.hit_pages, end + self.batch_size))


class QueriesShortSpans(CacheController):
    """CTL-3: a span below the threshold is queried anyway (and revoked only after the query)."""

    def _span_worth_querying(self, operation):
        return True


class HitQueryNeverStops(CacheController):
    """CTL-1: the hit query goes on after a slice that was not fully hit."""

    def _hit_query_v1(self, operation):
        hit = 0
        for index, (start, end) in enumerate(plan_batches(len(operation.keys), self.batch_size)):
            hit += self._exists_slice(operation, index, start, end)
        return hit


class ReadsOnAfterShortSlice(CacheController):
    """CTL-4: a short slice does not stop the reads."""

    def _stops_after(self, operation, loaded, asked):
        return False


class SkipsFrozenAcks(CacheController):
    """CTL-5: no progress ack once progress froze."""

    def _emit_ack(self, operation, ack):
        progress = operation.progress_acks
        if ack.kind == "progress" and progress and progress[-1].tokens == ack.tokens:
            return
        super()._emit_ack(operation, ack)


class NoFinalAckOnError(CacheController):
    """CTL-6: an operation that failed ends without its final ack."""

    def _finish_prefetch(self, operation):
        if operation.error is not None:
            operation._finish()
            return
        super()._finish_prefetch(operation)


class TrustsResultLength(CacheController):
    """CTL-11: counts the True entries of whatever came back, without checking its length or type."""

    def _read_kv_slice(self, operation, keys, slots, extra_info):
        outcome = self.caller.call("batch_get_v1", keys, slots, extra_info)
        result = outcome.result if isinstance(outcome.result, list) else []
        return min(len(keys), sum(1 for flag in result if flag))


class DoubleFree(CacheController):
    """CTL-12: the unloaded tail is freed twice."""

    def _free_host_slots(self, operation, pool, slots):
        super()._free_host_slots(operation, pool, slots)
        super()._free_host_slots(operation, pool, slots)


class LeakyRevoke(CacheController):
    """CTL-12: a revoked prefetch keeps its host slots."""

    def _revoke(self, operation, reason):
        operation.revoked = True
        operation.revoke_reason = reason
        operation.host_indices = None


class AlwaysWorthIt(CacheController):
    """CTL-3: the threshold is never applied."""

    def _is_worth_prefetching(self, operation, agreed_pages):
        return agreed_pages > 0


class IgnoresPolicy(CacheController):
    """CTL-9: nothing ever terminates a prefetch."""

    def _should_terminate(self, operation):
        return False


class CountsFailedSlice(CacheController):
    """CTL-7: a backup slice counts whenever the call returned, whatever its results."""

    def _write_slice(self, operation, slice_index, start, end):
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        outcome = self.caller.call("batch_set_v1", keys, slots, self._extra_info_for_slice(operation, start))
        return outcome.returned


class EveryRankWritesReplicatedKv(CacheController):
    """CTL-8: every TP rank writes replicated KV."""

    def _writes_kv(self):
        return True


class DerivedReadWithOwnInfo(CacheController):
    """PFX-8: the KV-derived read gets a second extra info object instead of the KV read's."""

    def _read_derived_slice(self, operation, keys, slots, extra_info):
        return super()._read_derived_slice(operation, keys, slots, extra_info.extend([]))


class DerivedNotRead(CacheController):
    """HYB-1: KV slices are read without their KV-derived sidecars."""

    def _read_slice(self, operation, slice_index, start, end):
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        return self._read_kv_slice(operation, keys, slots, self._extra_info_for_slice(operation, start))


class WindowAtQueryEnd(CacheController):
    """HYB-3: the trailing window ends where the query ended, not at the agreed hit."""

    def _sidecar_window(self, pool, hit_pages):
        return super()._sidecar_window(pool, len(self._current.keys))

    def _read_sidecars(self, operation, hit_pages):
        self._current = operation
        return super()._read_sidecars(operation, hit_pages)


class MissingPoolIsHit(CacheController):
    """HYB-4: a pool missing from the sidecar result counts as loaded."""

    def _sidecar_read_succeeded(self, outcome, transfers):
        return outcome.returned and all(
            transfer.name.value not in outcome.result
            or confirmed_pages(outcome.result[transfer.name.value], len(transfer.keys)) == len(transfer.keys)
            for transfer in transfers
        )


class KvBeforeSidecars(CacheController):
    """HYB-5: the first KV slice is written before the sidecars."""

    def _write_sidecars(self, operation):
        self._write_slice(operation, 0, 0, min(self.batch_size, len(operation.keys)))
        return super()._write_sidecars(operation)


class SkipsHitAgreementOnMiss(CacheController):
    """RANK-1: a rank that missed does not take part in the hit agreement."""

    def _agree_hit(self, operation, local_hit):
        return 0 if local_hit == 0 else super()._agree_hit(operation, local_hit)


class NoAckAgreement(CacheController):
    """RANK-3: acks are emitted without the all-reduce."""

    def _agree_ack(self, operation, tokens):
        return tokens


__all__ = [
    name
    for name, value in dict(globals()).items()
    if isinstance(value, type) and issubclass(value, CacheController) and value is not CacheController
]
