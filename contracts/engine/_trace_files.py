"""The trace checker's verdicts as files: JUnit XML and Markdown, one section per operation.

Written with the project's one set of file writers (``hicache_contracts.report_writers``),
as the backend suite's report is.

JUnit: a ``testsuite`` per operation, a ``testcase`` per clause the checker
had material for (``classname`` ``hicache.trace.<level>``), a ``failure``
per violated clause listing each violation with where it happened.
Markdown: per operation a table of clause, verdict, where and message.

A report judged for a pinned release (``sglang_version=V``) may hold recorded
divergences: findings that do not fail the verdict. JUnit shows each in its
clause's passing ``testcase`` as a ``divergence`` property and in
``system-out``; Markdown as a ``divergence`` row naming the entries and the
release, and the summary line counts them.
"""

from __future__ import annotations

from typing import Sequence

from hicache_spec import UnknownClauseError, clause
from hicache_contracts.engine._report import TraceReport, TraceViolation
from hicache_contracts.report_writers import (
    JUnitCase,
    JUnitOutcome,
    JUnitSuite,
    junit_document,
    markdown_cell,
    markdown_row,
)

__all__ = ["operation_name", "reports_to_junit_xml", "reports_to_markdown"]


def operation_name(report: TraceReport, number: int) -> str:
    """How the files name an operation: its ``operation_id``, else its position in the trace file."""
    return f"operation {report.operation_id if report.operation_id is not None else number}"


def _clauses_of(report: TraceReport) -> tuple[str, ...]:
    return tuple(dict.fromkeys(report.checked + report.violated + tuple(item.clause for item in report.divergences)))


def _diverging(report: TraceReport, clause_id: str) -> tuple[TraceViolation, ...]:
    return tuple(item for item in report.divergences if item.clause == clause_id)


def _recorded(item: TraceViolation) -> str:
    return f"recorded divergence {', '.join(item.divergence)} of SGLang {item.release}"


def _level(clause_id: str) -> str:
    try:
        return clause(clause_id).level
    except UnknownClauseError:
        return "unknown"


def reports_to_junit_xml(reports: Sequence[TraceReport], *, source: str = "trace") -> str:
    """Return the reports as JUnit XML: a test suite per operation, a test case per clause checked."""
    failures = sum(len(report.violated) for report in reports)
    tests = sum(len(_clauses_of(report)) for report in reports)
    suites = []
    for number, report in enumerate(reports):
        clause_ids = _clauses_of(report)
        attributes = (
            ("name", operation_name(report, number)),
            ("tests", str(len(clause_ids))),
            ("failures", str(len(report.violated))),
            ("errors", "0"),
            ("skipped", "0"),
        )
        suites.append(JUnitSuite(attributes, tuple(_junit_case(report, clause_id) for clause_id in clause_ids)))
    attributes = (
        ("name", f"hicache-conform trace {source}"),
        ("tests", str(tests)),
        ("failures", str(failures)),
        ("errors", "0"),
        ("skipped", "0"),
    )
    return junit_document(attributes, suites)


def _junit_case(report: TraceReport, clause_id: str) -> JUnitCase:
    """A clause's test case: its violations as one failure, its recorded divergences as properties and output."""
    found = report.for_clause(clause_id)
    outcome = None
    if found:
        statement = found[0].statement
        text = "\n".join(
            ([f"rule: {statement}"] if statement else []) + [f"{item.where}: {item.message}" for item in found]
        )
        outcome = JUnitOutcome("failure", f"{found[0].where}: {found[0].message}", clause_id, text)
    diverging = _diverging(report, clause_id)
    return JUnitCase(
        f"hicache.trace.{_level(clause_id)}",
        clause_id,
        outcome=outcome,
        properties=tuple(("divergence", _recorded(item)) for item in diverging),
        system_out="\n".join(
            f"{_recorded(item)} (not failing the verdict): {item.where}: {item.message}" for item in diverging
        )
        if diverging
        else None,
    )


def reports_to_markdown(reports: Sequence[TraceReport], *, source: str = "trace") -> str:
    """Return the reports as Markdown: a summary line, then per operation a clause table."""
    conforming = sum(report.ok for report in reports)
    verdict = "PASSED" if conforming == len(reports) else "FAILED"
    diverging = [item for report in reports for item in report.divergences]
    releases = ", ".join(dict.fromkeys(str(item.release) for item in diverging))
    recorded = (
        f" {len(diverging)} recorded divergence(s) of SGLang {releases}, not failing the verdict." if diverging else ""
    )
    lines = [
        f"# Engine trace `{markdown_cell(source)}`",
        "",
        f"**{verdict}**: {conforming} of {len(reports)} operation(s) conform.{recorded}",
        "",
    ]
    for number, report in enumerate(reports):
        lines += [
            f"## {operation_name(report, number)}",
            "",
            markdown_row("clause", "verdict", "where", "message"),
            "|---|---|---|---|",
        ]
        for clause_id in _clauses_of(report):
            found = report.for_clause(clause_id)
            diverging_here = _diverging(report, clause_id)
            if not found and not diverging_here:
                lines.append(markdown_row(clause_id, "pass", "", ""))
            for item in found:
                lines.append(markdown_row(clause_id, "**fail**", item.where, markdown_cell(item.message)))
            for item in diverging_here:
                lines.append(
                    markdown_row(
                        clause_id,
                        f"divergence: {markdown_cell(_recorded(item))}",
                        item.where,
                        markdown_cell(item.message),
                    )
                )
        lines.append("")
    return "\n".join(lines)
