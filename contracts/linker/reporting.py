"""The linker suite's report in the backend suite's form: one section, a verdict per LNK clause, a bundle.

``suite_report(report)`` turns a ``LinkerReport`` into a ``SuiteReport`` with
one section (level ``linker``, declared): a ``ClauseVerdict`` per live
linker clause a linker must honour, a ``CheckOutcome`` per check. From there
everything is the backend suite's own code: the JSON, JUnit XML and Markdown
renderings, ``certification_problems``, the results bundle
(``write_bundle``, through ``finish_run``) and ``hicache-conform
verify-submission``, which a third party runs on the bundle as on a
backend's.

How rows read as verdicts: a clause fails when any counted row of it failed;
a clause that does not hold for the target release, its check, and a row of
another release's interface, are skipped ``not applicable: ...``
(certification accepts those); any other skip, a clause no row covered, or a check not run
refuses certification, each named. A failure carries the clause's rationale
and the command that replays the check alone (``replay_command``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from hicache_contracts.conformance.reporting import bundle
from hicache_contracts.conformance.reporting.certify import NOT_APPLICABLE
from hicache_contracts.conformance.reporting.report import (
    FAIL,
    PASS,
    SKIP,
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
    SuiteReport,
)
from hicache_contracts.conformance.reporting.redaction import secret_values
from hicache_spec import clauses
from hicache_spec.registry import clause as lookup_clause
from hicache_spec.registry import holds_for

__all__ = [
    "FAIL",
    "PASS",
    "SKIP",
    "CheckResult",
    "LinkerReport",
    "LINKER_LEVEL",
    "SUITE",
    "SUITES",
    "linker_clause_ids",
    "linker_expectations",
    "replay_command",
    "suite_report",
    "verify_bundle",
]

LINKER_LEVEL = "linker"
"""The level every linker clause belongs to; a linker section claims it, declared."""
SUITE = "linker"
"""The section option ``suite`` that marks a linker section (its checks are the linker suite's)."""
PROFILE = "standard"
"""The linker suite has one profile; the bundle records it as the backend suite's standard."""


@dataclass(frozen=True)
class CheckResult:
    """One row of the report."""

    check: str
    clause: str
    status: str
    detail: str = ""
    counted: bool = True
    seconds: float = 0.0


@dataclass
class LinkerReport:
    """What a run found: the linker, the release it targeted, how it was driven, and a row per check."""

    linker: str
    release: str
    mode: str
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    invocation: dict[str, Any] = field(default_factory=dict)
    """How the run was asked for: ``linker`` / ``factory`` (module:name), ``extra_config``, ``checks`` (None: all)."""

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == FAIL and r.counted]

    @property
    def ok(self) -> bool:
        return not self.failures

    def result(self, check: str) -> CheckResult:
        return next(r for r in self.results if r.check == check)

    def to_dict(self) -> dict[str, Any]:
        return {
            "linker": self.linker,
            "release": self.release,
            "mode": self.mode,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "results": [asdict(r) for r in self.results],
        }

    def replay_command(self, check: str) -> str:
        """The command that reruns ``check`` alone with this run's linker, release and settings."""
        return replay_command(self, check)

    def suite_report(self) -> Any:
        """This report as the backend suite's ``SuiteReport`` (JSON, JUnit XML, Markdown, bundle)."""
        return suite_report(self)

    def render(self) -> str:
        lines = [
            f"Linker suite: {self.linker}",
            f"Interface: SGLang {self.release}; driven {self.mode}"
            + (" (through the release's UnifiedCacheLinkerWrapper)" if self.mode == "wrapper" else ""),
        ]
        for r in self.results:
            note = "" if r.counted else " (not counted: another release)"
            detail = f": {r.detail}" if r.detail else ""
            lines.append(f"{r.status.upper():4} {r.clause:7} {r.check}{note}{detail}")
            if r.status == FAIL and r.counted:
                lines.append(f"     replay: {self.replay_command(r.check)}")
        counts = {s: sum(1 for r in self.results if r.status == s and r.counted) for s in (PASS, FAIL, SKIP)}
        lines.append(
            f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped in {self.seconds:.2f} s: "
            + ("conforms" if self.ok else "does not conform")
        )
        return "\n".join(lines)


def linker_clause_ids() -> tuple[str, ...]:
    """The live clauses of the linker level that a linker honours (role backend or both), in registry order."""
    return tuple(item.id for item in clauses() if item.level == LINKER_LEVEL and item.role in ("backend", "both"))


def linker_expectations() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a linker section of a bundle must hold: a verdict per linker clause, an outcome per linker check."""
    from hicache_contracts.linker.checks import CHECKS

    return linker_clause_ids(), tuple(check.name for check in CHECKS)


SUITES = {SUITE: linker_expectations}
"""The suites beside the backend suite whose sections a bundle may hold (``bundle.verify_bundle``'s ``suites``)."""


def verify_bundle(directory: str) -> list[str]:
    """Return every problem of the bundle in ``directory``, backend or linker sections alike (empty: certified)."""
    return bundle.verify_bundle(directory, SUITES)


def replay_command(report: LinkerReport, check: str) -> str:
    """Return the command that reruns ``check`` alone against the same linker, release and settings."""
    invocation = report.invocation
    parts = ["hicache-conform linker"]
    if invocation.get("linker"):
        parts.append(f"--linker {invocation['linker']}")
    if invocation.get("factory"):
        parts.append(f"--factory {invocation['factory']}")
    parts.append(f"--release {report.release}")
    if report.mode == "wrapper":
        parts.append(f"--sglang-version {report.release}")
    else:
        parts.append("--mode direct")
    extra = invocation.get("extra_config")
    if extra:  # secrets in it are redacted wherever a report is shown
        try:
            parts.append(f"--extra-config '{json.dumps(extra, sort_keys=True)}'")
        except (TypeError, ValueError):
            parts.append("--extra-config '<the same extra config>'")
    parts.append(f"--checks {check}")
    return " ".join(parts)


def _actionable(report: LinkerReport, row: CheckResult) -> str:
    lines = []
    rationale = lookup_clause(row.clause).rationale
    if rationale:
        lines.append(f"why it matters: {' '.join(rationale.split())}")
    lines.append(f"replay: {replay_command(report, row.check)}")
    return "\n".join(lines)


def _not_applicable(text: str) -> str:
    return text if text.startswith(NOT_APPLICABLE) else NOT_APPLICABLE + text


def _outcome(report: LinkerReport, name: str, rows: list[CheckResult]) -> CheckOutcome:
    """One check's outcome from its rows (a loadability check has a row per clause)."""
    clause_ids = tuple(dict.fromkeys(row.clause for row in rows))
    seconds = sum(row.seconds for row in rows)
    if all(row.status == SKIP and not holds_for(lookup_clause(row.clause), report.release) for row in rows):
        message = "; ".join(f"{row.clause} does not hold for SGLang {report.release}" for row in rows)
        return CheckOutcome(name, clause_ids, SKIP, None, _not_applicable(message), None, seconds)
    if not any(row.counted for row in rows):
        found = "; ".join(f"{row.clause} {row.status}{': ' + row.detail if row.detail else ''}" for row in rows)
        message = _not_applicable(f"another release's interface, shown and not counted ({found})")
        return CheckOutcome(name, clause_ids, SKIP, None, message, None, seconds)
    failed = [row for row in rows if row.status == FAIL]
    if failed:
        first = failed[0]
        message = "; ".join(row.detail for row in failed if row.detail) or "failed"
        return CheckOutcome(name, clause_ids, FAIL, first.clause, message, _actionable(report, first), seconds)
    skipped = [row for row in rows if row.status == SKIP]
    if skipped and len(skipped) == len(rows):
        return CheckOutcome(name, clause_ids, SKIP, None, "; ".join(row.detail for row in skipped), None, seconds)
    notes = "; ".join(row.detail for row in rows if row.detail) or None
    return CheckOutcome(name, clause_ids, PASS, None, notes, None, seconds)


def _verdict(report: LinkerReport, clause_id: str, rows: list[CheckResult]) -> ClauseVerdict:
    item = lookup_clause(clause_id)
    checks = tuple(dict.fromkeys(row.check for row in rows))
    counted = [row for row in rows if row.counted]
    if not holds_for(item, report.release):
        reason = _not_applicable(f"{clause_id} does not hold for SGLang {report.release}")
        return ClauseVerdict(clause_id, item.level, item.statement, SKIP, reason, (), checks)
    failed = [row for row in counted if row.status == FAIL]
    if failed:
        failures = tuple(Failure(row.check, row.detail, _actionable(report, row)) for row in failed)
        return ClauseVerdict(clause_id, item.level, item.statement, FAIL, None, failures, checks)
    if any(row.status == PASS for row in counted):
        return ClauseVerdict(clause_id, item.level, item.statement, PASS, None, (), checks)
    if counted:
        reason = "; ".join(row.detail for row in counted if row.detail) or "skipped"
    elif report.invocation.get("checks") is not None:
        reason = "not checked: its check was not selected (--checks)"
    else:
        reason = "not checked: no check of this run covers it (a run with --factory has no loadability verdict)"
    return ClauseVerdict(clause_id, item.level, item.statement, SKIP, reason, (), checks)


def suite_report(report: LinkerReport) -> SuiteReport:
    """Return ``report`` as the backend suite's ``SuiteReport``: one linker section, secrets of its config known."""
    by_check: dict[str, list[CheckResult]] = {}
    by_clause: dict[str, list[CheckResult]] = {}
    for row in report.results:
        by_check.setdefault(row.check, []).append(row)
        by_clause.setdefault(row.clause, []).append(row)
    verdicts = tuple(_verdict(report, clause_id, by_clause.get(clause_id, [])) for clause_id in linker_clause_ids())
    outcomes = tuple(_outcome(report, name, rows) for name, rows in by_check.items())
    level = LevelVerdict(LINKER_LEVEL, True, "declared", None, "the UnifiedCacheLinker interface and behaviour")
    invocation = report.invocation
    options: dict[str, Any] = {
        "suite": SUITE,
        "profile": PROFILE,
        "release": report.release,
        "mode": report.mode,
        "checks": list(invocation["checks"]) if invocation.get("checks") is not None else None,
        "extra_config": invocation.get("extra_config") or {},
    }
    if report.mode == "wrapper":
        options["sglang_release"] = report.release  # the release's own wrapper and PoolTransfer objects drove it
    notes = (
        f"linker suite: SGLang {report.release}'s interface, driven "
        + (
            "through the release's UnifiedCacheLinkerWrapper"
            if report.mode == "wrapper"
            else "directly (no release imported)"
        ),
    )
    section = ReportSection(
        f"linker {report.linker}",
        report.linker,
        (level,),
        verdicts,
        outcomes,
        options,
        notes,
        report.seconds,
    )
    secrets = secret_values(invocation.get("extra_config") or {})
    return SuiteReport((section,)).with_secrets(secrets)


def certify_refusal(report_mode: str, release: Optional[str], imported: Optional[str]) -> Optional[str]:
    """Why a run cannot be a certification run before it starts (None: it can)."""
    if imported is None or (release is not None and release != imported):
        target = release or "the target release"
        return (
            f"--certify: a linker certificate is made through the release's own wrapper and loader: add "
            f"--sglang-version {target} (the run holds for the release it imported)"
        )
    if report_mode == "direct":
        return "--certify: a linker certificate is made through the release's own wrapper: drop --mode direct"
    return None
