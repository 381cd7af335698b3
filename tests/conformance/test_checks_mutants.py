"""Every branch of a vendor check that decides a verdict is reached by a planted bug or a correct variant.

Scenario: each backend of planted_mutants.MUTANT_PLANTED is run through the one check that must catch
it; each correct variant of planted_mutants.CORRECT_VARIANTS through every check.
Expected: the planted bug fails its check on its clause, with a message; a correct variant fails none.
Why it matters: a condition of a check that no bug reaches can be inverted or dropped with every test
still green, and a check that moves to other host pages stops catching a bug that depends on them
(docs/mutation/checks.md lists the checks' mutation score).
"""

from __future__ import annotations

import json

import pytest

from tests.conformance.check_messages import BACKENDS, RECORDED, verdict

from tests.conformance.helpers import failed, run, statuses
from tests.conformance.planted_mutants import CORRECT_VARIANTS, MUTANT_PLANTED, one_run
from hicache_contracts.conformance.pools import slots_of_pages


@pytest.mark.parametrize(
    "backend, check, clause, options",
    [
        pytest.param(backend, check, clause, options, id=backend.__name__, marks=pytest.mark.clause(clause))
        for backend, (check, clause, options) in MUTANT_PLANTED.items()
    ],
)
def test_planted_bug_fails_its_check(backend: type, check: str, clause: str, options: dict) -> None:
    report = run(backend, checks=(check,), **options)
    assert clause in failed(report), f"{backend.__name__}: {check} gave {statuses(report)}"
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == clause)
    assert verdict.failures and verdict.failures[0].message


@pytest.mark.parametrize(
    "backend, options", [pytest.param(backend, options, id=name) for name, backend, options in CORRECT_VARIANTS]
)
def test_correct_variant_passes_every_check(backend: type, options: dict) -> None:
    report = run(backend, **options)
    failing = {verdict.clause_id: verdict.reason for verdict in report.sections[0].clauses if verdict.status == "fail"}
    assert failing == {}, report.render_text(color=False)


RECORDED_VERDICTS = [
    (name, check, expected)
    for name, by_check in json.loads(RECORDED.read_text()).items()
    for check, expected in sorted(by_check.items())
]


@pytest.mark.parametrize(
    "name, check, expected",
    [pytest.param(name, check, expected, id=f"{name}-{check}") for name, check, expected in RECORDED_VERDICTS],
)
def test_check_alone_reports_the_planted_bug_as_recorded(name: str, check: str, expected: list) -> None:
    """Run alone, the check fails the planted bug on the same clause, with the same message and counterexample."""
    assert verdict(BACKENDS[name], check) == expected


@pytest.mark.parametrize(
    "pages, expected",
    [([4, 5], True), ([0, 1, 2], True), ([3, 5], False), ([3, 3], False), ([5, 4], False), ([5], False), ([], False)],
)
def test_a_run_is_two_or_more_ascending_consecutive_host_pages(pages: list, expected: bool) -> None:
    """The run-path planted bugs take their fast path exactly for one ascending run of host pages."""
    assert one_run(slots_of_pages(pages, 4), 4, len(pages)) is expected
