"""The clause-coverage audit (``pytest --clause-audit``): which clauses a run's executed tests cover.

A clause counts as covered only by a test naming it (``@pytest.mark.clause``)
that ran and passed, or that was skipped for a reason ACCEPTED_SKIPS accepts
for that clause. A clause whose tests all skipped, failed or were deselected
is uncovered, and the audit fails the session, saying which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ACCEPTED_SKIPS: dict[str, tuple[str, ...]] = {}
"""Clause ID -> skip reasons (substrings) under which a skipped test still covers it. None are accepted now."""


@dataclass
class ClauseAudit:
    """Collects clause markers at collection and each named test's outcome as it runs."""

    named: dict[str, list[str]] = field(default_factory=dict)  # clause -> node ids naming it
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed / failed / skipped
    skip_reasons: dict[str, str] = field(default_factory=dict)  # node id -> why it skipped

    def name(self, clause_id: str, nodeid: str) -> None:
        self.named.setdefault(clause_id, []).append(nodeid)

    def record(self, report) -> None:
        """Take one phase's report (pytest_runtest_logreport)."""
        nodeid = report.nodeid
        if report.failed or getattr(report, "wasxfail", None) is not None:
            self.outcomes[nodeid] = "failed"
        elif report.skipped and self.outcomes.get(nodeid) != "failed":
            self.outcomes[nodeid] = "skipped"
            longrepr = report.longrepr
            self.skip_reasons[nodeid] = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        elif report.when == "call" and report.passed and nodeid not in self.outcomes:
            self.outcomes[nodeid] = "passed"

    def covers(self, clause_id: str, nodeid: str) -> bool:
        outcome = self.outcomes.get(nodeid)
        if outcome == "passed":
            return True
        reason = self.skip_reasons.get(nodeid, "")
        return outcome == "skipped" and any(accepted in reason for accepted in ACCEPTED_SKIPS.get(clause_id, ()))

    def uncovered(self, clause_ids) -> dict[str, str]:
        """Clause ID -> why no executed test covers it, for every clause of ``clause_ids`` left uncovered."""
        found = {}
        for clause_id in clause_ids:
            tests = self.named.get(clause_id, [])
            if any(self.covers(clause_id, nodeid) for nodeid in tests):
                continue
            if not tests:
                found[clause_id] = "no test names it"
                continue
            outcomes = [self.outcomes.get(nodeid, "not run") for nodeid in tests]
            if all(outcome == "skipped" for outcome in outcomes):
                reasons = sorted({self.skip_reasons[nodeid] for nodeid in tests})
                found[clause_id] = f"its {len(tests)} test(s) all skipped ({'; '.join(reasons)[:200]})"
            else:
                counts = {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))}
                found[clause_id] = "no test passed (" + ", ".join(f"{n} {o}" for o, n in counts.items()) + ")"
        return found
