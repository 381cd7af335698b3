"""Errors of the suite itself are reported as errors, apart from failures, never as a verdict on the backend.

Scenario: the correct in-test backend run through a check whose own code breaks (an internal exception, a
hypothesis ``FlakyStrategyDefinition``), and a planted backend whose returned value raises from the backend's
own code when the suite compares it.
Expected: the suite's breakage gives the check status ``error`` and its clauses ``error`` ("not judged"),
counted and shown apart in every rendering, no clause failed, exit status 3; the backend's exception fails the
check's clause naming the backend's frame.
Why it matters: a vendor must never be told its backend broke a clause when the suite broke, nor told it
passed when the suite could not judge.
"""

from __future__ import annotations

import json
import operator
import xml.etree.ElementTree as ElementTree

import pytest
from hypothesis.errors import FlakyStrategyDefinition

from hicache_contracts.conformance import SuiteReport
from hicache_contracts.conformance.checks import core_hits
from hicache_contracts.conformance.framework import SuiteError
from hicache_contracts.conformance.session.properties import run_capturing
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run, statuses

BE2_CHECK = "batch_exists_counts_the_leading_run"


class ExplodingCount(int):
    """A count whose comparisons raise: the backend's own code breaks when the suite looks at its answer."""

    def __ge__(self, other: object) -> bool:
        raise RuntimeError("the count cannot be compared")

    __le__ = __gt__ = __lt__ = __ge__


class ReturnsAnExplodingCount(CorrectBackend):
    """Planted: batch_exists returns an int whose comparisons raise."""

    def batch_exists(self, keys, extra_info=None):
        return ExplodingCount(super().batch_exists(keys, extra_info))


def flaky_strategy(presence):
    raise FlakyStrategyDefinition("Inconsistent data generation! Data generation behaved differently")


def outcome_of(report: SuiteReport, check: str):
    return next(item for item in report.sections[0].checks if item.check == check)


def verdict_of(report: SuiteReport, clause_id: str):
    return next(item for item in report.sections[0].clauses if item.clause_id == clause_id)


@pytest.fixture
def broken_by_the_suite(monkeypatch: pytest.MonkeyPatch) -> SuiteReport:
    # a function of the suite's called with the wrong arguments: a TypeError raised by no frame of the backend
    monkeypatch.setattr(core_hits, "count_leading_run", operator.truediv)
    return run(CorrectBackend, checks=(BE2_CHECK,))


@pytest.mark.clause("BE-2")
def test_an_internal_exception_is_an_error_not_a_failure(broken_by_the_suite: SuiteReport) -> None:
    report = broken_by_the_suite
    outcome = outcome_of(report, BE2_CHECK)
    assert outcome.status == "error" and outcome.clause_id is None
    assert outcome.message == (
        f"the suite itself broke in {BE2_CHECK}: TypeError: truediv expected 2 arguments, got 1 (at core_hits.py:"
        + outcome.message.rsplit(":", 1)[1]
    )
    assert "where the suite broke:" in outcome.counterexample
    assert "replay: hicache-conform run" in outcome.counterexample
    verdict = verdict_of(report, "BE-2")
    assert verdict.status == "error"
    assert verdict.reason == (
        f"not judged: the suite itself broke in {BE2_CHECK} (an error of the suite, no verdict on the backend)"
    )
    assert "fail" not in statuses(report).values()
    assert report.exit_code == 3 and not report.failed and report.errored


@pytest.mark.clause("BE-2")
def test_an_error_is_counted_and_shown_in_every_rendering(broken_by_the_suite: SuiteReport) -> None:
    report = broken_by_the_suite
    counts = report.counts()
    assert counts["error"] == 1 and counts["fail"] == 0
    data = json.loads(report.to_json())
    assert data["passed"] is False and data["counts"]["error"] == 1
    assert data["sections"][0]["passed"] is False
    clauses = {item["id"]: item for item in data["sections"][0]["clauses"]}
    assert clauses["BE-2"]["status"] == "error"
    text = report.render_text(color=False)
    assert f"   BE-2    ERR   not judged: the suite itself broke in {BE2_CHECK} (an\n" in text
    assert "\n ! core         required\n" in text  # a level with a clause the suite could not judge
    last = text.rstrip().splitlines()[-1]
    assert last.startswith(
        f"ERROR: 0 passed, 0 failed, {counts['skip']} skipped, 1 error of the suite (not judged) in "
    ), last
    root = ElementTree.fromstring(report.to_junit_xml().split("\n", 1)[1])
    assert root.get("errors") == "1" and root.get("failures") == "0"
    case = next(case for case in root.iter("testcase") if case.get("name") == "BE-2")
    error = case.find("error")
    assert error is not None and error.get("type") == "suite" and case.find("failure") is None
    markdown = report.to_markdown()
    assert f"**ERROR** — 0 passed, 0 failed, {counts['skip']} skipped, 1 error of the suite (not judged)" in markdown
    assert "| BE-2 | core | ⚠️ **error** |" in markdown
    assert "- **BE-2** (error of the suite, no verdict on the backend) (`batch_exists_counts_the_leading_run`)" in (
        markdown
    )


@pytest.mark.clause("BE-2")
def test_a_hypothesis_flakiness_error_is_an_error_not_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_hits, "count_leading_run", flaky_strategy)
    report = run(CorrectBackend, checks=(BE2_CHECK,))
    outcome = outcome_of(report, BE2_CHECK)
    assert outcome.status == "error"
    assert outcome.message == (
        f"the suite itself broke in {BE2_CHECK}: hypothesis stopped the check (FlakyStrategyDefinition: "
        "Inconsistent data generation! Data generation behaved differently)"
    )
    assert verdict_of(report, "BE-2").status == "error"
    assert report.exit_code == 3


def test_run_capturing_turns_hypothesis_errors_into_suite_errors_and_lets_others_through() -> None:
    def health_check() -> None:
        from hypothesis.errors import FailedHealthCheck

        raise FailedHealthCheck("too slow")

    with pytest.raises(SuiteError) as caught:
        run_capturing(health_check, "BE-2")
    assert caught.value.message == "hypothesis stopped the check (FailedHealthCheck: too slow)"

    def broken() -> None:
        raise KeyError("page")

    with pytest.raises(KeyError):
        run_capturing(broken, "BE-2")


@pytest.mark.clause("BE-2")
def test_an_exception_from_the_backends_own_code_fails_its_clause_naming_the_frame() -> None:
    report = run(ReturnsAnExplodingCount, checks=(BE2_CHECK,))
    outcome = outcome_of(report, BE2_CHECK)
    assert outcome.status == "fail" and outcome.clause_id == "BE-2"
    line = ExplodingCount.__ge__.__code__.co_firstlineno + 1
    assert outcome.message == (
        "the check stopped on RuntimeError: the count cannot be compared "
        f"(in the backend's __ge__, test_suite_errors.py:{line})"
    )
    assert verdict_of(report, "BE-2").status == "fail"
    assert report.exit_code == 1
