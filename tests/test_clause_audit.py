"""The clause audit counts only tests that ran and passed.

Scenario: clauses named by a passing test, by tests that only skip, by a failing
test, by a test deselected before it ran, by an xfail, and by none.
Expected: only the first is covered; each other is reported with why; a skip
is accepted only for a reason ACCEPTED_SKIPS names for that clause.
Why it matters: an audit that counts markers at collection reports every clause
covered by a run that executed nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import clause_audit
from tests.clause_audit import ClauseAudit


def report(nodeid: str, when: str, outcome: str, reason: str = "", xfail: bool = False) -> SimpleNamespace:
    longrepr = ("file.py", 1, f"Skipped: {reason}") if outcome == "skipped" else None
    extra = {"wasxfail": "expected"} if xfail else {}
    return SimpleNamespace(
        nodeid=nodeid,
        when=when,
        passed=outcome == "passed",
        failed=outcome == "failed",
        skipped=outcome == "skipped",
        longrepr=longrepr,
        **extra,
    )


def ran(audit: ClauseAudit, nodeid: str, call: str, reason: str = "", xfail: bool = False) -> None:
    audit.record(report(nodeid, "setup", "skipped" if call == "skipped" else "passed", reason))
    if call != "skipped":
        audit.record(report(nodeid, "call", call, xfail=xfail))
    audit.record(report(nodeid, "teardown", "passed"))


def audit_of_every_case() -> ClauseAudit:
    audit = ClauseAudit()
    for clause_id, nodeid in (
        ("A-1", "t::passes"),
        ("A-1", "t::skips"),
        ("B-1", "t::cuda1"),
        ("B-1", "t::cuda2"),
        ("C-1", "t::fails"),
        ("D-1", "t::deselected"),
        ("E-1", "t::xfails"),
    ):
        audit.name(clause_id, nodeid)
    ran(audit, "t::passes", "passed")
    ran(audit, "t::skips", "skipped", "no redis")
    ran(audit, "t::cuda1", "skipped", "needs a CUDA device")
    ran(audit, "t::cuda2", "skipped", "needs a CUDA device")
    ran(audit, "t::fails", "failed")
    audit.record(report("t::xfails", "call", "skipped", xfail=True))
    return audit


def test_only_a_test_that_ran_and_passed_covers_its_clause() -> None:
    missing = audit_of_every_case().uncovered(["A-1", "B-1", "C-1", "D-1", "E-1", "F-1"])
    assert list(missing) == ["B-1", "C-1", "D-1", "E-1", "F-1"]
    assert missing["B-1"] == "its 2 test(s) all skipped (Skipped: needs a CUDA device)"
    assert missing["C-1"] == "no test passed (1 failed)"
    assert missing["D-1"] == "no test passed (1 not run)"
    assert missing["E-1"] == "no test passed (1 failed)"
    assert missing["F-1"] == "no test names it"


def test_a_skip_counts_only_for_a_reason_accepted_for_that_clause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clause_audit, "ACCEPTED_SKIPS", {"B-1": ("needs a CUDA device",)})
    assert list(audit_of_every_case().uncovered(["A-1", "B-1"])) == []
    monkeypatch.setattr(clause_audit, "ACCEPTED_SKIPS", {"A-1": ("needs a CUDA device",)})
    assert list(audit_of_every_case().uncovered(["B-1"])) == ["B-1"]


def test_a_teardown_error_after_a_pass_uncovers_the_clause() -> None:
    audit = ClauseAudit()
    audit.name("A-1", "t::x")
    audit.record(report("t::x", "call", "passed"))
    audit.record(report("t::x", "teardown", "failed"))
    assert list(audit.uncovered(["A-1"])) == ["A-1"]


def test_counting_markers_at_collection_would_cover_every_case() -> None:
    """The planted bug: an audit that counts names, not outcomes, finds only the unnamed clause missing."""
    audit = audit_of_every_case()
    assert [c for c in ["A-1", "B-1", "C-1", "D-1", "E-1", "F-1"] if c not in audit.named] == ["F-1"]
