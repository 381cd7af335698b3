"""One cause, one failure: a defect fails the clause it breaks, never a clause whose check merely met it.

Scenario: planted backends whose one defect used to be reported on another clause (an empty v1 write that raises,
met by BE-2's setup; a legacy read that raises on a partial hit, reported as BE-9 and BE-23; a batch_exists
counting bug that BE-23 took for a race), correct backends the suite used to fail (a read of a batch with a miss
in it answered all or nothing; reads or writes unsafe only when two run at once, which SGLang's one IO thread and
one backup thread per instance never do), the whole suite run on each.
Expected: each planted backend fails exactly its own clause; each correct one fails nothing.
Why it matters: a vendor fixes what the report names; a misattributed failure sends them to the wrong code.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance.running.verdicts import setup_reason
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import checks_for, failed, run
from tests.conformance.planted_backends import CountsEveryStoredKey, SharedStagingBuffer
from tests.conformance.planted_catalog import LEGACY_MODE
from tests.conformance.planted_single import OneStoreForEveryModelAtARank, WriteKeysParkedOnTheInstance
from tests.conformance.planted_verdicts import AnswersAllOrNothing, RaisesOnAnEmptyV1Write, RaisesOnAPartialHit
from tests.conformance.planted_branches import V1GetNamesItsInfoParameterInfo, V1SetNamesItsInfoParameterInfo

BE23 = "concurrent_calls_keep_every_key_consistent"


def verdict_of(report, clause_id: str):
    return next(item for item in report.sections[0].clauses if item.clause_id == clause_id)


@pytest.mark.clause("BE-14", "BE-2")
def test_an_empty_v1_write_that_raises_is_be14s_not_be2s() -> None:
    report = run(RaisesOnAnEmptyV1Write)
    assert failed(report) == ["BE-14"], report.render_text(color=False)
    assert verdict_of(report, "BE-2").status == "pass"


@pytest.mark.clause("BE-4", "BE-9", "BE-23")
def test_a_read_that_raises_on_a_partial_hit_is_be4s() -> None:
    report = run(RaisesOnAPartialHit, **LEGACY_MODE)
    assert failed(report) == ["BE-4"], report.render_text(color=False)
    message = verdict_of(report, "BE-4").failures[0].message
    assert message.endswith(", never stored (a missing key is a miss)"), message
    # The threads may meet a partial hit too (it depends on how their calls interleave); where they do, the
    # replay alone shows it: no race, BE-23 not reached. Either way BE-23 never fails for it.
    be23 = verdict_of(report, "BE-23")
    assert be23.status == "pass" or (be23.status == "skip" and be23.reason.startswith(setup_reason("BE-4"))), be23


@pytest.mark.clause("BE-17", "BE-9", "BE-23")
@pytest.mark.parametrize("options", [{}, LEGACY_MODE], ids=["v1", "legacy"])
def test_a_read_answered_all_or_nothing_fails_nothing(options: dict) -> None:
    report = run(AnswersAllOrNothing, **options)
    assert failed(report) == [], report.render_text(color=False)


@pytest.mark.clause("BE-2", "BE-23")
def test_a_counting_bug_is_no_race() -> None:
    report = run(CountsEveryStoredKey, checks=checks_for(("BE-2", "BE-23")))
    assert failed(report) == ["BE-2"], report.render_text(color=False)
    assert verdict_of(report, "BE-23").status in ("pass", "skip")


@pytest.mark.clause("BE-23")
@pytest.mark.parametrize("backend", [SharedStagingBuffer, WriteKeysParkedOnTheInstance, CorrectBackend])
def test_be23_runs_only_the_concurrency_sglang_makes(backend: type) -> None:
    """One reading thread, one writing thread, hit queries from the others: two reads or two writes never overlap."""
    report = run(backend, checks=(BE23,))
    assert verdict_of(report, "BE-23").status == "pass", report.render_text(color=False)


@pytest.mark.clause("BE-8")
@pytest.mark.parametrize("backend", [V1SetNamesItsInfoParameterInfo, V1GetNamesItsInfoParameterInfo])
def test_be8_asks_extra_info_only_in_the_forms_sglang_hands_it(backend: type) -> None:
    """Every release hands extra_info to the v1 calls positionally: the parameter's name is the backend's choice."""
    report = run(backend, checks=("extra_info_accepted_in_every_shape",))
    assert verdict_of(report, "BE-8").status == "pass", report.render_text(color=False)


@pytest.mark.clause("NS-4", "NS-1", "NS-2", "NS-3")
def test_siblings_a_failure_left_unchecked_are_listed_with_it() -> None:
    """The namespacing check stops at NS-4, its last clause: NS-1..NS-3 are listed with it as the clauses left
    unchecked because of it, so a vendor sees every clause one fix and rerun will judge."""
    report = run(OneStoreForEveryModelAtARank, checks=("ranks_and_models_never_share_pages",))
    assert failed(report) == ["NS-4"], report.render_text(color=False)
    assert report.sections[0].root_causes() == [("NS-4", ("NS-1", "NS-2", "NS-3"))]
    assert report.sections[0].root_cause_line() == (
        "root causes, fix first: NS-4 (3 clauses not checked because of it: NS-1, NS-2, NS-3)"
    )
