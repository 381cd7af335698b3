"""A backend that may evict is held to "each page a hit with its bytes, or a miss", never to "it is still there".

Scenario: the whole suite runs against two correct evicting backends (one drops a page right after serving
it, one keeps nothing past the call that stored it) and against evicting backends with one bug each.
Expected: the correct ones fail nothing; a check left with nothing to look at (every page gone) is skipped
with that reason, not passed; the planted bugs are still caught on their clause.
Why it matters: SGLang never asks an evicting backend to keep a page, so a suite that does fails correct
caches; and eviction must not become a blanket excuse for wrong bytes or wrong counts.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import backend_clauses
from hicache_reference.backends import MemoryBackend
from tests.conformance.helpers import UNCLAIMED_CLAUSES, checks_for, failed, run, statuses
from tests.conformance.planted_catalog import PlantedBackend, by_kind
from tests.conformance.planted_evicting import EvictsAfterRead, EvictsEverything

EVICTED_REASON = "the backend may evict, so each miss was allowed and nothing was checked"
"""The end of the reason a check gives when every page it wrote was gone before it could look."""

NEEDS_PAGES_KEPT = {
    "KEY-2",
    "BE-1",
    "BE-2",
    "BE-7",
    "BE-10",
    "BE-11",
    "BE-15",
    "BE-17",
    "BE-21",
    "BE-23",
    "BE-24",
    "BE-25",
    "BE-26",
    "BE-27",
    "BE-28",
    "BE-30",
    "BE-31",
    "BE-33",
    "HYB-6",
    "HYB-7",
    "HYB-8",
    "PFX-1",
    "NS-1",
    "NS-2",
    "NS-3",
    "NS-4",
    "NS-5",
    "NS-6",
    "NS-7",
    "NS-8",
}
"""Clauses every check of which can only show something with a page still there when it looks."""


def not_passing(report) -> dict[str, str]:
    """The clauses not passed, but those of a level no in-test backend claims (format: skipped, not declared)."""
    return {
        verdict.clause_id: verdict.reason or ""
        for verdict in report.sections[0].clauses
        if verdict.status != "pass" and verdict.clause_id not in UNCLAIMED_CLAUSES
    }


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_a_backend_evicting_right_after_each_read_passes_every_clause() -> None:
    """Every check reads its pages once after writing them (or writes them again after its setup read them)."""
    report = run(EvictsAfterRead)
    assert not_passing(report) == {}, report.render_text(color=False)
    assert report.exit_code == 0


@pytest.mark.clause(*sorted(NEEDS_PAGES_KEPT))
def test_a_backend_keeping_nothing_fails_nothing_and_says_what_it_could_not_check() -> None:
    report = run(EvictsEverything)
    assert failed(report) == [], report.render_text(color=False)
    skipped = not_passing(report)
    assert set(skipped) == NEEDS_PAGES_KEPT, statuses(report)
    unexplained = {clause_id: reason for clause_id, reason in skipped.items() if EVICTED_REASON not in reason}
    assert unexplained == {}


@pytest.mark.clause("BE-2", "BE-10", "BE-17", "BE-21")
@pytest.mark.parametrize("capacity", [2, 8])
def test_the_reference_lru_fails_nothing_once_it_declares_that_it_evicts(capacity: int) -> None:
    """The reference memory backend bounded to a few pages drops the least recently used: a real evicting cache."""
    undeclared = run(MemoryBackend, extra={"capacity_pages": capacity})
    assert "BE-17" in failed(undeclared)  # held to keeping its pages, it fails
    declared = run(MemoryBackend, extra={"capacity_pages": capacity}, may_evict=True)
    assert failed(declared) == [], declared.render_text(color=False)
    assert all(verdict.reason for verdict in declared.sections[0].clauses if verdict.status == "skip")


def eviction_cases(kind: str) -> list:
    return [
        pytest.param(entry, id=entry.id, marks=[pytest.mark.clause(*entry.clauses), pytest.mark.slow])
        for entry in by_kind(kind)
    ]


def caught_with_eviction_declared(entry: PlantedBackend) -> list[str]:
    """The entry's clauses its clauses' checks fail, with eviction declared."""
    report = run(entry.backend, checks=checks_for(entry.clauses), may_evict=True, **entry.options)
    return [clause_id for clause_id in failed(report) if clause_id in entry.clauses]


@pytest.mark.parametrize("entry", eviction_cases("evicting"))
def test_with_eviction_declared_the_planted_bug_is_still_caught(entry: PlantedBackend) -> None:
    """Wrong bytes, wrong shapes, counts past a hole, pages leaking across namespaces: eviction excuses none."""
    assert caught_with_eviction_declared(entry), f"{entry.name}: missed once eviction is declared"


@pytest.mark.parametrize("entry", eviction_cases("excused"))
def test_with_eviction_declared_a_bug_that_only_loses_pages_passes(entry: PlantedBackend) -> None:
    """Pages lost or never found, or a hit counted short: a backend that may evict may do that."""
    assert caught_with_eviction_declared(entry) == [], f"{entry.name}: held to keeping its pages"
