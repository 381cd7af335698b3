"""The conformance report: one section per subject (a backend, the engine), each a verdict per clause.

    SuiteReport
     └── ReportSection        one backend (or, later, the engine side), with its options
          ├── LevelVerdict    per level: claimed or not, and why
          ├── ClauseVerdict   per clause: pass / fail / skip, the failures with counterexamples
          └── CheckOutcome    per check run: its status, time and failure

Sections merge (``SuiteReport.merged``), so other suites can add theirs to
the same report. Renderings: ``render_text`` (terminal), ``to_json``,
``to_junit_xml`` (one test case per clause) and ``to_markdown`` (a table fit
for a README). A report fails when any clause of any section fails.

Every rendering is redacted first (``redaction.redact``): URL passwords,
secret-named options and the secret values the report was told about
(``with_secrets``) never appear in any output. A run stopped by Ctrl-C gives
a partial report marked ``interrupted`` in every rendering.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from hicache_contracts.conformance.redaction import redact_value
from hicache_contracts.conformance.version import tool_version

__all__ = [
    "CheckOutcome",
    "ClauseVerdict",
    "FAIL",
    "Failure",
    "LevelVerdict",
    "PASS",
    "ReportSection",
    "SKIP",
    "STATUSES",
    "SuiteReport",
]

PASS = "pass"
"""Every check of the clause ran and found nothing wrong."""
FAIL = "fail"
"""A check found the clause broken."""
SKIP = "skip"
"""The clause was not checked (its level is not claimed, or no check could look); the reason says why."""
STATUSES = (PASS, FAIL, SKIP)


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
    """``pass``, ``fail`` or ``skip``."""
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
    """``pass``, ``fail`` or ``skip``."""
    reason: Optional[str] = None
    """Why it was skipped."""
    failures: tuple[Failure, ...] = ()
    """How it was found broken."""
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

    def root_causes(self) -> list[tuple[str, tuple[str, ...]]]:
        """Return the failing clauses other clauses' checks needed in their setup, each with the clauses left
        unchecked because of it; the one most depended on first."""
        status = {verdict.clause_id: verdict.status for verdict in self.clauses}
        order = [verdict.clause_id for verdict in self.clauses]
        dependents: dict[str, list[str]] = {}
        for outcome in self.checks:
            if outcome.needs is None or status.get(outcome.needs) != FAIL:
                continue
            waiting = dependents.setdefault(outcome.needs, [])
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
            "passed": not self.failed,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "options": self.options,
            "notes": list(self.notes),
            "levels": [item.to_dict() for item in self.levels],
            "clauses": [item.to_dict() for item in self.clauses],
            "checks": [item.to_dict() for item in self.checks],
        }


@dataclass(frozen=True)
class SuiteReport:
    """Every section of a run; fails when any section fails."""

    sections: tuple[ReportSection, ...] = ()
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before its end: the sections hold what ran until then."""
    secrets: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """Values no rendering may show (the extra config's passwords and tokens); see ``with_secrets``."""

    def merged(self, other: Union["SuiteReport", ReportSection]) -> "SuiteReport":
        """Return a report with ``other``'s sections (or ``other`` itself) added after these."""
        extra = other.sections if isinstance(other, SuiteReport) else (other,)
        interrupted = self.interrupted or (isinstance(other, SuiteReport) and other.interrupted)
        secrets = self.secrets + (other.secrets if isinstance(other, SuiteReport) else ())
        return SuiteReport(self.sections + tuple(extra), interrupted, tuple(dict.fromkeys(secrets)))

    def with_secrets(self, values: Iterable[str]) -> "SuiteReport":
        """Return this report told that ``values`` are secrets: no rendering will show them."""
        return dataclasses.replace(self, secrets=tuple(dict.fromkeys(self.secrets + tuple(values))))

    def marked_interrupted(self) -> "SuiteReport":
        """Return this report marked as the partial report of an interrupted run."""
        return dataclasses.replace(self, interrupted=True)

    def redacted(self) -> "SuiteReport":
        """Return a copy whose every text has its secrets replaced by ``***`` (what every rendering shows)."""
        return dataclasses.replace(self, sections=tuple(_redacted(section, self.secrets) for section in self.sections))

    @property
    def failed(self) -> bool:
        """Whether any clause of any section failed."""
        return any(section.failed for section in self.sections)

    @property
    def exit_code(self) -> int:
        """130 when the run was interrupted, else 1 when any clause failed, else 0."""
        if self.interrupted:
            return 130
        return 1 if self.failed else 0

    def counts(self) -> dict[str, int]:
        total = {status: 0 for status in STATUSES}
        for section in self.sections:
            for status, number in section.counts().items():
                total[status] += number
        return total

    # ------------------------------------------------------------ renderings
    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain data (redacted)."""
        report = self.redacted()
        return {
            "tool": "hicache-conform",
            "version": tool_version(),
            "passed": not self.failed and not self.interrupted,
            "interrupted": self.interrupted,
            "counts": self.counts(),
            "sections": [section.to_dict() for section in report.sections],
        }

    def to_json(self) -> str:
        """Return the report as JSON (indented, stable key order)."""
        return json.dumps(self.to_dict(), indent=2)

    def to_junit_xml(self) -> str:
        """Return the report as JUnit XML: a test suite per section, a test case per clause (redacted)."""
        counts = self.counts()
        report = self.redacted()
        root = ElementTree.Element(
            "testsuites",
            name="hicache-conform",
            tests=str(sum(counts.values())),
            failures=str(counts[FAIL]),
            skipped=str(counts[SKIP]),
            time=f"{sum(section.duration_s for section in self.sections):.3f}",
        )
        if self.interrupted:
            root.set("interrupted", "true")
            interrupted = ElementTree.SubElement(
                root, "testsuite", name="interrupted", tests="1", failures="0", skipped="0", errors="1", time="0.000"
            )
            case = ElementTree.SubElement(
                interrupted, "testcase", classname="hicache.run", name="interrupted", time="0.000"
            )
            ElementTree.SubElement(case, "error", message=_INTERRUPTED, type="KeyboardInterrupt")
        for section in report.sections:
            section_counts = section.counts()
            suite = ElementTree.SubElement(
                root,
                "testsuite",
                name=section.title,
                tests=str(len(section.clauses)),
                failures=str(section_counts[FAIL]),
                skipped=str(section_counts[SKIP]),
                errors="0",
                time=f"{section.duration_s:.3f}",
            )
            properties = ElementTree.SubElement(suite, "properties")
            for name, value in section.options.items():
                ElementTree.SubElement(properties, "property", name=str(name), value=str(value))
            durations = _clause_durations(section)
            for verdict in section.clauses:
                case = ElementTree.SubElement(
                    suite,
                    "testcase",
                    classname=f"hicache.{verdict.level}",
                    name=f"{verdict.clause_id}",
                    time=f"{durations.get(verdict.clause_id, 0.0):.3f}",
                )
                if verdict.status == FAIL:
                    first = verdict.failures[0] if verdict.failures else Failure("", "failed")
                    failure = ElementTree.SubElement(case, "failure", message=first.message, type=verdict.clause_id)
                    failure.text = _failure_text(verdict)
                elif verdict.status == SKIP:
                    ElementTree.SubElement(case, "skipped", message=verdict.reason or "not checked")
        ElementTree.indent(root)
        return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"

    def to_markdown(self) -> str:
        """Return the report as Markdown: per section a level summary and a clause table (redacted)."""
        lines: list[str] = [f"**{_INTERRUPTED.upper()}**", ""] if self.interrupted else []
        for section in self.redacted().sections:
            options = section.options
            lines += [f"## HiCache L3 conformance: `{section.subject}`", ""]
            facts = [f"hicache-conform {tool_version()}"]
            for name in ("profile", "seed", "page_size", "layout", "kind"):
                if options.get(name) is not None:
                    facts.append(f"{name.replace('_', ' ')} `{options[name]}`")
            counts = section.counts()
            lines += [
                " · ".join(facts),
                "",
                f"**{'FAILED' if section.failed else 'PASSED'}** — {counts[PASS]} passed, {counts[FAIL]} failed, "
                f"{counts[SKIP]} skipped",
                "",
            ]
            roots = section.root_cause_line()
            if roots is not None:
                lines += [f"**{_md(roots[0].upper() + roots[1:])}**", ""]
            lines += ["| level | claimed | result |", "|---|---|---|"]
            for level in section.levels:
                lines.append(f"| `{level.level}` | {_md(_claim_text(level))} | {_md(_level_result(section, level))} |")
            lines += ["", "| clause | level | result | statement |", "|---|---|---|---|"]
            for verdict in section.clauses:
                detail = verdict.statement
                if verdict.status == FAIL and verdict.failures:
                    detail += f" **Found:** {verdict.failures[0].message}"
                elif verdict.status == SKIP and verdict.reason:
                    detail += f" *({verdict.reason})*"
                lines.append(f"| {verdict.clause_id} | {verdict.level} | {_MARK[verdict.status]} | {_md(detail)} |")
            failing = [verdict for verdict in section.clauses if verdict.status == FAIL]
            if failing:
                lines += ["", "### Counterexamples", ""]
                for verdict in failing:
                    for item in verdict.failures:
                        lines += [f"- **{verdict.clause_id}** (`{item.check}`): {_md(item.message)}"]
                        if item.counterexample:
                            lines += ["", "  ```", *("  " + row for row in item.counterexample.splitlines()), "  ```"]
            lines.append("")
        return "\n".join(lines)

    def render_text(self, *, color: Optional[bool] = None, width: int = 100) -> str:
        """Return the terminal report: per section its levels, then a table per level and clause (redacted)."""
        paint = _Painter(_use_color() if color is None else color)
        out: list[str] = []
        for section in self.redacted().sections:
            out.append(paint.bold(f"── {section.title} " + "─" * max(0, width - len(section.title) - 4)))
            options = section.options
            facts = [
                f"{name} {options[name]}"
                for name in ("profile", "seed", "page_size", "layout", "kind")
                if options.get(name) is not None
            ]
            if facts:
                out.append("   " + " · ".join(facts))
            for note in section.notes:
                out.append("   " + paint.dim(note))
            roots = section.root_cause_line()
            if roots is not None:
                out.append("   " + paint.red(paint.bold(roots)))
            for level in section.levels:
                verdicts = section.level_clauses(level.level)
                header = f"{level.level:<12} {paint.dim(_claim_text(level))}"
                if not level.claimed:
                    out.append(f"\n {paint.yellow('–')} {header}")
                    continue
                out.append(f"\n {_level_mark(verdicts, paint)} {paint.bold(header)}")
                for verdict in verdicts:
                    out.extend(_clause_lines(verdict, paint, width))
            counts = section.counts()
            summary = (
                f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped in {section.duration_s:.1f} s"
            )
            out.append("")
            out.append(paint.red(f"FAILED: {summary}") if section.failed else paint.green(f"PASSED: {summary}"))
            out.append("")
        if len(self.sections) > 1:
            totals = {status: sum(section.counts()[status] for section in self.sections) for status in STATUSES}
            overall = (
                f"overall, {len(self.sections)} sections: {totals[PASS]} passed, {totals[FAIL]} failed, "
                f"{totals[SKIP]} skipped"
            )
            out.append(paint.red(f"FAILED {overall}") if self.failed else paint.green(f"PASSED {overall}"))
        if self.interrupted:
            out.append(paint.red(paint.bold(_INTERRUPTED.upper())))
        return "\n".join(out)


# ---------------------------------------------------------------- helpers
_MARK = {PASS: "✅ pass", FAIL: "❌ **fail**", SKIP: "➖ skip"}
_INTERRUPTED = "interrupted: the run was stopped before its end; this report holds only what ran until then"


def _redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    """Return ``value`` (a report dataclass, or plain data) with every text redacted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {item.name: _redacted(getattr(value, item.name), secrets) for item in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_redacted(item, secrets) for item in value)
    return redact_value(value, secrets)


def _level_mark(verdicts: tuple[ClauseVerdict, ...], paint: "_Painter") -> str:
    """Return a claimed level's mark: ✗ when a clause failed, – when none was checked, ✓ otherwise."""
    if any(verdict.status == FAIL for verdict in verdicts):
        return paint.red("✗")
    if verdicts and all(verdict.status == SKIP for verdict in verdicts):
        return paint.yellow("–")
    return paint.green("✓")


def _md(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _claim_text(level: LevelVerdict) -> str:
    if level.claimed:
        return level.source + (f" ({level.reason})" if level.reason else "")
    return f"not claimed: {level.reason}" if level.reason else "not claimed"


def _level_result(section: ReportSection, level: LevelVerdict) -> str:
    verdicts = section.level_clauses(level.level)
    if not level.claimed:
        return "skipped"
    passed = sum(verdict.status == PASS for verdict in verdicts)
    failed = sum(verdict.status == FAIL for verdict in verdicts)
    skipped = sum(verdict.status == SKIP for verdict in verdicts)
    parts = [f"{passed}/{len(verdicts)} pass"]
    if failed:
        parts.append(f"{failed} fail")
    if skipped:
        parts.append(f"{skipped} skipped")
    return ", ".join(parts)


def _failure_text(verdict: ClauseVerdict) -> str:
    parts = [verdict.statement, ""]
    for item in verdict.failures:
        parts.append(f"{item.check}: {item.message}")
        if item.counterexample:
            parts.append(f"counterexample:\n{item.counterexample}")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def _clause_durations(section: ReportSection) -> dict[str, float]:
    totals: dict[str, float] = {}
    for outcome in section.checks:
        for clause_id in outcome.clauses:
            totals[clause_id] = totals.get(clause_id, 0.0) + outcome.duration_s
    return totals


def _clause_lines(verdict: ClauseVerdict, paint: "_Painter", width: int) -> Iterable[str]:
    label = {PASS: paint.green("pass"), FAIL: paint.red("FAIL"), SKIP: paint.yellow("skip")}[verdict.status]
    room = max(20, width - 18)
    if verdict.status == PASS:
        statement = verdict.statement if len(verdict.statement) <= room else verdict.statement[: room - 1] + "…"
        yield f"   {verdict.clause_id:<7} {label}  {paint.dim(statement)}"
        return
    if verdict.status == SKIP:
        yield f"   {verdict.clause_id:<7} {label}  {paint.dim(verdict.reason or 'not checked')}"
        return
    yield (
        f"   {verdict.clause_id:<7} {label}  "
        + textwrap.fill(verdict.statement, room, subsequent_indent=" " * 17).lstrip()
    )
    for item in verdict.failures:
        yield (
            "                 "
            + paint.red("✗ ")
            + textwrap.fill(f"{item.message}  [{item.check}]", room - 2, subsequent_indent=" " * 19).lstrip()
        )
        if item.counterexample:
            yield "                   " + paint.bold("counterexample:")
            for row in item.counterexample.splitlines():
                yield "                     " + row


def _use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


class _Painter:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)
