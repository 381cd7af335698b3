"""A backend call that blocks fails its clause within ``--timeout`` and the run ends with a report.

Scenario: a backend whose batch_exists blocks on a long chain, and one
whose constructor blocks, run with a one-second deadline.
Expected: the stuck call's clause fails with "did not return within 1 s",
naming the call; every later check is reported as not run, pointing at it;
the run returns its report in seconds and exits 1.
Why it matters: a suite that hangs on a backend that hangs tells the
vendor nothing, and a CI job that never ends is worse than a red one.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import failed, run
from tests.conformance.planted_backends import BlocksOnLongLookups


class BlocksInConstructor(CorrectBackend):
    """The constructor waits for a service that never answers."""

    never = threading.Event()

    def __init__(self, storage_config, kwargs=None):
        self.never.wait(600)
        super().__init__(storage_config, kwargs)


@pytest.mark.clause("BE-2")
def test_a_call_that_blocks_fails_its_clause_and_the_run_stops_with_a_report() -> None:
    started = time.monotonic()
    report = run(BlocksOnLongLookups, timeout_s=1.0)
    assert time.monotonic() - started < 30
    section = report.sections[0]
    assert failed(report) == ["BE-2"], report.render_text(color=False)
    stuck = next(outcome for outcome in section.checks if outcome.status == "fail")
    assert stuck.check == "batch_exists_takes_a_whole_chain"
    assert stuck.message is not None and stuck.counterexample is not None
    assert stuck.message.startswith("batch_exists([k") and stuck.message.endswith("did not return within 1 s")
    assert (
        "replay: hicache-conform run --backend tests.conformance.planted_backends:BlocksOnLongLookups"
        in stuck.counterexample
    )
    later = section.checks[[outcome.check for outcome in section.checks].index(stuck.check) + 1 :]
    assert later and all(
        outcome.status == "skip"
        and (outcome.message or "").startswith("not run: the run stopped after batch_exists([k")
        for outcome in later
    )
    assert report.exit_code == 1
    assert "did not return within 1 s" in report.render_text(color=False)


@pytest.mark.clause("BE-1")
def test_a_constructor_that_blocks_fails_startup_within_the_deadline() -> None:
    started = time.monotonic()
    report = run(BlocksInConstructor, timeout_s=1.0)
    assert time.monotonic() - started < 15
    assert failed(report) == ["BE-1"]
    verdict = next(item for item in report.sections[0].clauses if item.clause_id == "BE-1")
    assert verdict.failures[0].message.endswith("did not return within 1 s")


class StatsSetToNone(CorrectBackend):
    """Turns get_stats off by setting it to None, where a method returning None was meant (BE-12)."""

    get_stats = None  # type: ignore[assignment]


@pytest.mark.clause("BE-12")
def test_a_method_that_is_not_callable_fails_its_clause_at_once() -> None:
    """The call fails BE-12 with the TypeError, in far less than the deadline (the helper thread meant to make the
    call used to die on it, leaving the check to wait out its 30 s)."""
    started = time.monotonic()
    report = run(StatsSetToNone, checks=("get_stats_returns_none_or_an_object",), timeout_s=30.0)
    assert time.monotonic() - started < 15
    outcome = report.sections[0].checks[0]
    assert outcome.status == "fail" and outcome.clause_id == "BE-12", outcome
    assert outcome.message == "call() raised TypeError: None is not callable", outcome.message
