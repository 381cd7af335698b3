"""``hicache-conform trace``: the verdicts as JUnit XML and Markdown, and the format's JSON Schema.

Scenario: the hand-written trace of the engine tests, conforming and with a
planted break (the final ack dropped, the prefix [] not grown).
Expected: ``--junit-xml`` holds a test suite per operation and a case per
clause checked, a failure exactly for each clause broken; ``--markdown`` the
same as a table; ``--schema`` prints the schema ``TraceDocument`` publishes;
no file and no ``--schema`` is a usage error.
Why it matters: an engine's CI reads JUnit, its README shows Markdown, and
engines not written in Python validate their writer against the schema.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest

from hicache_contracts.cli import main
from hicache_contracts.engine import TraceDocument
from tests.engine.test_trace_json import HAND_WRITTEN, broken_document, write


@pytest.mark.clause("PFX-4", "CTL-6")
def test_junit_xml_has_a_case_per_clause_and_a_failure_per_broken_clause(tmp_path, capsys) -> None:
    target = tmp_path / "reports" / "trace.xml"
    assert main(["trace", write(tmp_path, broken_document()), "--junit-xml", str(target)]) == 1
    assert f"wrote {target}" in capsys.readouterr().out
    root = ElementTree.parse(target).getroot()
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "operation req-1"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"PFX-4", "CTL-6"}
    tests = root.get("tests")
    assert root.get("failures") == "2" and tests is not None and int(tests) == len(cases) >= 5
    assert cases["CTL-6"].get("classname") == "hicache.trace.controller"
    ctl6, pfx4 = cases["CTL-6"].find("failure"), cases["PFX-4"].find("failure")
    assert ctl6 is not None and pfx4 is not None and pfx4.text is not None
    assert ctl6.get("message") == (
        "operation: no final ack; every prefetch ends with one, also when the backend raised or the "
        "operation was terminated"
    )
    assert "rule: An empty prefix [] accumulates like any list" in pfx4.text


@pytest.mark.clause("PFX-2", "CTL-5")
def test_a_conforming_trace_gives_junit_without_failures_and_markdown_that_passes(tmp_path) -> None:
    xml_path, markdown_path = tmp_path / "trace.xml", tmp_path / "TRACE.md"
    assert (
        main(["trace", write(tmp_path, HAND_WRITTEN), "--junit-xml", str(xml_path), "--markdown", str(markdown_path)])
        == 0
    )
    root = ElementTree.parse(xml_path).getroot()
    assert root.get("failures") == "0" and root.find("testsuite/testcase/failure") is None
    assert {"PFX-2", "CTL-5"} <= {case.get("name") for case in root.iter("testcase")}
    text = markdown_path.read_text()
    assert text.startswith("# Engine trace `trace.json`\n\n**PASSED**: 1 of 1 operation(s) conform.\n")
    assert "| PFX-2 | pass | | |" in text and "fail" not in text


@pytest.mark.clause("CTL-6")
def test_markdown_lists_each_violation_with_where_it_happened(tmp_path) -> None:
    markdown_path = tmp_path / "TRACE.md"
    assert main(["trace", write(tmp_path, broken_document()), "--markdown", str(markdown_path)]) == 1
    text = markdown_path.read_text()
    assert "**FAILED**: 0 of 1 operation(s) conform." in text
    assert "## operation req-1\n\n| clause | verdict | where | message |\n|---|---|---|---|\n" in text
    assert (
        "| CTL-6 | **fail** | operation | no final ack; every prefetch ends with one, also when the backend raised or the operation was terminated |"
        in text
    )


def test_schema_prints_the_trace_documents_json_schema(capsys) -> None:
    assert main(["trace", "--schema"]) == 0
    assert json.loads(capsys.readouterr().out) == TraceDocument.model_json_schema()


def test_no_file_and_no_schema_is_a_usage_error(capsys) -> None:
    assert main(["trace"]) == 2
    assert capsys.readouterr().err.strip() == "hicache-conform trace: FILE.json: must be given (or --schema)"
