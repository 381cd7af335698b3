"""Messages of the run itself, pinned whole: an unbuildable backend is told once; an empty counterexample shows
no block; an exception a backend call raised names the backend's own frame.

Scenario: a backend whose constructor raises, run through the whole suite; a report whose failure carries a
counterexample of blank lines; a backend whose batch_exists raises from a helper of its own.
Expected: one check outcome fails (the first), every later one is "not run: the backend could not be built (see
BE-1)"; no "counterexample:" header over nothing; the failure's counterexample names the backend's file, line
and function where the exception was raised.
Why it matters: a vendor reads one failure for one cause, and is sent to the line of its code that raised.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import ReportSection, SuiteReport
from hicache_contracts.conformance.reporting.report import ClauseVerdict, Failure
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run


class CannotBeBuilt(CorrectBackend):
    def __init__(self, storage_config, kwargs=None) -> None:
        raise RuntimeError("no store reachable")


class LookupHelperRaises(CorrectBackend):
    def batch_exists(self, keys, extra_info=None):
        return self.lookup(keys)

    def lookup(self, keys):
        raise KeyError("index missing")


@pytest.mark.clause("BE-1")
def test_an_unbuildable_backend_fails_one_check_and_the_others_are_not_run() -> None:
    report = run(CannotBeBuilt)
    outcomes = report.sections[0].checks
    assert [outcome.status for outcome in outcomes].count("fail") == 1
    assert outcomes[0].status == "fail" and outcomes[0].message.startswith("the backend could not be built: ")
    assert {outcome.message for outcome in outcomes[1:]} == {"not run: the backend could not be built (see BE-1)"}


def test_a_blank_counterexample_shows_no_block() -> None:
    verdict = ClauseVerdict("BE-2", "core", "statement", "fail", failures=(Failure("a_check", "wrong", "\n \n"),))
    report = SuiteReport((ReportSection("backend x", "x", (), (verdict,)),))
    assert "counterexample" not in report.render_text(color=False)
    assert "```" not in report.to_markdown()
    assert "counterexample" not in report.to_junit_xml()


@pytest.mark.clause("BE-2")
def test_an_exception_from_a_backend_call_names_the_backends_frame() -> None:
    report = run(LookupHelperRaises, checks=("batch_exists_counts_the_leading_run",))
    outcome = report.sections[0].checks[0]
    assert outcome.status == "fail"
    line = LookupHelperRaises.lookup.__code__.co_firstlineno + 1
    assert f'raised in the backend at test_messages_pinned.py:{line} in lookup: raise KeyError("index missing")' in (
        outcome.counterexample.splitlines()
    ), outcome.counterexample
