"""A clause is reported passed only when its own assertions ran.

Scenario: a check covering several clauses (NS-1..NS-4) passes, but the branch
asserting one of them (NS-2) never runs.
Expected: NS-2 is reported skipped with a reason naming the check; the clauses
whose assertions ran pass; a check of one clause that passes still passes.
Why it matters: a clause shown passed that nothing looked at hides a bug there.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance.checks import namespacing as checks_namespacing
from hicache_contracts.conformance.reporting.report import CheckOutcome
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run, statuses

NS_CHECK = "ranks_and_models_never_share_pages"


def without_ns2(monkeypatch: pytest.MonkeyPatch) -> None:
    original = checks_namespacing.sibling_configs
    monkeypatch.setattr(
        checks_namespacing,
        "sibling_configs",
        lambda suite, model: [row for row in original(suite, model) if row[0] != "NS-2"],
    )


def verdict(report, clause_id: str):
    return next(item for item in report.sections[0].clauses if item.clause_id == clause_id)


@pytest.mark.clause("NS-1", "NS-3", "NS-4")
def test_a_skipped_branch_leaves_its_clause_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    without_ns2(monkeypatch)
    report = run(CorrectBackend, checks=(NS_CHECK,))
    found = statuses(report)
    assert {clause_id: found[clause_id] for clause_id in ("NS-1", "NS-2", "NS-3", "NS-4")} == {
        "NS-1": "pass",
        "NS-2": "skip",
        "NS-3": "pass",
        "NS-4": "pass",
    }
    assert verdict(report, "NS-2").reason == f"not checked: {NS_CHECK} passed without running NS-2's assertions"
    outcome = next(item for item in report.sections[0].checks if item.check == NS_CHECK)
    assert outcome.status == "pass" and outcome.asserted == ("NS-1", "NS-3", "NS-4")


@pytest.mark.clause("NS-1", "NS-2", "NS-3", "NS-4")
def test_every_branch_run_passes_every_clause() -> None:
    report = run(CorrectBackend, checks=(NS_CHECK,))
    assert [statuses(report)[clause_id] for clause_id in ("NS-1", "NS-2", "NS-3", "NS-4")] == ["pass"] * 4


@pytest.mark.clause("BE-2")
def test_a_passing_check_of_one_clause_passes_it() -> None:
    report = run(CorrectBackend, checks=("batch_exists_counts_the_leading_run",))
    assert statuses(report)["BE-2"] == "pass"


def test_the_old_rule_would_show_the_skipped_branch_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted bug: a passed check passes every clause it names, asserted or not."""
    without_ns2(monkeypatch)
    monkeypatch.setattr(
        CheckOutcome, "passed", lambda self, clause_id: self.status == "pass" and clause_id in self.clauses
    )
    assert statuses(run(CorrectBackend, checks=(NS_CHECK,)))["NS-2"] == "pass"
