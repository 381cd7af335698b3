"""Certification: when a run may stand as a backend's certificate, and why not.

``--certify DIR`` is the shape of a Kubernetes conformance submission: a
run that may stand as a backend's certificate, and a folder holding what it
found (``bundle``). A run is certified only when

- the backend declared its levels (``--levels`` or ``hicache_levels``), so
  the certificate says what is claimed, not what probing guessed;
- it ran every check at a profile other than ``smoke`` (no ``--check``
  selection) and was not interrupted;
- no clause failed (an expected failure is still a failure: it is reported,
  never certified);
- every clause of every claimed level ran and passed, and every check of a
  claimed level ran: a skip, a clause a failing check did not reach, or a
  check that did not run refuses certification, each named. The only skips
  accepted are those that do not apply to the backend's mode: a reason that
  starts ``not applicable:``, or a clause the suite can observe only through
  a level the backend does not claim (``NOT_APPLICABLE_WITHOUT``: BE-7 is
  seen by holding a v1 write half done, so a legacy-only or v2-only backend,
  which SGLang never drives through v1, is not held to it), or a check the
  runner did not start because it needs a level the backend does not claim
  (``level v2 not claimed``: a legacy-only backend is never sent v2 calls).

Expected failures (``--known-failures``) are read by ``expected``.
"""

from __future__ import annotations

import re
from typing import Optional

from hicache_contracts.conformance.reporting.expected import (
    Baseline,
    ExpectedFailure,
    compare_with_baseline,
    parse_expected_failures,
)
from hicache_contracts.conformance.reporting.report import ERROR, FAIL, PASS, SKIP, ReportSection, SuiteReport

__all__ = [
    "Baseline",
    "NOT_APPLICABLE",
    "NOT_APPLICABLE_WITHOUT",
    "certification_problems",
    "compare_with_baseline",
    "not_applicable",
    "parse_expected_failures",
    "section_problems",
]

NOT_APPLICABLE = "not applicable: "
"""The start of a skip reason for a clause that does not apply to the backend's mode; certification accepts it."""

_NEEDS_LEVEL = re.compile(r"^level (\S+) not claimed$")
"""The runner's reason for a check it did not start because the check needs a level the backend does not claim."""

NOT_APPLICABLE_WITHOUT: dict[str, str] = {"BE-7": "v1"}
"""Clauses the suite observes only through a level's calls: clause → that level. Skipped where the level is not
claimed, they do not apply (SGLang never makes those calls to such a backend)."""


def not_applicable(section: ReportSection, clause_ids: tuple[str, ...], reason: Optional[str]) -> bool:
    """Whether a skip of ``clause_ids`` (a clause, or a check's clauses) for ``reason`` does not apply to the backend."""
    if (reason or "").startswith(NOT_APPLICABLE):
        return True
    claimed = {level.level for level in section.levels if level.claimed}
    needed = _NEEDS_LEVEL.match(reason or "")
    if needed and needed.group(1) not in claimed:  # the check needs a level SGLang never drives this backend in
        return True
    return bool(clause_ids) and all(
        clause_id in NOT_APPLICABLE_WITHOUT and NOT_APPLICABLE_WITHOUT[clause_id] not in claimed
        for clause_id in clause_ids
    )


def certification_problems(
    report: SuiteReport,
    *,
    profile: str,
    checks: Optional[tuple[str, ...]],
    expected: tuple[ExpectedFailure, ...] = (),
) -> list[str]:
    """Return why ``report`` cannot stand as a certificate, each problem named (empty: it can)."""
    problems = []
    if profile == "smoke":
        problems.append("the smoke profile is for CI; certify with --profile standard or exhaustive")
    if checks:
        problems.append(f"only some checks ran (--check {', '.join(checks)}); certify runs every check")
    if report.interrupted:
        problems.append("the run was interrupted")
    if not report.sections:
        problems.append("the report has no section: nothing was checked")
    excused = {entry.target: entry for entry in expected}
    for section in report.sections:
        if section.title.startswith("reference controller"):
            continue
        problems += section_problems(section, excused)
    return list(dict.fromkeys(problems))


def section_problems(section: ReportSection, excused: Optional[dict[str, ExpectedFailure]] = None) -> list[str]:
    """Return why one backend section cannot be certified: probed levels, failures, skips, checks not run."""
    excused = excused or {}
    problems = []
    title = section.title
    probed = [level.level for level in section.levels if level.claimed and level.source == "probed"]
    if probed:
        problems.append(
            f"{title}: levels {', '.join(probed)} were probed, not declared; declare the "
            "levels to certify with --levels or hicache_levels"
        )
    claimed = {level.level for level in section.levels if level.claimed}
    if not claimed:
        problems.append(f"{title}: no level is claimed")
    for verdict in section.clauses:
        if verdict.status == FAIL:
            checks = ", ".join(dict.fromkeys(failure.check for failure in verdict.failures)) or "the run"
            entry = excused.get(verdict.clause_id)
            known = f"; an expected failure ({entry.reason}, {entry.link}) is still a failure" if entry else ""
            problems.append(f"{title}: {verdict.clause_id} failed ({checks}){known}")
        elif verdict.status == ERROR:
            problems.append(
                f"{title}: {verdict.clause_id} was not judged: the suite broke ({verdict.reason or 'see the report'})"
            )
        elif (
            verdict.status == SKIP
            and verdict.level in claimed
            and not not_applicable(section, (verdict.clause_id,), verdict.reason)
        ):
            reason = verdict.reason or "no reason given"
            what = "was not reached" if "not reached" in reason or "its setup needs" in reason else "was skipped"
            problems.append(f"{title}: {verdict.clause_id} (level {verdict.level}) {what}: {reason}")
    if claimed and not any(verdict.status == PASS and verdict.level in claimed for verdict in section.clauses):
        problems.append(f"{title}: no clause of a claimed level passed: nothing was certified to hold")
    levels = {verdict.clause_id: verdict.level for verdict in section.clauses}
    for outcome in section.checks:
        if outcome.status not in (SKIP, ERROR) or not any(levels.get(c) in claimed for c in outcome.clauses):
            continue
        if outcome.status == ERROR:
            problems.append(f"{title}: check {outcome.check} ({', '.join(outcome.clauses)}) broke: {outcome.message}")
            continue
        if not_applicable(section, outcome.clauses, outcome.message):
            continue
        problems.append(
            f"{title}: check {outcome.check} ({', '.join(outcome.clauses)}) did not run: "
            f"{outcome.message or 'no reason given'}"
        )
    return problems
