"""Every planted bug is caught on its clause, and the correct in-test backend passes every clause.

Scenario: each planted backend of ``planted_catalog.CATALOG`` with a ``CAUGHT``
oracle differs from ``CorrectBackend`` in one bug; the suite runs the checks of
the clause the bug breaks.
Expected: that clause is reported failed, with a message and a counterexample.
Why it matters: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import inspect
import json

import pytest

from hicache_contracts.conformance import CHECKS, backend_clauses, level_clause_ids
from hicache_spec.clauses import CLAUSES
from tests.conformance import planted_backdoor, planted_backends, planted_evicting, planted_branches, planted_single
from tests.conformance.check_messages import RACING, RECORDED, candidates
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import checks_for, failed, run, statuses
from tests.conformance.planted_backends import NoPipelineRankInKeys, ScalarV1Result, ShortObjectCopiedIntoTarget
from tests.conformance.planted_catalog import BY_NAME, CATALOG, LEGACY_MODE, by_clause, by_kind

CLAUSE_IDS = {clause.id for clause in CLAUSES}


@pytest.mark.parametrize(
    "entry",
    [pytest.param(entry, id=entry.id, marks=pytest.mark.clause(*entry.clauses)) for entry in by_kind("caught")],
)
def test_planted_bug_is_caught_on_its_clause(entry) -> None:
    report = run(entry.backend, checks=checks_for(entry.clauses), **entry.options)
    caught = [clause_id for clause_id in failed(report) if clause_id in entry.clauses]
    assert caught, f"{entry.name}: expected a failure of {entry.clauses}, got {statuses(report)}"
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == caught[0])
    assert verdict.failures and verdict.failures[0].message
    assert report.exit_code == 1


def not_passing(report) -> dict:
    return {verdict.clause_id: verdict.reason for verdict in report.sections[0].clauses if verdict.status != "pass"}


@pytest.mark.clause(*[item.id for item in backend_clauses() if item.level != "format"])
def test_correct_backend_passes_every_clause() -> None:
    report = run(CorrectBackend)  # every level declared but format, legacy and robustness included
    # format (NS-9) is a guard the in-test backend does not make: not declared, so skipped; the reference
    # backends claim it and pass it (test_reference_backends.py)
    skipped = {clause_id: "level format not claimed: not declared" for clause_id in level_clause_ids("format")}
    assert not_passing(report) == skipped, report.render_text(color=False)
    assert report.exit_code == 0


@pytest.mark.clause(*[item.id for item in backend_clauses() if item.level != "v1"])
def test_correct_backend_driven_through_the_legacy_methods_passes_every_clause_it_claims() -> None:
    report = run(CorrectBackend, **LEGACY_MODE)
    skipped = not_passing(report)
    # BE-7 holds a v1 write half done; without v1 there is no write to hold
    # format is not declared (the in-test backend makes no format guard)
    expected = {"BE-7"} | set(level_clause_ids("v1")) | set(level_clause_ids("format"))
    assert set(skipped) == expected, report.render_text(color=False)
    assert report.exit_code == 0


def test_every_check_has_a_planted_bug_it_catches() -> None:
    planted = {clause_id for entry in by_kind("caught") for clause_id in entry.clauses}
    uncaught = [check.name for check in CHECKS if not set(check.clauses) & planted]
    assert uncaught == []


def test_every_backend_clause_has_a_check() -> None:
    checked = {clause_id for check in CHECKS for clause_id in check.clauses}
    assert [item.id for item in backend_clauses() if item.id not in checked] == []


@pytest.mark.clause("BE-14", "NS-2")
def test_a_full_run_reports_the_planted_clause_among_the_others() -> None:
    """The full smoke suite, not only the clause's checks, finds a planted bug and names its clause."""
    for backend, clause in ((ScalarV1Result, "BE-14"), (NoPipelineRankInKeys, "NS-2")):
        report = run(backend)
        assert clause in failed(report)


@pytest.mark.clause("BE-13")
def test_a_lookup_that_raises_on_a_short_object_says_which_object_it_met() -> None:
    report = run(ShortObjectCopiedIntoTarget, checks=("short_objects_are_misses",), **LEGACY_MODE)
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == "BE-13")
    assert verdict.status == "fail"
    failure = verdict.failures[0]
    assert failure.message.startswith("get(k0, ") and " raised " in failure.message
    assert failure.counterexample is not None
    assert failure.counterexample.startswith("set(") and "0-element tensor), then look it up" in failure.counterexample


NOT_PLANTED = {
    "HexOnlyKeys",  # correct: SGLang sends only 64-character lowercase hex keys (KEY-2)
    "EmptyLookupAnsweredWithFalse",  # correct: SGLang reads a bool count as its int value (BE-2, BE-3)
    "CountsWithNumpyIntegers",  # correct: SGLang reads a numpy integer count as its int value (BE-2)
    "OneReplicaForEveryDcpRankUndeclared",  # correct: SGLang hands a dynamic backend no DCP config (NS-5)
    "DisabledLayoutListsItsRankPools",  # correct: a disabled layout joins as disabled whatever it lists (BE-32)
    "FlagsAsNumpyBools",  # correct: SGLang tests a numpy bool flag by its truth (BE-14, BE-19)
    "ExistsRaisesBesideItsOwnLookup",  # correct: SGLang asks exists only through HiCacheStorage's batch_exists (BE-4)
    "CompactsHitsPastAMiss",  # correct: SGLang reads no entry of a v1 read after its first False (BE-15)
    "OneHitLandsInTheFirstSlot",
    "V1GetNamesItsInfoParameterInfo",  # correct: releases hand extra_info to the v1 calls positionally (BE-8)
    "V1SetNamesItsInfoParameterInfo",
    "CorrectBackdoor",
    "CorrectWithBackdoor",
    "ReadsTrustAnIndex",
    "EvictsAfterRead",
    "EvictsEverything",
    "RunBackend",
    "RebuildsItsIndexOnWrite",
    "EvictsAfterTheSecondRead",
    "KeepsOneOfEachWrite",
    "ChecksItsHostIndices",
    "HoldsOnePage",
    "LegacyLeftUnimplemented",
    "V2LeftUnimplemented",
    "V2HookRefusesASecondPoolTersely",
    "HoldsOnePageForEveryController",
    "AdmitsNothingOnceFull",
    "RefusesPagesOfZeros",
    "KeepsTheFirstWrite",
    "RefusesV2Pools",
    "RefusesADerivedSwaPool",
    "RefusesPastItsRoom",
    "ServesEveryControllerThroughTheLegacyMethods",
    "LeavesASecondPoolToTheV2Hook",
    "SplitsHeadsOnlyInAPageHeadLayout",
    "OneHostPoolSizePerModel",
    "WalksThePrefixThroughLinkedNodes",
    "EvictsAfterReadListingItsLengths",
    "KvReadBringsItsDerivedPagesAlong",
    "FilesSidecarPagesByHitPolicy",
    "SharedStagingBuffer",
    "WriteKeysParkedOnTheInstance",
    "_FormatTagLeavesOut",
}
"""The classes of the family modules that are no planted bug: correct backends, hooks and shared bases."""


def test_the_catalog_names_every_planted_bug_once() -> None:
    names = [entry.name for entry in CATALOG]
    assert len(names) == len(set(names)), "a bug is planted twice"
    assert all(entry.oracles for entry in CATALOG), "an entry no oracle catches"
    families = (planted_backdoor, planted_backends, planted_evicting, planted_branches, planted_single)
    defined = {
        name
        for family in families
        for name, value in vars(family).items()
        if inspect.isclass(value) and value.__module__ == family.__name__
    }
    assert sorted(defined - NOT_PLANTED - set(names)) == [], "a planted bug the catalog does not name"
    assert sorted(set(names) - defined) == [] and not set(names) & NOT_PLANTED
    assert all(entry in by_clause(clause_id) for entry in CATALOG for clause_id in entry.clauses)


def test_every_entry_names_known_clauses_and_checks_that_report_them() -> None:
    unknown = sorted({clause_id for entry in CATALOG for clause_id in entry.clauses} - CLAUSE_IDS)
    assert unknown == [], f"unknown clause IDs: {unknown}"
    clauses_of = {check.name: set(check.clauses) for check in CHECKS}
    for entry in CATALOG:
        for oracle in entry.alone():
            assert oracle.check in clauses_of, f"{entry.name}: no check {oracle.check}"
            assert clauses_of[oracle.check] & set(entry.clauses), f"{entry.name}: {oracle.check} reports none"


def test_the_recorded_verdicts_are_those_the_catalog_names() -> None:
    """check_messages.json holds a verdict for exactly the recorded oracles, each on its entry's clause."""
    recorded = json.loads(RECORDED.read_text())
    named = {(entry.name, oracle.check) for entry in CATALOG for oracle in entry.alone() if oracle.recorded}
    assert {(name, check) for name, by_check in recorded.items() for check in by_check} == named
    for name, check in named:
        entry = BY_NAME[name]
        clause_id, message, _ = recorded[name][check]
        assert clause_id in entry.clauses and message, (name, check)
        assert check in candidates(entry) and check not in RACING, f"{name}: recording would not run {check}"
        assert not (entry.options.get("profile") or entry.options.get("timeout_s")), f"{name}: too slow to record"


def test_every_entry_the_clause_checks_catch_says_whether_eviction_excuses_it() -> None:
    for entry in CATALOG:
        declared = [oracle for oracle in entry.oracles if oracle.kind in ("evicting", "excused")]
        needs = entry.has("caught") and not getattr(entry.backend, "hicache_may_evict", False)
        assert len(declared) == (1 if needs else 0), entry.name
