"""The verdicts every suite of the project reports in: a section per subject, its level and clause verdicts.

The backend suite, the engine scenarios (``engine.scenarios.check_engine``
returns a ``ClauseVerdict`` per clause exercised) and the linker suite all
judge clauses in these terms; ``conformance.reporting.report.SuiteReport``
holds the sections of a run and renders them, with one set of writers
(``report_writers``), whichever suite made them. Only the standard library
is imported here, so every suite can build its verdicts without the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "CheckOutcome",
    "ClauseVerdict",
    "ERROR",
    "FAIL",
    "Failure",
    "LevelVerdict",
    "PASS",
    "ReportSection",
    "SKIP",
    "STATUSES",
]

PASS = "pass"
"""Every check of the clause ran and found nothing wrong."""
FAIL = "fail"
"""A check found the clause broken."""
SKIP = "skip"
"""The clause was not checked (its level is not claimed, or no check could look); the reason says why."""
ERROR = "error"
"""The suite itself broke while judging the clause (its own bug, a hypothesis health-check or flakiness error):
the clause was not judged, and this is no verdict on the backend; the failures say what broke."""
STATUSES = (PASS, FAIL, SKIP, ERROR)


@dataclass(frozen=True)
class Failure:
    """One way a clause was found broken."""

    check: str
    """The check that found it."""
    message: str
    """What was wrong."""
    counterexample: Optional[str] = None
    """The smallest input the check found that shows it."""

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "message": self.message, "counterexample": self.counterexample}


@dataclass(frozen=True)
class CheckOutcome:
    """What one check did."""

    check: str
    """The check's name."""
    clauses: tuple[str, ...]
    """The clauses it checks."""
    status: str
    """``pass``, ``fail``, ``skip`` or ``error`` (the suite itself broke)."""
    clause_id: Optional[str] = None
    """The clause it found broken, when it failed."""
    message: Optional[str] = None
    """The failure, or the reason for skipping."""
    counterexample: Optional[str] = None
    """The failure's smallest counterexample."""
    duration_s: float = 0.0
    """Seconds it took."""
    needs: Optional[str] = None
    """When skipped because its setup found another clause broken: that clause (the root cause)."""
    asserted: tuple[str, ...] = ()
    """Of its clauses, those whose assertions ran (when it passed)."""

    def passed(self, clause_id: str) -> bool:
        """Whether it passed with ``clause_id``'s own assertions run (a check of one clause: it passed)."""
        return (
            self.status == "pass"
            and clause_id in self.clauses
            and (len(self.clauses) == 1 or clause_id in self.asserted)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "clauses": list(self.clauses),
            "status": self.status,
            "clause": self.clause_id,
            "message": self.message,
            "counterexample": self.counterexample,
            "duration_s": round(self.duration_s, 4),
            "needs": self.needs,
        }


@dataclass(frozen=True)
class ClauseVerdict:
    """The verdict on one clause."""

    clause_id: str
    level: str
    statement: str
    status: str
    """``pass``, ``fail``, ``skip`` or ``error``."""
    reason: Optional[str] = None
    """Why it was skipped, or why it was not judged (error)."""
    failures: tuple[Failure, ...] = ()
    """How it was found broken (fail), or how the suite broke judging it (error)."""
    checks: tuple[str, ...] = ()
    """The checks that looked at it."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.clause_id,
            "level": self.level,
            "statement": self.statement,
            "status": self.status,
            "reason": self.reason,
            "failures": [item.to_dict() for item in self.failures],
            "checks": list(self.checks),
        }


@dataclass(frozen=True)
class LevelVerdict:
    """Whether a level was claimed, and how."""

    level: str
    claimed: bool
    source: str
    """``required``, ``declared`` or ``probed``."""
    reason: Optional[str] = None
    """Why it is not claimed, or a note on the claim (declared but not honoured)."""
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "claimed": self.claimed,
            "source": self.source,
            "reason": self.reason,
            "description": self.description,
        }


@dataclass(frozen=True)
class ReportSection:
    """One subject's verdicts."""

    title: str
    """Heading, e.g. ``backend my_pkg.store:MyStore``."""
    subject: str
    """What was checked (the backend's name)."""
    levels: tuple[LevelVerdict, ...]
    clauses: tuple[ClauseVerdict, ...]
    checks: tuple[CheckOutcome, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    """The options of the run (profile, seed, page size, ...), as plain data."""
    notes: tuple[str, ...] = ()
    """Anything else worth reading (cleanup problems, the run namespace)."""
    duration_s: float = 0.0

    def counts(self) -> dict[str, int]:
        """Return how many clauses have each status."""
        result = {status: 0 for status in STATUSES}
        for verdict in self.clauses:
            result[verdict.status] += 1
        return result

    @property
    def failed(self) -> bool:
        """Whether any clause failed."""
        return any(verdict.status == FAIL for verdict in self.clauses)

    @property
    def errored(self) -> bool:
        """Whether the suite itself broke judging any clause (those clauses are not judged)."""
        return any(verdict.status == ERROR for verdict in self.clauses)

    def root_causes(self) -> list[tuple[str, tuple[str, ...]]]:
        """Return the failing clauses other clauses' checks needed in their setup, or stopped at before reaching
        their other clauses, each with the clauses left unchecked because of it; the one most depended on first."""
        status = {verdict.clause_id: verdict.status for verdict in self.clauses}
        order = [verdict.clause_id for verdict in self.clauses]
        dependents: dict[str, list[str]] = {}
        for outcome in self.checks:
            # a check whose setup needed a failing clause, or that stopped at one of its own clauses before the others
            root = (
                outcome.needs if outcome.needs is not None else (outcome.clause_id if outcome.status == FAIL else None)
            )
            if root is None or status.get(root) != FAIL:
                continue
            waiting = dependents.setdefault(root, [])
            waiting += [
                clause_id for clause_id in outcome.clauses if status.get(clause_id) == SKIP and clause_id not in waiting
            ]
        found = [(root, tuple(sorted(waiting, key=order.index))) for root, waiting in dependents.items() if waiting]
        return sorted(found, key=lambda item: (-len(item[1]), order.index(item[0])))

    def root_cause_line(self) -> Optional[str]:
        """Return ``root causes: BE-15 (fix first: 9 clauses not checked because of it: KEY-2, ...)``, or None."""
        roots = self.root_causes()
        if not roots:
            return None
        parts = []
        for root, waiting in roots:
            shown = ", ".join(waiting[:6]) + (", ..." if len(waiting) > 6 else "")
            parts.append(
                f"{root} ({len(waiting)} clause{'s' if len(waiting) != 1 else ''} not checked because of it: {shown})"
            )
        return "root causes, fix first: " + "; ".join(parts)

    def level_clauses(self, level: str) -> tuple[ClauseVerdict, ...]:
        return tuple(verdict for verdict in self.clauses if verdict.level == level)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "subject": self.subject,
            "passed": not self.failed and not self.errored,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "options": self.options,
            "notes": list(self.notes),
            "levels": [item.to_dict() for item in self.levels],
            "clauses": [item.to_dict() for item in self.clauses],
            "checks": [item.to_dict() for item in self.checks],
        }
