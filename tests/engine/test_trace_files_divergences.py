"""The JUnit and Markdown trace files show the divergences recorded for the release judged.

Scenario: a backup whose prefix was grown in place (SGLang 0.5.20's ``+=``),
judged as 0.5.20, where the registry records the PFX-5 finding as DIV-3; the
same trace judged without a release.
Expected: JUnit keeps PFX-5 a passing test case (no failure) that carries a
``divergence`` property and a ``system-out`` line naming DIV-3, the release,
where and the message; Markdown gives PFX-5 a divergence row naming the same
instead of a plain pass, and its summary counts the divergence. Unjudged, the
files show a failure and no divergence.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest

from hicache_contracts.engine import check_operation
from hicache_contracts.engine._trace_files import reports_to_junit_xml, reports_to_markdown
from tests.engine.test_checker_releases import _in_place_prefix_trace


def _judged():
    report = check_operation(_in_place_prefix_trace(), sglang_version="0.5.20")
    assert report.ok and [item.divergence for item in report.divergences] == [("DIV-3",)]
    return report


def _case(document: str, name: str):
    (case,) = [case for case in ElementTree.fromstring(document).iter("testcase") if case.get("name") == name]
    return case


@pytest.mark.clause("PFX-5")
def test_junit_shows_a_recorded_divergence_on_its_passing_test_case():
    report = _judged()
    (finding,) = report.divergences
    document = reports_to_junit_xml([report])
    root = ElementTree.fromstring(document)
    assert root.get("failures") == "0"
    case = _case(document, "PFX-5")
    assert case.find("failure") is None
    values = [item.get("value") for item in case.iter("property") if item.get("name") == "divergence"]
    assert values == ["recorded divergence DIV-3 of SGLang 0.5.20"]
    out = case.findtext("system-out")
    assert out == (
        f"recorded divergence DIV-3 of SGLang 0.5.20 (not failing the verdict): {finding.where}: {finding.message}"
    )
    # Unjudged, the same finding is a failure and nothing is called a divergence.
    plain = reports_to_junit_xml([check_operation(_in_place_prefix_trace())])
    assert _case(plain, "PFX-5").find("failure") is not None and "divergence" not in plain


@pytest.mark.clause("PFX-5")
def test_markdown_shows_a_recorded_divergence_row_and_counts_it():
    report = _judged()
    (finding,) = report.divergences
    text = reports_to_markdown([report])
    assert "**PASSED**: 1 of 1 operation(s) conform. 1 recorded divergence(s) of SGLang 0.5.20" in text
    row = f"| PFX-5 | divergence: recorded divergence DIV-3 of SGLang 0.5.20 | {finding.where} | {finding.message} |"
    assert row in text.splitlines()
    assert "| PFX-5 | pass | | |" not in text
    plain = reports_to_markdown([check_operation(_in_place_prefix_trace())])
    assert "| PFX-5 | **fail** |" in plain and "divergence" not in plain


@pytest.mark.clause("PFX-5")
def test_trace_command_writes_the_divergence_into_both_files(tmp_path):
    from hicache_contracts.cli import main
    from hicache_contracts.engine import TraceDocument

    path = tmp_path / "trace.json"
    path.write_text(TraceDocument(operations=(_in_place_prefix_trace(),)).model_dump_json(), encoding="utf-8")
    junit, markdown = tmp_path / "trace.xml", tmp_path / "TRACE.md"
    arguments = [
        "trace",
        str(path),
        "--sglang-version",
        "0.5.20",
        "--junit-xml",
        str(junit),
        "--markdown",
        str(markdown),
    ]
    assert main(arguments) == 0
    assert "DIV-3" in _case(junit.read_text(encoding="utf-8"), "PFX-5").findtext("system-out")
    assert "| PFX-5 | divergence: recorded divergence DIV-3 of SGLang 0.5.20 |" in markdown.read_text(encoding="utf-8")
