"""Every conformance check has a planted bug that it alone catches.

Scenario: every planted backend (planted_backends.PLANTED and planted_single.SINGLE)
is run through the whole suite once; the check that catches a bug alone is then
run by itself against it.
Expected: for every check, some planted backend fails that check and no other,
and fails it when the check runs alone.
Why it matters: a check whose bugs other checks also catch can be switched off
with every test still green. Checks without such a bug yet are listed in
WITHOUT_OWN_BUG; no check outside it may lack one.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import CHECKS
from tests.conformance.helpers import run
from tests.conformance.planted_backends import PLANTED
from tests.conformance.planted_single import SINGLE
from tests.conformance.test_planted import SPECIAL_OPTIONS

WITHOUT_OWN_BUG = frozenset(
    {
        "batch_exists_has_no_side_effects",
        "missing_keys_are_misses_not_errors",
        "storage_errors_are_failures_not_exceptions",
        "pages_are_invisible_until_fully_written",
        "clear_removes_every_page",
        "legacy_results_have_their_shapes",
        "short_objects_are_misses",
        "v1_pages_round_trip_bit_for_bit",
        "v1_reads_touch_only_addressed_slots",
        "v1_hits_after_a_miss_land_in_their_own_scattered_slots",
        "v2_pool_hits_count_only_pages_that_landed",
        "v2_kv_derived_sidecars_travel_with_kv",
        "exists_get_and_set_share_one_key_scheme",
        "concurrent_calls_keep_every_key_consistent",
    }
)
"""Checks every planted bug of which another check catches too (to be given a bug of their own)."""

BACKENDS = [*PLANTED, *SINGLE]
RACING = frozenset(check.name for check in CHECKS if check.tier == "concurrency")
"""Checks that catch a race only when the threads interleave so: whether they fail a planted bug varies by run."""


def failing_checks(backend: type, checks: tuple[str, ...] | None = None) -> frozenset[str]:
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
def test_every_check_has_a_planted_bug_only_it_catches(caught_by: dict[type, frozenset[str]]) -> None:
    owned = own_bugs(caught_by)
    without = {check.name for check in CHECKS if check.name not in owned}
    assert without <= WITHOUT_OWN_BUG, f"checks without a bug of their own: {sorted(without - WITHOUT_OWN_BUG)}"


@pytest.mark.slow
def test_each_check_catches_its_own_bug_when_run_alone(caught_by: dict[type, frozenset[str]]) -> None:
    for check, backends in sorted(own_bugs(caught_by).items()):
        assert failing_checks(backends[0], (check,)) == {check}, f"{check} alone misses {backends[0].__name__}"


@pytest.mark.slow
def test_every_planted_backend_is_caught(caught_by: dict[type, frozenset[str]]) -> None:
    assert [backend.__name__ for backend, checks in caught_by.items() if not checks] == []
    assert all(caught_by[backend] == {check} for backend, check in SINGLE.items())
