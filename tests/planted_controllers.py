"""The planted-bug controllers: one catalog, keyed by clause, each entry with the oracles that must catch it.

Each bug is a small subclass of one collaborator of the reference controller
(``hicache_reference.controller_parts``, ``hit_query``, ``prefetch_io``, ...),
plugged in with ``CacheController.with_parts``. Most are bugs SGLang releases
shipped (CONTRACT.md §5, §6). ``CATALOG`` lists, per entry, every oracle that
must name its clause:

- ``checks(name)``: the controller's own checks (``tests/reference/controller_checks.py``)
  over the named scenario of ``tests/reference/test_controller_planted.py``;
- ``trace(scenario)``: the engine trace checker (``check_trace``) over one engine scenario;
- ``engine(scenario)``: the engine suite's ``check_reference_controller`` over that scenario.

``tests/reference/test_controller_planted.py`` runs every oracle of every
entry, and the reference controller through each of them. One file of about
500 lines: the bugs beside the catalog that names their oracles.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional, Union

from hicache_contracts import HiCacheStorageExtraInfo, PageKeys, PoolName, PoolTransfer
from hicache_contracts.engine import EngineScenario as Scenario
from hicache_reference import CacheController
from hicache_reference.backup_writer import BackupWriter, StorageWriter
from hicache_reference.calls import confirmed_exists, confirmed_pages, confirmed_pool_pages
from hicache_reference.controller_parts import Acks, PrefixInfo, Termination, Upkeep
from hicache_reference.hit_query import HitQuery
from hicache_reference.prefetch_io import PrefetchIO
from hicache_reference.sidecar_reads import SidecarReader
from hicache_spec import STORAGE_BATCH_SIZE, plan_batches


# ================================================================ the bugs: prefix metadata
class PrefixNotExtended(PrefixInfo):
    """PFX-2: every slice gets the operation's prefix, never the keys before the slice."""

    def for_slice(self, operation, start):
        return operation.base_info.extend([])


class EmptyPrefixCollapsed(PrefixInfo):
    """PFX-4: an empty prefix is sent as None (SGLang extended the prefix only when non-empty)."""

    def for_operation(self, prefix):
        info = super().for_operation(prefix)
        return HiCacheStorageExtraInfo(prefix_keys=None) if info.prefix_keys == [] else info


class PrefixAlwaysOn(PrefixInfo):
    """PFX-3: the feature is off but backends receive an empty list."""

    def for_operation(self, prefix):
        return HiCacheStorageExtraInfo(prefix_keys=list(prefix or ()))


@dataclass
class MutableExtraInfo:
    """An extra info shaped like SGLang's dataclass: mutable, holding the list it was given (not a copy)."""

    prefix_keys: Optional[list] = None
    extra_info: Optional[dict] = None


class PrefixGrownInPlace(PrefixInfo):
    """PFX-5: one prefix list per operation, grown in place with ``+=`` and shared by every info handed out."""

    def for_slice(self, operation: Any, start: int) -> Any:
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


class PrefixSharedByCalls(PrefixInfo):
    """PFX-5: one namespace per operation, its list extended with ``+=`` after each call."""

    def for_slice(self, operation, start):
        shared = operation.__dict__.setdefault(
            "_shared_prefix",
            SimpleNamespace(prefix_keys=list(operation.base_info.prefix_keys or ()), extra_info=None, start=0),
        )
        if shared.prefix_keys is not None:
            shared.prefix_keys += list(operation.keys[shared.start : start])
        shared.start = start
        return shared


class ExtendOnlyWhenNonEmpty(PrefixInfo):
    """PFX-4: the prefix is extended only when it is non-empty, so ``[]`` never grows (SGLang before the fix)."""

    def for_slice(self, operation: Any, start: int) -> Any:
        if operation.base_info.prefix_keys:
            return super().for_slice(operation, start)
        return operation.base_info


class OperationPrefixForSidecars(PrefixInfo):
    """PFX-9: every sidecar call carries the operation-level prefix, also a trailing window's (the old decision)."""

    def sidecar_groups(self, operation: Any, span: Any, transfers: list) -> list:
        return [(operation.base_info, group) for _, group in super().sidecar_groups(operation, span, transfers)]


# ================================================================ the bugs: hit query and agreement
class EmptyPrefixAsNoneInHitQuery(HitQuery):
    """PFX-4: the hit query turns ``[]`` into None (``prefix_keys or None``)."""

    def exists_slice(self, operation: Any, slice_index: int, start: int, end: int) -> int:
        keys = list(operation.keys[start:end])
        prefix = self.prefixes.for_slice(operation, start).prefix_keys
        extra_info = HiCacheStorageExtraInfo(prefix_keys=prefix or None)  # the bug
        outcome = self.caller.call("batch_exists", keys, extra_info, quiescence=operation.quiescence)
        return confirmed_exists(outcome.result, len(keys)) if outcome.returned else 0


class QueriesShortSpans(HitQuery):
    """CTL-3: a span below the threshold is queried anyway (and revoked only after the query)."""

    def span_worth_querying(self, operation):
        return True


class HitQueryNeverStops(HitQuery):
    """CTL-1: the hit query, sliced, goes on after a slice that was not fully hit."""

    def query_v1(self, operation):
        hit = 0
        for index, (start, end) in enumerate(plan_batches(len(operation.keys), STORAGE_BATCH_SIZE)):
            hit += self.exists_slice(operation, index, start, end)  # the bug: no break on a short slice
        return hit


class LeakyRevoke(HitQuery):
    """CTL-12: a revoked prefetch keeps its host slots."""

    def revoke(self, operation, reason):
        operation.revoked = True
        operation.revoke_reason = reason
        operation.host_indices = None


class AlwaysWorthIt(HitQuery):
    """CTL-3: the threshold is never applied."""

    def is_worth_prefetching(self, operation, agreed_pages):
        return agreed_pages > 0


class SkipsHitAgreementOnMiss(HitQuery):
    """RANK-1: a rank that missed does not take part in the hit agreement."""

    def agree(self, operation, local_hit):
        return 0 if local_hit == 0 else super().agree(operation, local_hit)


class MinOfMaxima(HitQuery):
    """RANK-6: agrees on MIN of each rank's largest hit, as SGLang before 0.5.23 did."""

    def agree(self, operation, local_hit):
        return self.channel.all_reduce_min(local_hit)


# ================================================================ the bugs: prefetch IO, acks, termination
class OversizedKvSlices(PrefetchIO):
    """CTL-2: each KV read asks for the keys of two slices at once."""

    def read_slice(self, operation, slice_index, start, end):
        return super().read_slice(operation, slice_index, start, min(operation.hit_pages, end + self.batch_size))


class ReadsOnAfterShortSlice(PrefetchIO):
    """CTL-4: a short slice does not stop the reads."""

    def stops_after(self, operation, loaded, asked):
        return False


class CountsUnconfirmedPages(PrefetchIO):
    """CTL-4, CTL-11: every slice counts as fully loaded, whatever the backend confirmed."""

    def read_slice(self, operation: Any, slice_index: int, start: int, end: int) -> int:
        super().read_slice(operation, slice_index, start, end)
        return end - start  # the bug


class TrustsResultLength(PrefetchIO):
    """CTL-11: counts the True entries of whatever came back, without checking its length or type."""

    def read_kv_slice(self, operation, keys, slots, extra_info):
        outcome = self.caller.call("batch_get_v1", keys, slots, extra_info)
        result = outcome.result if isinstance(outcome.result, list) else []
        return min(len(keys), sum(1 for flag in result if flag))


class DerivedReadWithOwnInfo(PrefetchIO):
    """PFX-8: the KV-derived read gets a second extra info object instead of the KV read's."""

    def read_derived_slice(self, operation, keys, slots, extra_info):
        return super().read_derived_slice(operation, keys, slots, extra_info.extend([]))


class DerivedReadWithoutExtraInfo(PrefetchIO):
    """PFX-7, PFX-8: the KV-derived v2 read is made without extra_info (SGLang before the fix)."""

    def read_derived_slice(self, operation: Any, keys: list, slots: Any, extra_info: Any) -> int:
        transfers = [
            PoolTransfer(name=pool.name, host_indices=slots, keys=PageKeys(keys), indices_from_pool=PoolName.KV)
            for pool in self.derived_pools
        ]
        outcome = self.caller.call("batch_get_v2", transfers, quiescence=operation.quiescence)  # the bug
        if not outcome.returned:
            return 0
        return min(confirmed_pool_pages(outcome.result, pool.name, len(keys)) for pool in self.derived_pools)


class DerivedNotRead(PrefetchIO):
    """HYB-1: KV slices are read without their KV-derived sidecars."""

    def read_slice(self, operation, slice_index, start, end):
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        return self.read_kv_slice(operation, keys, slots, self.prefixes.for_slice(operation, start))


class IgnoresTermination(Termination):
    """CTL-4, CTL-9: nothing ever terminates a prefetch, so IO goes on after the operation was terminated."""

    def should_terminate(self, operation: Any) -> bool:
        return False


class SkipsFrozenAcks(Acks):
    """CTL-5: no progress ack once progress froze."""

    def emit(self, operation, ack):
        progress = operation.progress_acks
        if ack.kind == "progress" and progress and progress[-1].tokens == ack.tokens:
            return
        super().emit(operation, ack)


class NoFinalAckOnError(Acks):
    """CTL-6: an operation that failed (a backend that raised, a short read) ends without its final ack."""

    def finish(self, operation):
        if operation.error is not None:
            operation._finish()  # the bug: the scheduler never hears of it
            return
        super().finish(operation)


class NoAckAgreement(Acks):
    """RANK-3: acks are emitted without the all-reduce."""

    def agree(self, operation, tokens):
        return tokens


class DoubleFree(Upkeep):
    """CTL-12: host slots are freed twice."""

    def free_slots(self, operation, pool, slots):
        super().free_slots(operation, pool, slots)
        super().free_slots(operation, pool, slots)


# ================================================================ the bugs: sidecars
class WindowAtQueryEnd(SidecarReader):
    """HYB-3: the trailing window ends where the query ended, not at the agreed hit."""

    def read(self, operation, hit_pages):
        self._current = operation
        return super().read(operation, hit_pages)

    def window(self, pool, hit_pages):
        return super().window(pool, len(self._current.keys))


class MissingPoolIsHit(SidecarReader):
    """HYB-4: a pool missing from the sidecar result counts as loaded."""

    def read_succeeded(self, outcome, transfers):
        return outcome.returned and all(
            transfer.name.value not in outcome.result
            or confirmed_pages(outcome.result[transfer.name.value], len(transfer.keys)) == len(transfer.keys)
            for transfer in transfers
        )


class OneSidecarRead(SidecarReader):
    """PFX-9, HYB-2: every pool in one batch_get_v2 with the operation-level prefix, whatever its window."""

    def read_parts(self, operation, transfers):
        outcome = self.caller.call(
            "batch_get_v2", transfers, self.prefixes.for_slice(operation, 0), quiescence=operation.quiescence
        )
        return self.read_succeeded(outcome, transfers)


class SlicedSidecarRead(SidecarReader):
    """CTL-2, HYB-2: the windows cut into batch_size parts, as this project once read them."""

    @staticmethod
    def _part(transfer, start, end):
        """The pages [start, end) of a transfer (keys and slots)."""
        if start == 0 and len(transfer.keys) <= end:
            return transfer
        page_size = transfer.host_indices.numel() // len(transfer.keys)
        end = min(end, len(transfer.keys))
        return PoolTransfer(
            name=transfer.name,
            keys=transfer.keys[start:end],
            host_indices=transfer.host_indices[start * page_size : end * page_size],
            hit_policy=transfer.hit_policy,
            indices_from_pool=transfer.indices_from_pool,
        )

    def read_parts(self, operation, transfers):
        longest = max(len(transfer.keys) for transfer in transfers)
        for start, end in plan_batches(longest, STORAGE_BATCH_SIZE):
            part = [self._part(transfer, start, end) for transfer in transfers if len(transfer.keys) > start]
            first = operation.keys.index(part[0].keys[0])
            outcome = self.caller.call(
                "batch_get_v2", part, self.prefixes.for_slice(operation, first), quiescence=operation.quiescence
            )
            if not self.read_succeeded(outcome, part):
                return False
        return True


class LastPartDecides(SidecarReader):
    """HYB-4: every group is read, and the sidecar read counts if the last group succeeded."""

    def read_parts(self, operation, transfers):
        succeeded = False
        span = operation.keys[: operation.hit_pages]
        for extra_info, group in self.prefixes.sidecar_groups(operation, span, transfers):
            outcome = self.caller.call("batch_get_v2", group, extra_info, quiescence=operation.quiescence)
            succeeded = self.read_succeeded(outcome, group)
        return succeeded


# ================================================================ the bugs: backup
class CountsFailedSlice(BackupWriter):
    """CTL-7: a backup slice counts whenever the call returned, whatever its results."""

    def write_slice(self, operation, slice_index, start, end):
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        outcome = self.caller.call("batch_set_v1", keys, slots, self.prefixes.for_slice(operation, start))
        return outcome.returned


class KvBeforeSidecars(BackupWriter):
    """HYB-5: the first KV slice is written before the sidecars."""

    def write_sidecars(self, operation, outcomes=None):
        self.write_slice(operation, 0, 0, min(self.batch_size, len(operation.keys)))
        return super().write_sidecars(operation, outcomes)


class EveryRankWritesReplicatedKv(StorageWriter):
    """CTL-8: every TP rank writes replicated KV."""

    def writes_kv(self):
        return True


# ================================================================ the catalog
@dataclass(frozen=True)
class Oracle:
    """One check that must name ``clause``: ``kind`` is ``checks``, ``trace`` or ``engine``."""

    kind: str
    scenario: Any
    """A scenario name of ``test_controller_planted.SCENARIOS`` (checks), an engine ``Scenario``, or (trace)
    a name of ``test_controller_planted.TRACES``."""
    clause: Optional[str] = None
    """The clause it must name, when not the entry's own."""


def checks(name: str, clause: Optional[str] = None) -> Oracle:
    return Oracle("checks", name, clause)


def trace(scenario: Union[Scenario, str], clause: Optional[str] = None) -> Oracle:
    return Oracle("trace", scenario, clause)


def engine(scenario: Scenario, clause: Optional[str] = None) -> Oracle:
    return Oracle("engine", scenario, clause)


@dataclass(frozen=True)
class Planted:
    """One planted bug: the clause it breaks, its controller, and every oracle that must catch it."""

    clause: str
    controller: type
    oracles: tuple[Oracle, ...]

    @property
    def name(self) -> str:
        return self.controller.__name__


def _entry(clause: str, part: type, *oracles: Oracle) -> Planted:
    return Planted(clause, CacheController.with_parts(part, name=f"{part.__name__}Controller"), oracles)


_PREFETCH_300 = Scenario("prefetch", 300, "anchor")

CATALOG: tuple[Planted, ...] = (
    _entry("PFX-2", PrefixNotExtended, checks("round_trip"), trace(_PREFETCH_300), engine(_PREFETCH_300)),
    _entry(
        "PFX-3", PrefixAlwaysOn, checks("round_trip_no_prefix")
    ),  # the trace checker reads the prefix off the operation
    _entry(
        "PFX-4", EmptyPrefixCollapsed, checks("round_trip_empty_prefix")
    ),  # the trace checker reads [] off the operation
    _entry(
        "PFX-4",
        ExtendOnlyWhenNonEmpty,
        trace(Scenario("prefetch", 300, "empty")),
        trace(Scenario("backup", 129, "empty")),
        engine(Scenario("prefetch", 129, "empty")),
    ),
    _entry("PFX-4", EmptyPrefixAsNoneInHitQuery, trace(Scenario("prefetch", 1, "empty"))),
    _entry("PFX-5", PrefixSharedByCalls, checks("round_trip"), trace(_PREFETCH_300)),
    _entry(
        "PFX-5",
        PrefixGrownInPlace,
        trace(_PREFETCH_300),
        trace(Scenario("prefetch", 129, "empty")),
        trace(Scenario("backup", 300, "anchor", hybrid=True), "PFX-2"),  # the sidecar groups grew the list before KV
        engine(_PREFETCH_300),
    ),
    _entry(
        "PFX-7",
        DerivedReadWithoutExtraInfo,
        trace(Scenario("prefetch", 1, "empty", hybrid=True)),
        trace(Scenario("prefetch", 129, "anchor", hybrid=True), "PFX-8"),
    ),
    _entry(
        "PFX-8",
        DerivedReadWithOwnInfo,
        checks("hybrid_prefetch"),  # the trace checker compares the two infos by value, not identity
    ),
    _entry(
        "PFX-9",
        OperationPrefixForSidecars,
        checks("grouped_sidecar_read"),
        trace(Scenario("prefetch", 300, "empty", hybrid=True)),
        trace("grouped_sidecar_read"),
    ),
    _entry("PFX-9", OneSidecarRead, checks("grouped_sidecar_read", "HYB-2"), trace("grouped_sidecar_read")),
    _entry("CTL-2", SlicedSidecarRead, checks("grouped_sidecar_read", "HYB-2")),  # more calls than groups
    _entry(
        "CTL-1",
        HitQueryNeverStops,
        checks("round_trip_stored_200"),
        trace(Scenario("prefetch", 300, "anchor", stored=100)),
    ),
    _entry("CTL-2", OversizedKvSlices, checks("round_trip"), trace(_PREFETCH_300)),
    _entry("CTL-3", QueriesShortSpans, checks("short_span")),
    _entry("CTL-3", AlwaysWorthIt, checks("revoke")),
    _entry(
        "CTL-4",
        ReadsOnAfterShortSlice,
        checks("short_first_read"),
        trace(Scenario("prefetch", 300, "anchor", unreadable_from=50)),
    ),
    _entry(
        "CTL-4",
        CountsUnconfirmedPages,
        trace(Scenario("prefetch", 300, "anchor", unreadable_from=50)),
        trace(Scenario("prefetch", 300, "none", unreadable_from=200), "CTL-11"),
    ),
    _entry(
        "CTL-5",
        SkipsFrozenAcks,
        checks("short_first_read"),
        trace(Scenario("prefetch", 300, "anchor", unreadable_from=50)),
    ),
    _entry(
        "CTL-6",
        NoFinalAckOnError,
        checks("raise_on_second_read"),
        trace(Scenario("prefetch", 300, "anchor", raise_on_read=1)),
        engine(Scenario("prefetch", 300, "anchor", raise_on_read=1)),
    ),
    _entry("CTL-7", CountsFailedSlice, checks("faulty_backup")),
    _entry("CTL-8", EveryRankWritesReplicatedKv, checks("replicated_backup")),
    _entry(
        "CTL-9",
        IgnoresTermination,
        checks("timeout_policy"),
        trace(Scenario("prefetch", 300, "anchor", terminate_after_read=0), "CTL-4"),
    ),
    _entry("CTL-11", TrustsResultLength, checks("doubled_result")),
    _entry("CTL-12", DoubleFree, checks("none_on_second_read")),
    _entry("CTL-12", LeakyRevoke, checks("revoke")),
    _entry("HYB-1", DerivedNotRead, checks("hybrid_prefetch")),  # not seen by the trace checker (docs/controller.md)
    _entry(
        "HYB-3",
        WindowAtQueryEnd,
        checks("hybrid_prefetch"),
        trace(Scenario("prefetch", 300, "anchor", hybrid=True, stored=200)),
    ),
    _entry("HYB-4", MissingPoolIsHit, checks("hybrid_prefetch_missing_pool")),
    _entry("HYB-4", LastPartDecides, checks("failed_sidecar_part")),
    _entry("HYB-5", KvBeforeSidecars, checks("hybrid_backup"), trace(Scenario("backup", 300, "anchor", hybrid=True))),
    _entry("RANK-1", SkipsHitAgreementOnMiss, checks("ranks_with_a_miss")),
    _entry("RANK-3", NoAckAgreement, checks("ranks_with_a_failure")),
    _entry("RANK-6", MinOfMaxima, checks("min_of_maxima")),
)
"""Every planted controller, with the oracles that catch it."""

BY_NAME: dict[str, type] = {entry.name: entry.controller for entry in CATALOG}
"""The planted controllers by the name of their bug."""


def by_clause(clause_id: str) -> tuple[Planted, ...]:
    """The entries whose bug breaks ``clause_id``."""
    return tuple(entry for entry in CATALOG if entry.clause == clause_id)


globals().update(BY_NAME)  # ``PrefixNotExtendedController`` and so on: the controllers, beside their parts

__all__ = ["BY_NAME", "CATALOG", "Oracle", "Planted", "by_clause", *BY_NAME]
