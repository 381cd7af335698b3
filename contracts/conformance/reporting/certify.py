"""Certification runs and baselines of known failures: what ``--certify`` and ``--known-failures`` add to a run.

``--certify DIR`` is the shape of a Kubernetes conformance submission: a
run that may stand as a backend's certificate, and a folder holding what it
found. A run is certified when

- the backend declared its levels (``--levels`` or ``hicache_levels``), so
  the certificate says what is claimed, not what probing guessed;
- it ran every check at a profile other than ``smoke`` (no ``--check``
  selection, no known failures);
- no clause failed, and no clause of a claimed level was skipped, except
  where it does not apply to the backend's mode (reason ``not applicable:``).

The folder gets ``report.json``, ``junit.xml``, ``report.md`` and
``submission.json`` (the backend, its declared levels and what each level
got, the SGLang release whose objects it received, the seed, the profile,
the versions of the tool, Python and torch, and why the run is or is not
certified).

``--known-failures FILE`` names clauses a vendor has not fixed yet, one per
line (``BE-5  our store retries forever; ticket 12``; ``#`` starts a
comment), as s3-tests tags the tests a gateway is known to fail: they are
still reported, but their failure does not fail the run; one that now passes
is reported so that the line can go.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from hicache_spec import clause as lookup_clause
from hicache_contracts.conformance.reporting.report import FAIL, SKIP, SuiteReport
from hicache_contracts.conformance.reporting.version import tool_version

__all__ = [
    "NOT_APPLICABLE",
    "Baseline",
    "certification_problems",
    "parse_known_failures",
    "write_bundle",
]

NOT_APPLICABLE = "not applicable: "
"""The start of a skip reason for a clause that does not apply to the backend's mode; certification accepts it."""


@dataclass(frozen=True)
class Baseline:
    """How a report reads against a list of known failures."""

    known: tuple[str, ...]
    """The clauses the list names."""
    still_failing: tuple[str, ...]
    """Known failures that failed again (reported, not fatal)."""
    now_passing: tuple[str, ...]
    """Known failures that passed: the list's line can go."""
    unexpected: tuple[str, ...]
    """Failures the list does not name: these fail the run."""

    @property
    def exit_code(self) -> int:
        """1 when a failure is not on the list, else 0."""
        return 1 if self.unexpected else 0

    def lines(self) -> list[str]:
        """What the terminal shows under the report."""
        out = []
        if self.still_failing:
            out.append(f"known failures (reported, not fatal): {', '.join(self.still_failing)}")
        if self.now_passing:
            out.append(
                f"known failures that now pass (remove them from --known-failures): {', '.join(self.now_passing)}"
            )
        if self.unexpected:
            out.append(f"failures not on --known-failures (fatal): {', '.join(self.unexpected)}")
        return out


def parse_known_failures(text: str, *, source: str = "--known-failures") -> tuple[str, ...]:
    """Return the clause IDs a known-failures file names; raise ValueError naming the line of an unknown ID."""
    found: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        clause_id = line.split()[0]
        try:
            lookup_clause(clause_id)
        except (KeyError, ValueError):
            raise ValueError(f"{source}: line {number} must start with a clause ID (got {clause_id!r})") from None
        found.append(clause_id)
    return tuple(dict.fromkeys(found))


def compare_with_baseline(report: SuiteReport, known: Iterable[str]) -> Baseline:
    """Return how ``report``'s failures read against the ``known`` clause IDs."""
    known = tuple(known)
    failed = {verdict.clause_id for section in report.sections for verdict in section.clauses if verdict.status == FAIL}
    checked = {
        verdict.clause_id for section in report.sections for verdict in section.clauses if verdict.status != SKIP
    }
    return Baseline(
        known=known,
        still_failing=tuple(clause_id for clause_id in known if clause_id in failed),
        now_passing=tuple(clause_id for clause_id in known if clause_id in checked and clause_id not in failed),
        unexpected=tuple(sorted(failed - set(known), key=_clause_order)),
    )


def _clause_order(clause_id: str) -> tuple[str, int]:
    family, _, number = clause_id.partition("-")
    return family, int(number) if number.isdigit() else 0


def certification_problems(
    report: SuiteReport, *, profile: str, checks: Optional[tuple[str, ...]], known_failures: tuple[str, ...]
) -> list[str]:
    """Return why ``report`` cannot stand as a certificate (empty: it can)."""
    problems = []
    if profile == "smoke":
        problems.append("the smoke profile is for CI; certify with --profile standard or exhaustive")
    if checks:
        problems.append(f"only some checks ran (--check {', '.join(checks)}); certify runs every check")
    if known_failures:
        problems.append("--known-failures excuses failures; a certificate has none")
    if report.interrupted:
        problems.append("the run was interrupted")
    for section in report.sections:
        if section.title.startswith("reference controller"):
            continue
        probed = [level.level for level in section.levels if level.claimed and level.source == "probed"]
        if probed:
            problems.append(
                f"{section.title}: levels {', '.join(probed)} were probed, not declared; declare the "
                "levels to certify with --levels or hicache_levels"
            )
        for verdict in section.clauses:
            if verdict.status == FAIL:
                problems.append(f"{section.title}: {verdict.clause_id} failed")
            elif (
                verdict.status == SKIP
                and _claimed(section, verdict.level)
                and not (verdict.reason or "").startswith(NOT_APPLICABLE)
            ):
                problems.append(f"{section.title}: {verdict.clause_id} was skipped ({verdict.reason})")
    return problems


def _claimed(section: Any, level: str) -> bool:
    return any(item.level == level and item.claimed for item in section.levels)


def submission(report: SuiteReport, problems: list[str]) -> dict[str, Any]:
    """Return the ``submission.json`` document of a certification run."""
    import torch

    sections = []
    for section in report.sections:
        options = section.options
        sections.append(
            {
                "title": section.title,
                "subject": section.subject,
                "passed": not section.failed,
                "declared_levels": [
                    level.level for level in section.levels if level.claimed and level.source != "probed"
                ],
                "levels": {
                    level.level: {
                        "claimed": level.claimed,
                        "source": level.source,
                        "clauses": _level_counts(section, level.level),
                    }
                    for level in section.levels
                },
                "sglang": options.get("sglang_release")
                or options.get("sglang_version")
                or options.get("sglang_objects"),
                "seed": options.get("seed"),
                "profile": options.get("profile"),
                "page_size": options.get("page_size"),
                "layout": options.get("layout"),
                "kind": options.get("kind"),
            }
        )
    return {
        "kind": "hicache-l3-conformance-submission",
        "certified": not problems,
        "problems": problems,
        "versions": {
            "hicache-conform": tool_version(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "platform": platform.platform(),
        },
        "sections": sections,
    }


def _level_counts(section: Any, level: str) -> dict[str, Any]:
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for verdict in section.level_clauses(level):
        counts[verdict.status] += 1
    return counts


def write_bundle(report: SuiteReport, directory: str, problems: list[str]) -> list[Path]:
    """Write the certification bundle into ``directory`` (made if missing); return the files written."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "report.json": report.to_json(),
        "junit.xml": report.to_junit_xml(),
        "report.md": report.to_markdown(),
        "submission.json": json.dumps(submission(report.redacted(), problems), indent=2),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
        written.append(path)
    return written
