"""Root-cause attribution: a broken basic read or write fails its own clause, and the clauses whose checks
needed it in their setup are reported as not checked, pointing at it.

Scenario: planted backends whose only bug is in the basic v1 round trip (a
read one page off, writes silently dropped), run through the whole smoke
suite; planted backends whose only bug is in one check's own subject; a run
limited to a check whose setup meets a broken read.
Expected: the root clause fails through its own check; the dependents are
skipped with ``not checked: its setup needs <root>, which failed (see
<root>)``; a bug in a check's own logic still fails that check's clause; a
root clause whose own check did not run still fails, with the setup's
finding; the exit code is 1 whenever a clause fails.
Why it matters: one bug should show up as one failing clause, and the
attribution must never hide a failure.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import SuiteReport
from hicache_contracts.conformance.running.runner import setup_reason
from tests.conformance.helpers import failed, run
from tests.conformance.planted_backends import (
    CountsEveryStoredKey,
    DropsEveryV1Write,
    ShiftedV1Read,
    TruncatesLongBatches,
)
from tests.conformance.planted_branches import KeysCutTo24Characters


def verdict_of(report: SuiteReport, clause_id: str):
    return next(item for item in report.sections[0].clauses if item.clause_id == clause_id)


def assert_only_root_fails(report: SuiteReport, root: str, own_check: str, dependents: tuple[str, ...]) -> None:
    assert failed(report) == [root], report.render_text(color=False)
    assert report.exit_code == 1
    assert own_check in [item.check for item in verdict_of(report, root).failures]
    for clause_id in dependents:
        verdict = verdict_of(report, clause_id)
        assert verdict.status == "skip", (clause_id, verdict)
        assert verdict.reason.startswith(setup_reason(root)), (clause_id, verdict.reason)
    assert report.sections[0].root_causes()[0][0] == root
    text = report.render_text(color=False)
    assert any(line.strip().startswith(f"root causes, fix first: {root} (") for line in text.splitlines()[:8])
    assert f"**Root causes, fix first: {root} (" in report.to_markdown()


@pytest.mark.clause("BE-15", "KEY-2", "BE-2", "BE-10", "NS-1", "PFX-1")
def test_a_read_one_page_off_fails_be15_and_its_dependents_point_at_it() -> None:
    report = run(ShiftedV1Read)
    assert_only_root_fails(
        report,
        "BE-15",
        "v1_pages_round_trip_bit_for_bit",
        ("KEY-2", "BE-1", "BE-2", "BE-3", "BE-6", "BE-10", "BE-16", "PFX-1", "NS-1", "NS-5", "NS-6", "NS-7", "BE-23"),
    )


@pytest.mark.clause("BE-17", "BE-2", "BE-8", "PFX-1", "NS-4")
def test_dropped_writes_fail_be17_and_its_dependents_point_at_it() -> None:
    report = run(DropsEveryV1Write)
    assert_only_root_fails(
        report, "BE-17", "v1_pages_round_trip_bit_for_bit", ("KEY-2", "BE-2", "BE-8", "BE-16", "PFX-1", "NS-4", "NS-7")
    )


@pytest.mark.clause("BE-2", "KEY-2", "BE-10")
@pytest.mark.parametrize(
    "backend, clause",
    [(CountsEveryStoredKey, "BE-2"), (KeysCutTo24Characters, "KEY-2"), (TruncatesLongBatches, "BE-10")],
    ids=["counting", "key-form", "batch-size"],
)
def test_a_bug_in_a_checks_own_subject_still_fails_its_clause(backend: type, clause: str) -> None:
    report = run(backend)
    assert clause in failed(report), report.render_text(color=False)
    # a check that met the bug only in its setup (BE-23's threads, say) points at the clause, never elsewhere
    assert {outcome.needs for outcome in report.sections[0].checks} <= {None, clause}
    assert report.exit_code == 1


@pytest.mark.clause("BE-15", "KEY-2")
def test_a_root_clause_whose_own_check_did_not_run_fails_with_the_setup_finding() -> None:
    report = run(ShiftedV1Read, checks=("distinct_keys_name_distinct_pages",))
    root = verdict_of(report, "BE-15")
    assert root.status == "fail"
    assert root.failures[0].message.startswith(
        "found while setting up distinct_keys_name_distinct_pages: batch_get_v1 returned True for "
    )
    assert verdict_of(report, "KEY-2").reason == setup_reason("BE-15")
    assert report.exit_code == 1
