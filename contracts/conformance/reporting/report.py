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
(``with_secrets``) never appear in any output. A clause the suite itself broke judging (an internal exception, a hypothesis
health-check or flakiness error) has status ``error``: counted and shown apart
from the failures, never a verdict on the backend (exit status 3 when nothing
failed). A run stopped by Ctrl-C gives
a partial report marked ``interrupted`` in every rendering. The parts live in ``hicache_contracts.verdicts``,
the renderings in ``report_render``; every name is importable from here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from hicache_contracts.conformance.reporting import report_render
from hicache_contracts.conformance.reporting.redaction import redact_value
from hicache_contracts.verdicts import (
    ERROR,
    FAIL,
    PASS,
    SKIP,
    STATUSES,
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
)
from hicache_contracts.conformance.reporting.version import tool_version

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
    "SuiteReport",
]


@dataclass(frozen=True)
class SuiteReport:
    """Every section of a run; fails when any section fails."""

    sections: tuple[ReportSection, ...] = ()
    interrupted: bool = False
    """The run was stopped (Ctrl-C) before its end: the sections hold what ran until then."""
    secrets: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """Values no rendering may show (the extra config's passwords and tokens); see ``with_secrets``."""

    def merged(self, other: Union[SuiteReport, ReportSection]) -> SuiteReport:
        """Return a report with ``other``'s sections (or ``other`` itself) added after these."""
        extra = other.sections if isinstance(other, SuiteReport) else (other,)
        interrupted = self.interrupted or (isinstance(other, SuiteReport) and other.interrupted)
        secrets = self.secrets + (other.secrets if isinstance(other, SuiteReport) else ())
        return SuiteReport(self.sections + tuple(extra), interrupted, tuple(dict.fromkeys(secrets)))

    def with_secrets(self, values: Iterable[str]) -> SuiteReport:
        """Return this report told that ``values`` are secrets: no rendering will show them."""
        return dataclasses.replace(self, secrets=tuple(dict.fromkeys(self.secrets + tuple(values))))

    def marked_interrupted(self) -> SuiteReport:
        """Return this report marked as the partial report of an interrupted run."""
        return dataclasses.replace(self, interrupted=True)

    def redacted(self) -> SuiteReport:
        """Return a copy whose every text has its secrets replaced by ``***`` (what every rendering shows)."""
        return dataclasses.replace(self, sections=tuple(_redacted(section, self.secrets) for section in self.sections))

    @property
    def failed(self) -> bool:
        """Whether any clause of any section failed."""
        return any(section.failed for section in self.sections)

    @property
    def errored(self) -> bool:
        """Whether the suite itself broke judging any clause of any section (status ``error``)."""
        return any(section.errored for section in self.sections)

    @property
    def exit_code(self) -> int:
        """130 when the run was interrupted, else 1 when any clause failed, else 3 when the suite itself broke
        judging a clause (no verdict on the backend, but no pass either), else 0."""
        if self.interrupted:
            return 130
        if self.failed:
            return 1
        return 3 if self.errored else 0

    def counts(self) -> dict[str, int]:
        """Return the number of clause verdicts per status over every section."""
        return report_render.status_counts(self.sections)

    # ------------------------------------------------------------ renderings
    def to_dict(self) -> dict[str, Any]:
        """Return the report as plain data (redacted)."""
        report = self.redacted()
        return {
            "tool": "hicache-conform",
            "version": tool_version(),
            "passed": not self.failed and not self.errored and not self.interrupted,
            "interrupted": self.interrupted,
            "counts": self.counts(),
            "sections": [section.to_dict() for section in report.sections],
        }

    def to_json(self) -> str:
        """Return the report as JSON (indented, stable key order)."""
        return json.dumps(self.to_dict(), indent=2)

    def to_junit_xml(self) -> str:
        """Return the report as JUnit XML: a test suite per section, a test case per clause (redacted)."""
        return report_render.junit_xml(self.redacted().sections, interrupted=self.interrupted)

    def to_markdown(self) -> str:
        """Return the report as Markdown: per section a level summary and a clause table (redacted)."""
        return report_render.markdown(self.redacted().sections, interrupted=self.interrupted)

    def render_text(self, *, color: Optional[bool] = None, width: int = 100) -> str:
        """Return the terminal report: per section its levels, then a table per level and clause (redacted)."""
        return report_render.text(self.redacted().sections, interrupted=self.interrupted, color=color, width=width)


def _redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    """Return ``value`` (a report dataclass, or plain data) with every text redacted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {item.name: _redacted(getattr(value, item.name), secrets) for item in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_redacted(item, secrets) for item in value)
    return redact_value(value, secrets)
