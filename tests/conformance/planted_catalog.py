"""The planted-bug backends: one catalog, keyed by clause, each entry with the oracles that must catch it.

The bugs are small subclasses of ``CorrectBackend`` in their family modules:
``planted_backends`` (the bug classes seen in the field, and a bug for every
clause), ``planted_single`` and ``planted_backdoor`` (bugs one check alone
catches), ``planted_branches`` (bugs reaching the branches of a check no other
bug reaches) and ``planted_evicting`` (bugs eviction does not excuse).
``CATALOG`` is the one place that names them: per entry, the clause(s) it
breaks, the suite options of every run of it, and every oracle that must
catch it:

- ``CAUGHT``: the checks of its clauses, run together, fail one of them (``test_planted.py``);
- ``alone(check)``: that check, run alone, fails it on one of its clauses, with the verdict
  ``check_messages.json`` records unless ``recorded=False`` (``test_check_branches.py``);
- ``only(check)``: the same, and the whole suite fails that check and no other (``test_single_check.py``);
- ``EVICTING``: with eviction declared, the checks of its clauses still fail one of them; ``EXCUSED``: they
  pass it, the bug only losing pages or counting too few, as eviction may (``test_evicting_backends.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from tests.conformance import planted_backdoor as backdoor
from tests.conformance import planted_backends as field_bugs
from tests.conformance import planted_evicting as evicting
from tests.conformance import planted_branches as mutants
from tests.conformance import planted_single as single
from tests.conformance.helpers import ALL_LEVELS

LEGACY_MODE: dict[str, Any] = dict(levels=tuple(level for level in ALL_LEVELS if level != "v1"))
"""A backend SGLang drives through the legacy methods (v1 not claimed): the only mode where they are called."""


@dataclass(frozen=True)
class Oracle:
    """One way the suite must catch a planted bug: ``kind`` is ``caught``, ``evicting``, ``excused``,
    ``alone`` or ``only``; the last two name a check, and say whether its verdict is recorded."""

    kind: str
    check: Optional[str] = None
    recorded: bool = False


CAUGHT = Oracle("caught")
EVICTING = Oracle("evicting")
EXCUSED = Oracle("excused")


def alone(check: str, *, recorded: bool = True) -> Oracle:
    return Oracle("alone", check, recorded)


def only(check: str, *, recorded: bool = True) -> Oracle:
    return Oracle("only", check, recorded)


@dataclass(frozen=True, eq=False)
class PlantedBackend:
    """One planted bug: the clause(s) it breaks, its backend, its oracles and the suite options of its runs."""

    clauses: tuple[str, ...]
    """A failure of any one is the catch (the state machine reports a lost page under BE-9 or BE-17,
    depending on whether set or batch_set_v1 wrote it)."""
    backend: type
    oracles: tuple[Oracle, ...]
    options: dict[str, Any] = field(default_factory=dict)
    """Levels, profile, extra config or timeout of every run of it."""

    @property
    def name(self) -> str:
        return self.backend.__name__

    @property
    def id(self) -> str:
        return f"{'+'.join(self.clauses)}-{self.name}"

    def has(self, kind: str) -> bool:
        return any(oracle.kind == kind for oracle in self.oracles)

    def alone(self) -> tuple[Oracle, ...]:
        """Its oracles that run one check alone (``alone`` and ``only``)."""
        return tuple(oracle for oracle in self.oracles if oracle.check is not None)


def _entry(clause: Union[str, tuple[str, ...]], backend: type, *oracles: Oracle, **options: Any) -> PlantedBackend:
    return PlantedBackend(clause if isinstance(clause, tuple) else (clause,), backend, oracles, options)


_SCATTERED = "v1_hits_land_in_their_own_scattered_slots"
_ROUND_TRIP = "v1_pages_round_trip_bit_for_bit"
_STATEFUL = "stateful_model_of_a_lossy_write_once_store"
_FORMAT = "a_reader_of_another_host_pool_format_misses"
_MEMORY_LEVELS = single.UnguardedMemoryBackend.hicache_levels  # the reference memory backend's: format claimed

CATALOG: tuple[PlantedBackend, ...] = (
    # ================ planted_backends: the bug classes seen in the field, and a bug for every clause. EXCUSED:
    # pages lost or never found (to the suite and to SGLang the same as pages evicted), or a hit counted short
    # (the pages past it may have been evicted between the write and the lookup).
    _entry("BE-14", field_bugs.TwoResultsPerPageV1, CAUGHT, EVICTING, only("v1_results_have_one_bool_per_key")),
    _entry("BE-14", field_bugs.ScalarV1Result, CAUGHT, EVICTING, alone("v1_results_have_one_bool_per_key")),
    _entry(
        "BE-8", field_bugs.BatchExistsWithoutExtraInfo, CAUGHT, EVICTING, only("extra_info_accepted_in_every_shape")
    ),
    _entry("BE-4", field_bugs.RaisesOnMissingKey, CAUGHT, EVICTING, alone("missing_keys_are_misses_not_errors")),
    _entry(
        "BE-5", field_bugs.RaisesOnStorageError, CAUGHT, EVICTING, alone("storage_errors_are_failures_not_exceptions")
    ),
    _entry(
        "NS-6",
        field_bugs.ExistsSetKeyMismatch,
        CAUGHT,
        EXCUSED,
        alone("exists_get_and_set_share_one_key_scheme"),
        **LEGACY_MODE,
    ),
    _entry("NS-2", field_bugs.NoPipelineRankInKeys, CAUGHT, EVICTING, only("ranks_and_models_never_share_pages")),
    _entry("NS-5", field_bugs.ReplicatedKvNotShared, CAUGHT, EXCUSED, only("replicated_kv_is_shared_across_tp_ranks")),
    _entry("BE-7", field_bugs.VisibleBeforeWritten, CAUGHT, EVICTING, only("pages_are_invisible_until_fully_written")),
    _entry(
        "BE-13", field_bugs.ZeroLengthObjectIsHit, CAUGHT, EVICTING, alone("short_objects_are_misses"), **LEGACY_MODE
    ),
    _entry(
        "BE-21",
        field_bugs.V2MissingPoolCountedAsFullHit,
        CAUGHT,
        EVICTING,
        alone("v2_exists_folds_pool_hits_per_policy"),
    ),
    _entry("PFX-6", field_bugs.MutatesPrefixKeys, CAUGHT, EVICTING, only("prefix_keys_are_never_mutated")),
    _entry("PFX-6", field_bugs.RetainsPrefixKeys, CAUGHT, EVICTING, only("prefix_keys_are_copied_if_kept")),
    _entry(
        "BE-16",
        field_bugs.WritesOutsideSlots,
        CAUGHT,
        EVICTING,
        alone(_SCATTERED),
        alone("v1_reads_touch_only_addressed_slots"),
    ),
    _entry(
        "BE-11",
        field_bugs.ClearLeavesKeysBehind,
        CAUGHT,
        EVICTING,
        alone("clear_removes_every_page"),
        alone("clear_removes_every_pool"),
        alone("clear_removes_a_ranks_own_state_under_replicated_kv"),
        alone(_STATEFUL),
    ),
    _entry(
        "BE-11",
        field_bugs.RemembersHitsAcrossClear,
        CAUGHT,
        EVICTING,
        alone("clear_removes_every_page"),
        alone(_STATEFUL),
    ),
    _entry(
        "BE-13",
        field_bugs.ShortObjectCopiedIntoTarget,
        CAUGHT,
        EVICTING,
        alone("short_objects_are_misses"),
        **LEGACY_MODE,
    ),
    _entry("BE-12", field_bugs.StatsAsDict, CAUGHT, EVICTING, only("get_stats_returns_none_or_an_object")),
    _entry("BE-1", field_bugs.StrictExtraConfig, CAUGHT, EVICTING, only("extra_config_with_unknown_keys_is_accepted")),
    _entry(
        "BE-2",
        field_bugs.CountsEveryStoredKey,
        CAUGHT,
        EVICTING,
        alone("batch_exists_counts_the_leading_run"),
        alone(_STATEFUL),
    ),
    _entry("BE-3", field_bugs.QueryCreatesPlaceholders, CAUGHT, EVICTING, alone("batch_exists_has_no_side_effects")),
    _entry(
        "BE-6",
        field_bugs.RefusesRewrite,
        CAUGHT,
        EVICTING,
        only("rewriting_a_key_returns_true_and_keeps_correct_bytes"),
    ),
    _entry(
        "BE-9",
        field_bugs.CompactedBatchGet,
        CAUGHT,
        EVICTING,
        alone("legacy_results_have_their_shapes"),
        alone(_STATEFUL),
        **LEGACY_MODE,
    ),
    _entry("BE-10", field_bugs.TruncatesLongBatches, CAUGHT, EVICTING, only("full_batches_of_128_pages_work")),
    # probed: v1 is not claimed, the extra config asks SGLang for v1 (so SGLang calls it), BE-18 catches the None
    _entry(
        "BE-18",
        field_bugs.V1StubReturnsNone,
        CAUGHT,
        EVICTING,
        only("unimplemented_methods_raise_not_implemented"),
        levels=None,
        extra={"interface_v1": 1},
    ),
    _entry("BE-24", field_bugs.RejectsKvInV2Registration, CAUGHT, EVICTING, only("host_pools_register_before_any_io")),
    _entry(
        "BE-25", field_bugs.RejectsDataParallelRanks, CAUGHT, EVICTING, only("every_rank_inside_its_group_is_accepted")
    ),
    _entry(
        "BE-15",
        field_bugs.ShiftedV1Read,
        CAUGHT,
        EVICTING,
        alone(_SCATTERED),
        alone(_ROUND_TRIP),
    ),
    _entry(
        "BE-17",
        field_bugs.LyingV1Set,
        CAUGHT,
        EXCUSED,
        alone(_STATEFUL),
        alone(_ROUND_TRIP),
    ),
    _entry(
        "BE-17",
        field_bugs.DropsEveryV1Write,
        CAUGHT,
        EXCUSED,
        alone(_STATEFUL),
        alone(_ROUND_TRIP),
    ),
    _entry("BE-19", field_bugs.V2DropsSidecarEntries, CAUGHT, EVICTING, only("v2_results_have_one_entry_per_pool")),
    _entry("BE-20", field_bugs.V2RaisesOnUnregisteredPool, CAUGHT, EVICTING, only("v2_unregistered_pool_is_all_false")),
    _entry(
        ("HYB-7", "BE-21"),
        field_bugs.TrailingTreatedAsAllPages,
        CAUGHT,
        EXCUSED,
        only("v2_exists_folds_pool_hits_per_policy"),
    ),
    _entry(
        "HYB-6",
        field_bugs.AllPagesCountsEveryPresentPage,
        CAUGHT,
        EVICTING,
        alone("v2_exists_folds_pool_hits_per_policy"),
    ),
    _entry("HYB-8", field_bugs.SidecarNotLoaded, CAUGHT, EVICTING, alone("v2_pool_hits_count_only_pages_that_landed")),
    _entry("BE-22", field_bugs.IndexerNeverPersisted, CAUGHT, EVICTING, alone("v2_kv_derived_sidecars_travel_with_kv")),
    _entry(
        "PFX-1", field_bugs.EmptyPrefixCrashes, CAUGHT, EVICTING, alone("prefix_states_none_empty_and_list_all_work")
    ),
    _entry("NS-1", field_bugs.NoTensorRankInKeys, CAUGHT, EVICTING, alone("ranks_and_models_never_share_pages")),
    _entry("NS-3", field_bugs.NoContextRankInKeys, CAUGHT, EVICTING, alone("ranks_and_models_never_share_pages")),
    _entry(
        "NS-4",
        field_bugs.NoModelInKeys,
        CAUGHT,
        EVICTING,
        alone("ranks_and_models_never_share_pages"),
        alone("a_slash_in_a_model_name_is_part_of_it"),
    ),
    _entry("NS-8", field_bugs.GlobalClear, CAUGHT, EXCUSED, only("clear_removes_only_its_own_namespace")),
    _entry("NS-7", field_bugs.PerInstanceSalt, CAUGHT, EXCUSED, alone("pages_survive_a_rebuild")),
    # the sequence set, clear, set needs a few runs
    _entry(
        ("BE-9", "BE-17"),
        field_bugs.ForgetsWritesAfterClear,
        CAUGHT,
        EXCUSED,
        only(_STATEFUL, recorded=False),
        profile="standard",
    ),
    # the stuck call fails within the deadline
    _entry(
        "BE-2",
        field_bugs.BlocksOnLongLookups,
        CAUGHT,
        EVICTING,
        only("batch_exists_takes_a_whole_chain", recorded=False),
        timeout_s=1.0,
    ),
    _entry("BE-2", field_bugs.CapsLookupsAt1024Keys, CAUGHT, EXCUSED, alone("batch_exists_takes_a_whole_chain")),
    _entry(
        "BE-15",
        field_bugs.AssumesContiguousSlots,
        CAUGHT,
        EVICTING,
        alone(_SCATTERED),
        alone(_ROUND_TRIP),
    ),
    _entry("BE-11", field_bugs.ClearLeavesSidecars, CAUGHT, EVICTING, only("clear_removes_every_pool")),
    _entry("BE-17", field_bugs.NonWriterSkipsWrites, CAUGHT, EXCUSED, only("a_non_writer_rank_writes_what_it_reports")),
    _entry(
        "BE-22", field_bugs.SidecarLostOnKvRewrite, CAUGHT, EVICTING, alone("v2_kv_derived_sidecars_travel_with_kv")
    ),
    _entry(
        "BE-27",
        field_bugs.RefusesSidecarsAtAttach,
        CAUGHT,
        EVICTING,
        only("host_pools_registered_hook_accepts_the_pools"),
    ),
    _entry("BE-21", field_bugs.CapsV2LookupsAt1024Keys, CAUGHT, EXCUSED, only("batch_exists_v2_takes_a_whole_chain")),
    _entry("BE-28", field_bugs.ReplacesFirstHostPool, CAUGHT, EVICTING, only("second_host_pool_is_served_or_refused")),
    _entry("BE-28", field_bugs.RefusesWithoutSaying, CAUGHT, EVICTING, alone("second_host_pool_is_served_or_refused")),
    # ================ planted_single, planted_backdoor: bugs one check alone catches
    _entry("BE-2", single.FullBatchOfUnknownKeysHitsOnce, only("batch_exists_counts_the_leading_run")),
    _entry("NS-7", single.CloseDropsThePages, only("pages_survive_a_rebuild")),
    _entry("NS-4", single.FoldsSlashesInModelNames, only("a_slash_in_a_model_name_is_part_of_it")),
    _entry("BE-11", single.ClearLeavesTheRanksState, only("clear_removes_a_ranks_own_state_under_replicated_kv")),
    _entry("PFX-1", single.RootPrefixCapsTheCount, only("prefix_states_none_empty_and_list_all_work")),
    _entry("BE-3", single.ChainLookupReservesTheRest, only("batch_exists_has_no_side_effects")),
    _entry("BE-4", single.BaseLookupAsksARaisingExists, alone("missing_keys_are_misses_not_errors")),
    _entry("BE-4", single.LegacyReadOfOnlyMissingKeysRaises, only("missing_keys_are_misses_not_errors")),
    _entry("BE-5", single.AcknowledgesFailedWrites, only("storage_errors_are_failures_not_exceptions")),
    _entry("BE-9", single.MissAnsweredWithFalse, only("legacy_results_have_their_shapes")),
    _entry("BE-13", single.ShortObjectPaddedIntoTarget, only("short_objects_are_misses")),
    _entry("BE-16", single.MissClearsThePageAtItsPosition, only("v1_reads_touch_only_addressed_slots")),
    _entry("BE-16", single.LeadingMissesRebaseTheRead, only(_SCATTERED)),
    _entry("BE-17", single.FullBatchWriteDeferred, only(_ROUND_TRIP)),
    _entry("BE-22", single.DerivedSidecarFollowsKv, only("v2_kv_derived_sidecars_travel_with_kv")),
    _entry("HYB-8", single.ChunkedSidecarReadReusesFirstSlots, only("v2_pool_hits_count_only_pages_that_landed")),
    _entry("NS-6", single.LookupFlattensRanksOtherwise, only("exists_get_and_set_share_one_key_scheme")),
    _entry("BE-11", single.OneKeyLookupsCached, only("clear_removes_every_page")),
    _entry(
        "NS-4",
        single.OneStoreForEveryModelAtARank,
        CAUGHT,
        EVICTING,
        alone("ranks_and_models_never_share_pages"),
        alone("a_slash_in_a_model_name_is_part_of_it"),
    ),
    _entry(
        "NS-5", single.OneReplicaForEveryDcpRank, CAUGHT, EVICTING, alone("replicated_kv_is_shared_across_tp_ranks")
    ),
    _entry(
        "NS-9",
        single.UnguardedMemoryBackend,
        CAUGHT,
        EVICTING,
        only(_FORMAT),
        levels=_MEMORY_LEVELS,
    ),
    _entry(
        "BE-13", single.BatchGetServesShortObjects, CAUGHT, EVICTING, alone("short_objects_are_misses"), **LEGACY_MODE
    ),
    _entry(
        "NS-8", single.LeasedPagesSurviveAGlobalClear, CAUGHT, EXCUSED, alone("clear_removes_only_its_own_namespace")
    ),
    _entry(
        "NS-8",
        single.ListsWhatItWroteAndClearsEverything,
        CAUGHT,
        EXCUSED,
        alone("clear_removes_only_its_own_namespace"),
    ),
    _entry(
        "NS-8", single.ClearsEveryModelItsNamePrefixes, CAUGHT, EXCUSED, alone("clear_removes_only_its_own_namespace")
    ),
    _entry(
        ("BE-29", "NS-7"),
        single.CloseDropsTheStore,
        CAUGHT,
        EXCUSED,
        alone("close_returns_and_leaves_the_pages"),
        alone("pages_survive_a_rebuild"),
    ),
    _entry(
        "BE-29",
        single.CloseWaitsForItsFlushThread,
        CAUGHT,
        EVICTING,
        only("close_returns_and_leaves_the_pages", recorded=False),
        timeout_s=1.0,
    ),
    _entry(
        "BE-30",
        single.V2HitsFromAThreadsOwnIndex,
        CAUGHT,
        EXCUSED,
        only("hit_queries_agree_from_every_thread", recorded=False),
    ),
    _entry("BE-31", single.PagesFiledPerSession, CAUGHT, EXCUSED, only("defined_extra_info_keys_change_no_page")),
    _entry("BE-32", single.KeyPrefixPerStage, CAUGHT, EVICTING, only("layout_replies_merge")),
    _entry(
        "BE-33",
        single.LegacyTargetsByKeywordOnly,
        CAUGHT,
        EVICTING,
        only("pages_stay_consistent_under_the_failure_injector"),
        **LEGACY_MODE,
    ),
    _entry("BE-26", single.RestorableLengthsLeftNone, CAUGHT, EVICTING, only("v2_exists_folds_pool_hits_per_policy")),
    _entry(
        "BE-22", backdoor.VanishedSidecarPageReadsAsAHit, only("a_removed_kv_derived_sidecar_is_never_read_as_a_hit")
    ),
    _entry("BE-13", backdoor.ShortSidecarObjectIsAHit, alone("planted_short_objects_are_misses")),
    _entry("BE-4", backdoor.VanishedKvPageReadsAsAHit, only("a_removed_object_is_never_read_as_a_hit")),
    _entry("BE-16", backdoor.LongObjectStreamedIntoTheNextPage, only("planted_short_objects_are_misses")),
    # ================ planted_branches: bugs reaching the branches of a check no other bug reaches
    _entry("BE-5", mutants.ClaimsWritesWhileTheStoreFails, alone("storage_errors_are_failures_not_exceptions")),
    _entry("BE-5", mutants.WritesClaimedWhileThePageHelpersFail, alone("storage_errors_are_failures_not_exceptions")),
    _entry("BE-4", mutants.LegacyReadReturnsItsTargets, alone("missing_keys_are_misses_not_errors"), **LEGACY_MODE),
    _entry("BE-4", mutants.LegacyReadReturnsTrueForEachKey, alone("missing_keys_are_misses_not_errors"), **LEGACY_MODE),
    _entry("BE-23", mutants.IndexPerThread, alone("concurrent_calls_keep_every_key_consistent", recorded=False)),
    _entry(
        "BE-23", mutants.DropsAfterTheSecondRead, alone("concurrent_calls_keep_every_key_consistent", recorded=False)
    ),
    _entry("BE-23", mutants.StatsRaiseDuringIO, alone("concurrent_calls_keep_every_key_consistent", recorded=False)),
    _entry(
        "BE-23", mutants.LookupsMissWhileAWriteRuns, alone("concurrent_calls_keep_every_key_consistent", recorded=False)
    ),
    _entry(
        "BE-23", mutants.CountsMissWhileAWriteRuns, alone("concurrent_calls_keep_every_key_consistent", recorded=False)
    ),
    _entry(
        "BE-23",
        mutants.CountsOneShortWhileAWriteRuns,
        alone("concurrent_calls_keep_every_key_consistent", recorded=False),
    ),
    _entry("BE-8", mutants.V2GetNamesItsInfoParameterInfo, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-5", mutants.SidecarRunReadRaisesOnStoreError, alone("storage_errors_are_failures_not_exceptions")),
    _entry("BE-5", mutants.RunWriteQueuedOnStoreError, alone("storage_errors_are_failures_not_exceptions")),
    _entry("KEY-2", mutants.KeysCutTo24Characters, CAUGHT, EVICTING, only("distinct_keys_name_distinct_pages")),
    _entry("BE-5", mutants.OnePageWindowQueryRaisesOnStoreError, alone("storage_errors_are_failures_not_exceptions")),
    _entry("BE-5", mutants.SidecarRunWriteRaisesOnStoreError, alone("storage_errors_are_failures_not_exceptions")),
    _entry("BE-7", mutants.RunWritePublishesBeforeCopying, alone("pages_are_invisible_until_fully_written")),
    _entry(
        "BE-18",
        mutants.V2ReadFallsOffTheEnd,
        alone("unimplemented_methods_raise_not_implemented"),
        levels=mutants.WITHOUT_V2,
    ),
    _entry("NS-5", mutants.ReplicatedRunReadUsesItsOwnRank, alone("replicated_kv_is_shared_across_tp_ranks")),
    _entry("PFX-6", mutants.RunReadExtendsThePrefix, alone("prefix_keys_are_never_mutated")),
    _entry("BE-22", mutants.DerivedRunReadSkipsTheCopy, alone("v2_kv_derived_sidecars_travel_with_kv")),
    _entry(
        ("BE-22", "HYB-8"),
        mutants.DerivedReadLeftToTheKvRead,
        alone("v2_kv_derived_sidecars_travel_with_kv"),
        alone("v2_pool_hits_count_only_pages_that_landed"),
    ),
    _entry("HYB-8", mutants.WindowReadTakenAsResident, alone("v2_pool_hits_count_only_pages_that_landed")),
    _entry("BE-22", mutants.DerivedPoolsTrustedInTheFold, alone("v2_kv_derived_sidecars_travel_with_kv")),
    _entry(
        ("HYB-8", "BE-17"),
        mutants.SidecarReadFromTheResidentHostPage,
        alone("v2_pool_hits_count_only_pages_that_landed"),
        alone("a_non_writer_rank_writes_what_it_reports"),
    ),
    _entry("BE-8", mutants.FlagLikeUnknownKeyRefused, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-27", mutants.LastHostPageRefused, alone("host_pools_registered_hook_accepts_the_pools")),
    _entry(
        "BE-6", mutants.RewrittenPagesMissedByTheRunRead, alone("rewriting_a_key_returns_true_and_keeps_correct_bytes")
    ),
    _entry("BE-21", mutants.KvHitAsAFloat, alone("v2_exists_folds_pool_hits_per_policy")),
    _entry("BE-7", mutants.VisibleWhileLookupsRaise, alone("pages_are_invisible_until_fully_written")),
    _entry("BE-9", mutants.LastLegacyTargetLeftUnfilled, alone("legacy_results_have_their_shapes"), **LEGACY_MODE),
    _entry("BE-25", mutants.RefusesTheLastPipelineRank, alone("every_rank_inside_its_group_is_accepted")),
    _entry("BE-9", mutants.HitAfterAMissLeftUnfilled, alone("legacy_results_have_their_shapes"), **LEGACY_MODE),
    _entry("BE-9", mutants.FirstLegacyTargetLeftUnfilled, alone("legacy_results_have_their_shapes"), **LEGACY_MODE),
    _entry("NS-6", mutants.LooksUpUnderTheFirstTpRank, alone("exists_get_and_set_share_one_key_scheme")),
    _entry("BE-1", mutants.KvOnlyThroughV2Registration, alone("extra_config_with_unknown_keys_is_accepted")),
    _entry("BE-8", mutants.V2ReadWithInfoSkipsTheCopy, alone("extra_info_accepted_in_every_shape")),
    _entry(
        "BE-16",
        mutants.ReadRunsOnePagePastTheLast,
        alone("v1_reads_touch_only_addressed_slots"),
        alone(_SCATTERED),
    ),
    _entry("PFX-1", mutants.ChainsPagesWithinOneCall, alone("prefix_states_none_empty_and_list_all_work")),
    _entry("BE-8", mutants.CountsThePrefixKeysToo, alone("extra_info_accepted_in_every_shape")),
    _entry("PFX-1", mutants.CountsFromPastThePrefix, alone("prefix_states_none_empty_and_list_all_work")),
    _entry("BE-11", mutants.SidecarRunCacheOutlivesClear, alone("clear_removes_every_pool")),
    _entry("BE-3", mutants.ExistsPromotesToAHotTier, alone("batch_exists_has_no_side_effects")),
    _entry(
        "BE-11",
        mutants.ClearReportsFalseAndKeepsItsPages,
        alone("clear_removes_every_page"),
        alone("clear_removes_every_pool"),
        alone("clear_removes_a_ranks_own_state_under_replicated_kv"),
        alone(_STATEFUL),
    ),
    _entry("HYB-6", mutants.AllPagesHitCopiedFromKv, alone("v2_exists_folds_pool_hits_per_policy")),
    _entry(("HYB-6", "HYB-7"), mutants.PoolsJudgedWithinTheRunningFold, alone("v2_exists_folds_pool_hits_per_policy")),
    _entry("BE-10", mutants.SidecarSpansCappedAtOneSlice, only("v2_sidecar_calls_take_a_whole_span")),
    _entry("BE-8", mutants.V1ReadWithInfoSkipsTheCopy, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-22", mutants.DerivedRunWriteStoresNothing, alone("v2_kv_derived_sidecars_travel_with_kv")),
    _entry(
        ("NS-1", "NS-2", "NS-3", "NS-4"),
        mutants.RunReadCacheKeyedByKeyAlone,
        alone("ranks_and_models_never_share_pages"),
    ),
    _entry("BE-13", mutants.EmptyValueRefusedShortOneKept, alone("short_objects_are_misses"), **LEGACY_MODE),
    _entry("BE-25", mutants.RefusesAnLcmAboveItsTpSize, alone("every_rank_inside_its_group_is_accepted")),
    _entry("BE-22", mutants.DerivedWriteIndexedBeforeItsCopy, alone("v2_kv_derived_sidecars_travel_with_kv")),
    # BE-23's own bug, within the concurrency SGLang's threads make: the IO thread's read meets the backup
    # thread's write on the shared index (hit queries count right, so BE-30 and every single-call check pass)
    _entry(
        "BE-23",
        mutants.ReadsMissWhileAWriteRuns,
        CAUGHT,
        EXCUSED,  # a read that misses a stored page is what an evicting backend may do
        only("concurrent_calls_keep_every_key_consistent", recorded=False),
    ),
    _entry("BE-3", mutants.ExistsStagesPagesTheRunReadMisses, alone("batch_exists_has_no_side_effects")),
    _entry("BE-8", mutants.PrefixLookupRefusesUnknownOptions, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-21", mutants.FoldsByTheSmallestPoolHit, alone("v2_exists_folds_pool_hits_per_policy")),
    _entry(
        "BE-21",
        mutants.FoldsToTheShortestRestorableLength,
        CAUGHT,
        EXCUSED,
        alone("v2_exists_folds_pool_hits_per_policy"),
        alone("batch_exists_v2_takes_a_whole_chain"),
    ),
    _entry("BE-22", mutants.KvRunWriteIndexesItsDerivedPages, alone("v2_kv_derived_sidecars_travel_with_kv")),
    _entry("BE-4", mutants.DerivedReadTrustsTheKvHits, alone("missing_keys_are_misses_not_errors")),
    _entry(
        "BE-18",
        mutants.V1ReadFallsOffTheEnd,
        alone("unimplemented_methods_raise_not_implemented"),
        extra={"interface_v1": 1},
        **LEGACY_MODE,
    ),
    _entry(
        "BE-18",
        mutants.V2WriteFallsOffTheEnd,
        alone("unimplemented_methods_raise_not_implemented"),
        levels=mutants.WITHOUT_V2,
    ),
    _entry("BE-14", mutants.BulkResultsAsTensors, alone("v1_results_have_one_bool_per_key")),
    _entry("BE-19", mutants.EmptyV2ReadAnsweredWithAList, alone("v2_results_have_one_entry_per_pool")),
    _entry("BE-19", mutants.DerivedResultsFiledUnderKv, alone("v2_results_have_one_entry_per_pool")),
    _entry("BE-21", mutants.DerivedIndexKeyedByHostSlot, alone("batch_exists_v2_takes_a_whole_chain")),
    _entry(
        ("BE-4", "BE-5"),
        mutants.RunReadJoinsItsPages,
        alone("missing_keys_are_misses_not_errors"),
        alone("storage_errors_are_failures_not_exceptions"),
    ),
    _entry("BE-11", mutants.KvRunCacheOutlivesClear, alone("clear_removes_every_pool")),
    _entry("BE-3", mutants.EmptyLookupAnsweredWithAnEmptyList, alone("batch_exists_has_no_side_effects")),
    _entry(
        "BE-2",
        mutants.CountsInANarrowNumpyInteger,
        CAUGHT,
        EVICTING,
        alone("batch_exists_counts_the_leading_run"),
        alone("batch_exists_takes_a_whole_chain"),
        alone(_STATEFUL),
    ),
    _entry(
        ("BE-8", "BE-33"), mutants.V2ExtraInfoByKeywordOnly, alone("pages_stay_consistent_under_the_failure_injector")
    ),
    _entry("BE-4", mutants.SidecarRunReadJoinsItsPages, alone("missing_keys_are_misses_not_errors")),
    _entry("NS-1", mutants.LookupLeavesOutTheTpRank, alone("ranks_and_models_never_share_pages")),
    _entry("PFX-6", mutants.StoredKeysExtendThePrefix, alone("prefix_keys_are_never_mutated")),
    _entry(
        ("NS-6", "NS-7", "BE-28"),
        mutants.RunReadTakesItsFirstSlotForAPage,
        alone("exists_get_and_set_share_one_key_scheme"),
        alone("pages_survive_a_rebuild"),
        alone("second_host_pool_is_served_or_refused"),
    ),
    _entry("BE-11", mutants.DerivedPagesOutliveClear, CAUGHT, EVICTING, alone("clear_removes_every_pool")),
    _entry("BE-11", mutants.RunWriteCacheOutlivesClear, CAUGHT, EVICTING, alone("clear_removes_every_pool")),
    _entry(
        "BE-12", mutants.StatsOfASinglePageWriteAsADict, CAUGHT, EVICTING, alone("get_stats_returns_none_or_an_object")
    ),
    _entry(
        "BE-18",
        mutants.V2ReadFallsOffTheEndWithoutALookup,
        CAUGHT,
        EVICTING,
        alone("unimplemented_methods_raise_not_implemented"),
        levels=mutants.WITHOUT_V2,
    ),
    _entry(
        "BE-18",
        mutants.V1ReadTakesSlotZeroForNoPages,
        CAUGHT,
        EVICTING,
        alone("unimplemented_methods_raise_not_implemented"),
        extra={"interface_v1": 1},
        **LEGACY_MODE,
    ),
    _entry(
        "BE-18",
        mutants.V1WriteTakesSlotZeroForNoPages,
        CAUGHT,
        EVICTING,
        alone("unimplemented_methods_raise_not_implemented"),
        extra={"interface_v1": 1},
        **LEGACY_MODE,
    ),
    _entry(
        "BE-18",
        mutants.V2ReadTakesSlotZeroForNoPages,
        CAUGHT,
        EVICTING,
        alone("unimplemented_methods_raise_not_implemented"),
        levels=mutants.WITHOUT_V2,
    ),
    _entry(
        "BE-18",
        mutants.V2WriteTakesSlotZeroForNoPages,
        CAUGHT,
        EVICTING,
        alone("unimplemented_methods_raise_not_implemented"),
        levels=mutants.WITHOUT_V2,
    ),
    _entry(
        "BE-28",
        mutants.TakesAPoolOfTheSameShapeForTheSame,
        CAUGHT,
        EVICTING,
        alone("second_host_pool_is_served_or_refused"),
    ),
    _entry(
        ("BE-17", "BE-28"),
        mutants.RunWriteFromPageZeroStoresNothing,
        alone("second_host_pool_is_served_or_refused"),
    ),
    _entry(
        ("BE-17", "BE-28"),
        mutants.RunWriteTakesItsFirstSlotForAPage,
        alone("second_host_pool_is_served_or_refused"),
    ),
    _entry("BE-6", mutants.RewriteKeepsTheOldTail, alone("rewriting_a_key_returns_true_and_keeps_correct_bytes")),
    _entry("BE-8", mutants.CountsThePrefixsLastKeyToo, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-8", mutants.CountsFromTheSecondKeyPastAPrefix, alone("extra_info_accepted_in_every_shape")),
    _entry("BE-9", mutants.EmptyTensorForAMissingKey, alone("legacy_results_have_their_shapes"), **LEGACY_MODE),
    _entry("BE-10", mutants.FullBatchReadStopsAt64Pages, alone("full_batches_of_128_pages_work")),
    _entry(
        ("NS-1", "NS-2", "NS-3", "NS-4"),
        mutants.RunReadServedFromAReadCacheOfAnyNamespace,
        alone("ranks_and_models_never_share_pages"),
    ),
    _entry("BE-17", mutants.NonWriterRunWriteTakesTheKvPath, alone("a_non_writer_rank_writes_what_it_reports")),
    _entry("BE-17", mutants.NonWriterRunReadTakesTheKvPath, alone("a_non_writer_rank_writes_what_it_reports")),
    _entry("NS-6", mutants.LooksUpUnderTheFirstPipelineStage, alone("exists_get_and_set_share_one_key_scheme")),
    _entry("NS-7", mutants.PerInstanceCipher, alone("pages_survive_a_rebuild")),
    _entry("BE-14", mutants.SecondSegmentReadsAnswerATensor, alone("v1_results_have_one_bool_per_key")),
    _entry("BE-14", mutants.V1WriteAnswersTheBytesItStored, alone("v1_results_have_one_bool_per_key")),
    _entry(
        ("BE-15", "HYB-8"),
        mutants.KvReadFromTheResidentHostPage,
        alone(_ROUND_TRIP),
        alone("v2_pool_hits_count_only_pages_that_landed"),
    ),
    _entry("BE-14", mutants.FullMissAnsweredWithNoResults, alone("v1_results_have_one_bool_per_key")),
    _entry("PFX-6", mutants.ExtendsThePrefixInPlaceAndRestoresIt, alone("prefix_keys_are_never_mutated")),
    _entry("PFX-1", mutants.RunPathChainsPagesWithinOneCall, alone("prefix_states_none_empty_and_list_all_work")),
    _entry("PFX-6", mutants.SmallV2QueryKeepsThePrefix, alone("prefix_keys_are_copied_if_kept")),
    _entry("PFX-6", mutants.BatchedV2QueryKeepsThePrefix, alone("prefix_keys_are_copied_if_kept")),
    _entry("PFX-6", mutants.KeepsThePrefixInEveryIndex, alone("prefix_keys_are_copied_if_kept")),
    _entry("NS-9", mutants.FormatTagWithoutTheDtype, alone(_FORMAT), levels=_MEMORY_LEVELS),
    _entry("NS-9", mutants.FormatTagWithoutTheGeometry, alone(_FORMAT), levels=_MEMORY_LEVELS),
    _entry("NS-9", mutants.FormatTagPerHostPool, alone(_FORMAT), levels=_MEMORY_LEVELS),
    _entry("NS-9", mutants.ChecksTheFormatAfterTheCopy, alone(_FORMAT), levels=_MEMORY_LEVELS),
    _entry("BE-17", mutants.V1ReadLeavesTheLastOfSeveralKeys, alone(_STATEFUL, recorded=False), profile="standard"),
    _entry("NS-1", mutants.MambaStateSharedUnderMla, only("ranks_and_models_never_share_pages")),
    # ================ planted_evicting: bugs a backend that may evict must still not have
    _entry("BE-15", evicting.EvictingServesTheKeyBefore, CAUGHT, alone(_SCATTERED), alone(_ROUND_TRIP)),
    _entry("BE-15", evicting.EvictingHitLeavesTheSlot, CAUGHT, alone(_SCATTERED), alone(_ROUND_TRIP)),
    _entry(
        "BE-2",
        evicting.EvictingCountsEveryStoredKey,
        CAUGHT,
        alone("batch_exists_counts_the_leading_run"),
        alone(_STATEFUL),
    ),
)
"""Every planted backend, with the oracles that catch it."""

BY_NAME: dict[str, PlantedBackend] = {entry.name: entry for entry in CATALOG}
"""The entries by the name of their bug."""


def by_kind(kind: str) -> tuple[PlantedBackend, ...]:
    """The entries with an oracle of ``kind``."""
    return tuple(entry for entry in CATALOG if entry.has(kind))


def by_clause(clause_id: str) -> tuple[PlantedBackend, ...]:
    """The entries whose bug breaks ``clause_id``."""
    return tuple(entry for entry in CATALOG if clause_id in entry.clauses)
