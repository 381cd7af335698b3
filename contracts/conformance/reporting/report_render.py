"""Renderings of a conformance report's sections: JUnit XML, Markdown and terminal text.

``SuiteReport.to_junit_xml``, ``to_markdown`` and ``render_text`` call these with the redacted sections.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Iterable, Optional

from hicache_contracts.verdicts import (
    ERROR,
    FAIL,
    PASS,
    SKIP,
    STATUSES,
    ClauseVerdict,
    LevelVerdict,
    ReportSection,
)
from hicache_contracts.conformance.reporting.version import tool_version
from hicache_contracts.report_writers import (
    JUnitCase,
    JUnitOutcome,
    JUnitSuite,
    junit_document,
    markdown_cell,
    markdown_row,
)


def status_counts(sections: Iterable[ReportSection]) -> dict[str, int]:
    """Return the number of clause verdicts per status over ``sections``."""
    total = {status: 0 for status in STATUSES}
    for section in sections:
        for status, number in section.counts().items():
            total[status] += number
    return total


def junit_xml(sections: tuple[ReportSection, ...], *, interrupted: bool) -> str:
    """Return redacted ``sections`` as JUnit XML: a test suite per section, a test case per clause."""
    counts = status_counts(sections)
    attributes = [
        ("name", "hicache-conform"),
        ("tests", str(sum(counts.values()))),
        ("failures", str(counts[FAIL])),
        ("skipped", str(counts[SKIP])),
        ("errors", str(counts[ERROR])),
        ("time", f"{sum(section.duration_s for section in sections):.3f}"),
    ]
    suites = []
    if interrupted:
        attributes.append(("interrupted", "true"))
        stopped = JUnitCase(
            "hicache.run", "interrupted", "0.000", JUnitOutcome("error", _INTERRUPTED, "KeyboardInterrupt")
        )
        suites.append(JUnitSuite(_suite_attributes("interrupted", 1, 0, 0, 1, 0.0), (stopped,)))
    for section in sections:
        section_counts = section.counts()
        durations = _clause_durations(section)
        cases = tuple(
            JUnitCase(
                f"hicache.{verdict.level}",
                verdict.clause_id,
                f"{durations.get(verdict.clause_id, 0.0):.3f}",
                _junit_outcome(verdict),
            )
            for verdict in section.clauses
        )
        counted = _suite_attributes(
            section.title,
            len(section.clauses),
            section_counts[FAIL],
            section_counts[SKIP],
            section_counts[ERROR],
            section.duration_s,
        )
        options = tuple((str(name), str(value)) for name, value in section.options.items())
        suites.append(JUnitSuite(counted, cases, options))
    return junit_document(attributes, suites)


def _suite_attributes(
    name: str, tests: int, failures: int, skipped: int, errors: int, duration_s: float
) -> tuple[tuple[str, str], ...]:
    return (
        ("name", name),
        ("tests", str(tests)),
        ("failures", str(failures)),
        ("skipped", str(skipped)),
        ("errors", str(errors)),
        ("time", f"{duration_s:.3f}"),
    )


def _junit_outcome(verdict: ClauseVerdict) -> Optional[JUnitOutcome]:
    if verdict.status == FAIL:
        message = verdict.failures[0].message if verdict.failures else "failed"
        return JUnitOutcome("failure", message, verdict.clause_id, _failure_text(verdict))
    if verdict.status == SKIP:
        return JUnitOutcome("skipped", verdict.reason or "not checked")
    if verdict.status == ERROR:
        return JUnitOutcome("error", verdict.reason or NOT_JUDGED, "suite", _failure_text(verdict))
    return None


def markdown(sections: tuple[ReportSection, ...], *, interrupted: bool) -> str:
    """Return redacted ``sections`` as Markdown: per section a level summary and a clause table."""
    lines: list[str] = [f"**{_INTERRUPTED.upper()}**", ""] if interrupted else []
    for section in sections:
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
            f"**{_outcome_word(section)}** — {_count_text(counts)}",
            "",
        ]
        roots = section.root_cause_line()
        if roots is not None:
            lines += [f"**{markdown_cell(roots[0].upper() + roots[1:])}**", ""]
        lines += [markdown_row("level", "claimed", "result"), "|---|---|---|"]
        for level in section.levels:
            lines.append(
                markdown_row(
                    f"`{level.level}`", markdown_cell(_claim_text(level)), markdown_cell(_level_result(section, level))
                )
            )
        lines += ["", markdown_row("clause", "level", "result", "statement"), "|---|---|---|---|"]
        for verdict in section.clauses:
            detail = verdict.statement
            if verdict.status == FAIL and verdict.failures:
                detail += f" **Found:** {verdict.failures[0].message}"
            elif verdict.status in (SKIP, ERROR) and verdict.reason:
                detail += f" *({verdict.reason})*"
            lines.append(markdown_row(verdict.clause_id, verdict.level, _MARK[verdict.status], markdown_cell(detail)))
        failing = [verdict for verdict in section.clauses if verdict.status in (FAIL, ERROR)]
        if failing:
            lines += ["", "### Counterexamples", ""]
            for verdict in failing:
                for item in verdict.failures:
                    error = " (error of the suite, no verdict on the backend)" if verdict.status == ERROR else ""
                    lines += [f"- **{verdict.clause_id}**{error} (`{item.check}`): {markdown_cell(item.message)}"]
                    if _shown(item.counterexample):
                        lines += [
                            "",
                            "  ```",
                            *("  " + row for row in (item.counterexample or "").splitlines()),
                            "  ```",
                        ]
        lines.append("")
    return "\n".join(lines)


def text(
    sections: tuple[ReportSection, ...], *, interrupted: bool, color: Optional[bool] = None, width: int = 100
) -> str:
    """Return redacted ``sections`` as the terminal report: per section its levels, then a table per level and clause."""
    paint = _Painter(_use_color() if color is None else color)
    out: list[str] = []
    for section in sections:
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
        summary = f"{_count_text(section.counts())} in {section.duration_s:.1f} s"
        out.append("")
        word = _outcome_word(section)
        out.append(paint.green(f"{word}: {summary}") if word == "PASSED" else paint.red(f"{word}: {summary}"))
        out.append("")
    if len(sections) > 1:
        totals = status_counts(sections)
        overall = f"overall, {len(sections)} sections: {_count_text(totals)}"
        if any(section.failed for section in sections):
            out.append(paint.red(f"FAILED {overall}"))
        elif any(section.errored for section in sections):
            out.append(paint.red(f"ERROR {overall}"))
        else:
            out.append(paint.green(f"PASSED {overall}"))
    if interrupted:
        out.append(paint.red(paint.bold(_INTERRUPTED.upper())))
    return "\n".join(out)


_MARK = {PASS: "✅ pass", FAIL: "❌ **fail**", SKIP: "➖ skip", ERROR: "⚠️ **error**"}
NOT_JUDGED = "not judged: the suite itself broke"
"""What an error verdict says when it has no reason of its own."""


def _count_text(counts: dict[str, int]) -> str:
    """``3 passed, 1 failed, 2 skipped`` (and ``, 1 error of the suite`` when there is one)."""
    text = f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped"
    if counts.get(ERROR):
        text += f", {counts[ERROR]} error{'s' if counts[ERROR] != 1 else ''} of the suite (not judged)"
    return text


def _outcome_word(section: ReportSection) -> str:
    """FAILED when a clause failed, ERROR when none did but the suite broke judging one, else PASSED."""
    if section.failed:
        return "FAILED"
    return "ERROR" if section.errored else "PASSED"


_INTERRUPTED = "interrupted: the run was stopped before its end; this report holds only what ran until then"


def _level_mark(verdicts: tuple[ClauseVerdict, ...], paint: _Painter) -> str:
    """Return a claimed level's mark: ✗ when a clause failed, ! when the suite broke judging one, – when none was
    checked, ✓ otherwise."""
    if any(verdict.status == FAIL for verdict in verdicts):
        return paint.red("✗")
    if any(verdict.status == ERROR for verdict in verdicts):
        return paint.red("!")
    if verdicts and all(verdict.status == SKIP for verdict in verdicts):
        return paint.yellow("–")
    return paint.green("✓")


def _shown(counterexample: Optional[str]) -> bool:
    """Whether a counterexample has anything to show (a blank one gets no block)."""
    return bool(counterexample and counterexample.strip())


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
    errors = sum(verdict.status == ERROR for verdict in verdicts)
    parts = [f"{passed}/{len(verdicts)} pass"]
    if failed:
        parts.append(f"{failed} fail")
    if skipped:
        parts.append(f"{skipped} skipped")
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''} of the suite")
    return ", ".join(parts)


def _failure_text(verdict: ClauseVerdict) -> str:
    parts = [verdict.statement, ""]
    for item in verdict.failures:
        parts.append(f"{item.check}: {item.message}")
        if _shown(item.counterexample):
            parts.append(f"counterexample:\n{item.counterexample}")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def _clause_durations(section: ReportSection) -> dict[str, float]:
    totals: dict[str, float] = {}
    for outcome in section.checks:
        for clause_id in outcome.clauses:
            totals[clause_id] = totals.get(clause_id, 0.0) + outcome.duration_s
    return totals


def _clause_lines(verdict: ClauseVerdict, paint: _Painter, width: int) -> Iterable[str]:
    label = {PASS: paint.green("pass"), FAIL: paint.red("FAIL"), SKIP: paint.yellow("skip"), ERROR: paint.red("ERR ")}[
        verdict.status
    ]
    room = max(20, width - 18)
    if verdict.status == PASS:
        statement = verdict.statement if len(verdict.statement) <= room else verdict.statement[: room - 1] + "…"
        yield f"   {verdict.clause_id:<7} {label}  {paint.dim(statement)}"
        return
    if verdict.status == SKIP:
        yield f"   {verdict.clause_id:<7} {label}  {paint.dim(verdict.reason or 'not checked')}"
        return
    if verdict.status == ERROR:
        yield (
            f"   {verdict.clause_id:<7} {label}  "
            + textwrap.fill(verdict.reason or NOT_JUDGED, room, subsequent_indent=" " * 17).lstrip()
        )
        for item in verdict.failures:
            if _shown(item.counterexample):
                for row in (item.counterexample or "").splitlines():
                    yield "                     " + row
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
        if _shown(item.counterexample):
            yield "                   " + paint.bold("counterexample:")
            for row in (item.counterexample or "").splitlines():
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
