"""The report's renderings: terminal text, JSON, JUnit XML and Markdown, and merged sections.

Scenario: a run against a backend with a planted BE-14 bug (v1 results as a
bare bool), limited to the BE-14 check.
Expected: every rendering names the clause, its verdict and the
counterexample; skipped clauses carry their reason; merging adds sections.
Why it matters: vendors and CI read these files, not the suite's internals.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest

from hicache_contracts.conformance import ReportSection, SuiteReport, level_clause_ids
from hicache_spec import clause
from tests.conformance.helpers import checks_for, run
from tests.conformance.planted_backends import ScalarV1Result


@pytest.fixture(scope="module")
def report() -> SuiteReport:
    return run(ScalarV1Result, checks=checks_for(("BE-14",)))


@pytest.mark.clause("BE-14")
def test_json_holds_every_clause_with_its_verdict(report: SuiteReport) -> None:
    data = json.loads(report.to_json())
    assert data["tool"] == "hicache-conform" and data["passed"] is False
    section = data["sections"][0]
    clauses = {item["id"]: item for item in section["clauses"]}
    assert clauses["BE-14"]["status"] == "fail"
    assert clauses["BE-14"]["failures"][0]["message"] == "batch_set_v1 returned a bool, not a list"
    assert clauses["BE-14"]["failures"][0]["counterexample"].startswith("batch_set_v1([], <0 host slots>) -> ")
    assert clauses["BE-2"]["status"] == "skip"
    assert clauses["BE-2"]["reason"] == "not run in this selection of checks"
    assert section["options"]["seed"] == 0 and section["options"]["profile"] == "smoke"


@pytest.mark.clause("BE-14")
def test_junit_has_a_test_case_per_clause(report: SuiteReport) -> None:
    root = ElementTree.fromstring(report.to_junit_xml().split("\n", 1)[1])
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert root.get("failures") == "1"
    failure, skipped = cases["BE-14"].find("failure"), cases["BE-2"].find("skipped")
    assert failure is not None and failure.text is not None and skipped is not None
    assert failure.get("type") == "BE-14"
    assert "counterexample:" in failure.text
    assert skipped.get("message") == "not run in this selection of checks"
    assert cases["BE-14"].get("classname") == "hicache.v1"


@pytest.mark.clause("BE-14")
def test_markdown_is_a_table_per_section(report: SuiteReport) -> None:
    text = report.to_markdown()
    assert "## HiCache L3 conformance: `tests.conformance.planted_backends:ScalarV1Result`" in text
    statement = clause("BE-14").statement
    assert f"| BE-14 | v1 | ❌ **fail** | {statement} **Found:** batch_set_v1 returned a bool, not a list |" in text
    assert "### Counterexamples" in text
    assert "| `v1` | declared | 0/4 pass, 1 fail, 3 skipped |" in text  # skipped clauses are counted
    core = len(level_clause_ids("core"))
    assert f"| `core` | required | 0/{core} pass, {core} skipped |" in text
    assert "Root causes" not in text  # no check's setup needed the failing clause


@pytest.mark.clause("BE-14")
def test_terminal_text_shows_statement_finding_and_counterexample(report: SuiteReport) -> None:
    text = report.render_text(color=False)
    assert f"BE-14   FAIL  {clause('BE-14').statement[:40]}" in text
    assert "✗ batch_set_v1 returned a bool, not a list  [v1_results_have_one_bool_per_key]" in text
    assert "counterexample:" in text
    assert text.rstrip().splitlines()[-1].startswith("FAILED: ")
    assert "\033[" not in text
    assert "\n ✗ v1" in text  # a level with a failed clause
    assert "\n – core" in text  # a claimed level none of whose clauses was checked is not a pass


@pytest.mark.clause("BE-14")
def test_sections_merge_and_any_failure_fails_the_report(report: SuiteReport) -> None:
    passing = ReportSection("engine", "controller", (), ())
    merged = SuiteReport((passing,)).merged(report)
    assert [section.title for section in merged.sections] == ["engine", report.sections[0].title]
    assert SuiteReport((passing,)).exit_code == 0
    assert merged.exit_code == 1 and merged.merged(passing).failed
    assert merged.render_text(color=False).rstrip().splitlines()[-1].startswith("FAILED overall, 2 sections: ")
    assert "overall" not in report.render_text(color=False)  # one section needs no total
