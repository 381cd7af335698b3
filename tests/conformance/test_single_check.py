"""Every conformance check has a planted bug that it alone catches.

Scenario: every planted backend (planted_backends.PLANTED and planted_single.SINGLE)
is run through the whole suite once; the check that catches a bug alone is then
run by itself against it.
Expected: for every check, some planted backend fails that check and no other,
and fails it when the check runs alone.
Why it matters: a check whose bugs other checks also catch can be switched off
with every test still green.
"""

from __future__ import annotations

import functools

import pytest

from hicache_contracts.conformance import CHECKS
from tests.conformance.helpers import run
from tests.conformance.planted_backends import PLANTED
from tests.conformance.planted_single import SINGLE
from tests.conformance.test_planted import SPECIAL_OPTIONS

BACKENDS = [*PLANTED, *SINGLE]
RACING = frozenset(check.name for check in CHECKS if check.tier == "concurrency")
"""Checks that catch a race only when the threads interleave so: whether they fail a planted bug varies by run."""


@functools.lru_cache(maxsize=None)
def failing_checks(backend: type, checks: tuple[str, ...] | None = None) -> frozenset[str]:
    """The checks that fail ``backend`` (a racing one only when no deterministic one fails); one run per session."""
    options = dict(SPECIAL_OPTIONS.get(backend, {}))
    if checks is not None:
        options["checks"] = checks
    report = run(backend, **options)
    failed = frozenset(outcome.check for outcome in report.sections[0].checks if outcome.status == "fail")
    return failed if failed <= RACING else failed - RACING


@pytest.fixture(scope="module")
def caught_by() -> dict[type, frozenset[str]]:
    return {backend: failing_checks(backend) for backend in BACKENDS}


def own_bugs(caught_by: dict[type, frozenset[str]]) -> dict[str, list[type]]:
    owned: dict[str, list[type]] = {}
    for backend, checks in caught_by.items():
        if len(checks) == 1:
            owned.setdefault(next(iter(checks)), []).append(backend)
    return owned


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend, check",
    [pytest.param(backend, check, id=f"{check}-{backend.__name__}") for backend, check in SINGLE.items()],
)
def test_a_single_bug_is_caught_by_its_check_alone(backend: type, check: str) -> None:
    """One planted bug of SINGLE at a time (select one with ``-k <check name>``)."""
    assert failing_checks(backend) == {check}, f"{backend.__name__}: the whole suite fails other checks"
    assert failing_checks(backend, (check,)) == {check}, f"{check} alone misses {backend.__name__}"


@pytest.mark.slow
def test_every_check_has_a_planted_bug_only_it_catches(caught_by: dict[type, frozenset[str]]) -> None:
    owned = own_bugs(caught_by)
    assert sorted(check.name for check in CHECKS if check.name not in owned) == []


@pytest.mark.slow
def test_each_check_catches_its_own_bug_when_run_alone(caught_by: dict[type, frozenset[str]]) -> None:
    for check, backends in sorted(own_bugs(caught_by).items()):
        assert failing_checks(backends[0], (check,)) == {check}, f"{check} alone misses {backends[0].__name__}"


@pytest.mark.slow
def test_every_planted_backend_is_caught(caught_by: dict[type, frozenset[str]]) -> None:
    assert [backend.__name__ for backend, checks in caught_by.items() if not checks] == []
    assert all(caught_by[backend] == {check} for backend, check in SINGLE.items())
