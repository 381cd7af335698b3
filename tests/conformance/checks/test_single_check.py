"""Every conformance check has a planted bug that it alone catches.

Scenario: every planted backend of ``planted_catalog.CATALOG`` with an ``only``
oracle is run through the whole suite once; the check of that oracle is then
run by itself against its entry.
Expected: for every check, some entry's ``only`` oracle names it, and that
entry fails that check and no other, and fails it when the check runs alone;
every entry has an oracle that shows some check catches it.
Why it matters: a check whose bugs other checks also catch can be switched off
with every test still green.
"""

from __future__ import annotations

import functools

import pytest

from hicache_contracts.conformance import CHECKS
from tests.conformance.helpers import run
from tests.conformance.planted_catalog import CATALOG, PlantedBackend

RACING = frozenset(check.name for check in CHECKS if check.tier == "concurrency")
"""Checks that catch a race only when the threads interleave so: whether they fail a planted bug varies by run."""


@functools.cache
def failing_checks(entry: PlantedBackend, checks: tuple[str, ...] | None = None) -> frozenset[str]:
    """The checks that fail ``entry`` (a racing one only when no deterministic one fails); one run per session."""
    options = dict(entry.options)
    if checks is not None:
        options["checks"] = checks
    report = run(entry.backend, **options)
    failed = frozenset(outcome.check for outcome in report.sections[0].checks if outcome.status == "fail")
    return failed if failed <= RACING else failed - RACING


ONLY = [(entry, oracle.check) for entry in CATALOG for oracle in entry.oracles if oracle.kind == "only"]
"""Every ``only`` oracle: (entry, the one check that must catch it)."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "entry, check",
    [
        pytest.param(entry, check, id=f"{check}-{entry.id}", marks=pytest.mark.clause(*entry.clauses))
        for entry, check in ONLY
    ],
)
def test_a_single_bug_is_caught_by_its_check_alone(entry: PlantedBackend, check: str) -> None:
    """One ``only`` oracle at a time (select one with ``-k <check name>``)."""
    assert failing_checks(entry) == {check}, f"{entry.name}: the whole suite fails {sorted(failing_checks(entry))}"
    assert failing_checks(entry, (check,)) == {check}, f"{check} alone misses {entry.name}"


def test_every_check_has_a_planted_bug_only_it_catches() -> None:
    owned = {check for _, check in ONLY}
    assert sorted(check.name for check in CHECKS if check.name not in owned) == []


def test_every_planted_backend_has_an_oracle_that_runs_it_unevicting() -> None:
    """The whole suite catches every entry: each has a ``caught``, ``alone`` or ``only`` oracle, whose test runs
    checks of the suite on it as it is (no eviction declared) and fails unless one of them fails it. A separate
    whole-suite run per entry would add nothing but time."""
    kinds = {"caught", "alone", "only"}
    assert [entry.name for entry in CATALOG if not kinds & {oracle.kind for oracle in entry.oracles}] == []
