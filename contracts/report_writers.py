"""The file writers every report of the project goes through: JUnit XML and Markdown tables.

The backend suite's report (``conformance.reporting.report_render``) and the
engine trace checker's files (``engine._trace_files``) say different things
— a verdict per clause of a backend, a verdict per clause of each recorded
operation — but write them the same way: each builds ``JUnitSuite`` and
``JUnitCase`` values and calls ``junit_document``, and writes its tables with
``markdown_row``. Attributes are written in the order given, so each report
keeps its documented shape.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["JUnitCase", "JUnitOutcome", "JUnitSuite", "junit_document", "markdown_cell", "markdown_row"]


@dataclass(frozen=True)
class JUnitOutcome:
    """What a test case ended with, when not a plain pass: ``failure``, ``skipped`` or ``error``."""

    kind: str
    message: str
    type: Optional[str] = None
    text: Optional[str] = None


@dataclass(frozen=True)
class JUnitCase:
    """One ``testcase``: a clause, with its outcome, properties and ``system-out`` where it has them."""

    classname: str
    name: str
    time: Optional[str] = None
    outcome: Optional[JUnitOutcome] = None
    properties: tuple[tuple[str, str], ...] = ()
    system_out: Optional[str] = None


@dataclass(frozen=True)
class JUnitSuite:
    """One ``testsuite``: its attributes in order (``name`` first), its properties (None: no element) and cases."""

    attributes: tuple[tuple[str, str], ...]
    cases: tuple[JUnitCase, ...]
    properties: Optional[tuple[tuple[str, str], ...]] = None


def _properties(parent: ElementTree.Element, items: Sequence[tuple[str, str]]) -> None:
    properties = ElementTree.SubElement(parent, "properties")
    for name, value in items:
        ElementTree.SubElement(properties, "property", name=name, value=value)


def junit_document(attributes: Sequence[tuple[str, str]], suites: Sequence[JUnitSuite]) -> str:
    """Return a JUnit XML document: ``testsuites`` with ``attributes``, then each suite and its cases."""
    root = ElementTree.Element("testsuites", dict(attributes))
    for suite in suites:
        element = ElementTree.SubElement(root, "testsuite", dict(suite.attributes))
        if suite.properties is not None:
            _properties(element, suite.properties)
        for case in suite.cases:
            attributes_of_case = {"classname": case.classname, "name": case.name}
            if case.time is not None:
                attributes_of_case["time"] = case.time
            case_element = ElementTree.SubElement(element, "testcase", attributes_of_case)
            outcome = case.outcome
            if outcome is not None:
                outcome_attributes = {"message": outcome.message}
                if outcome.type is not None:
                    outcome_attributes["type"] = outcome.type
                outcome_element = ElementTree.SubElement(case_element, outcome.kind, outcome_attributes)
                if outcome.text is not None:
                    outcome_element.text = outcome.text
            if case.properties:
                _properties(case_element, case.properties)
            if case.system_out is not None:
                ElementTree.SubElement(case_element, "system-out").text = case.system_out
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def markdown_cell(text: object) -> str:
    """Return ``text`` fit for one table cell: on one line, white space folded, ``|`` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown_row(*cells: str) -> str:
    """Return one Markdown table row of ``cells`` (already fit for a cell; an empty cell is written ``| |``)."""
    return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"
