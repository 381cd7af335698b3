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
from typing import TYPE_CHECKING, Any, Optional

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

if TYPE_CHECKING:
    from hicache_contracts.linker.suite import CheckResult, LinkerReport

__all__ = ["LINKER_LEVEL", "SUITE", "linker_clause_ids", "replay_command", "suite_report"]

LINKER_LEVEL = "linker"
"""The level every linker clause belongs to; a linker section claims it, declared."""
SUITE = "linker"
"""The section option ``suite`` that marks a linker section (its checks are the linker suite's)."""
PROFILE = "standard"
"""The linker suite has one profile; the bundle records it as the backend suite's standard."""


def linker_clause_ids() -> tuple[str, ...]:
    """The live clauses of the linker level that a linker honours (role backend or both), in registry order."""
    return tuple(item.id for item in clauses() if item.level == LINKER_LEVEL and item.role in ("backend", "both"))


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
