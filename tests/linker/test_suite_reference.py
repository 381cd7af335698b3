"""The linker suite against the reference linkers (pass) and the planted linkers (each caught by one check).

Scenario: run every check on CPU pools, directly (no SGLang in this process), for each pinned
release's interface; then each planted linker against 0.5.23's.
Expected: the reference memory and file linkers pass every check whose clause holds for the
release; each planted linker fails exactly the check PLANTED names, and no other.
Why it matters: a check that passes a broken linker, or fails a correct one, certifies nothing.
"""

from __future__ import annotations

import pytest

from hicache_contracts.linker.checks import CHECKS
from hicache_contracts.linker.suite import FAIL, PASS, SKIP, run_linker_suite
from hicache_reference.linker import FileLinker, MemoryLinker
from hicache_spec.registry import clause, holds_for
from hicache_spec.releases import SGLANG_RELEASES
from tests.linker.planted import PLANTED

CLAUSE_OF = {check.name: check.clause for check in CHECKS}
BEHAVIOUR = sorted(set(CLAUSE_OF.values()), key=lambda c: int(c.split("-")[1]))


@pytest.mark.clause(*BEHAVIOUR)
@pytest.mark.parametrize("release", SGLANG_RELEASES)
@pytest.mark.parametrize("linker_cls", [MemoryLinker, FileLinker], ids=["memory", "file"])
def test_reference_linkers_pass(linker_cls: type, release: str) -> None:
    report = run_linker_suite(linker_cls, release=release, mode="direct")
    assert report.ok, report.render()
    for check in CHECKS:
        row = report.result(check.name)
        expected = PASS if holds_for(clause(check.clause), release) else SKIP
        assert row.status == expected, report.render()


@pytest.mark.parametrize(
    ("planted", "check"),
    [
        pytest.param(cls, name, marks=pytest.mark.clause(CLAUSE_OF[name]), id=cls.__name__)
        for cls, name in PLANTED.items()
    ],
)
def test_each_planted_linker_is_caught_by_its_check_only(planted: type, check: str) -> None:
    report = run_linker_suite(planted, release="0.5.23", mode="direct")
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == [check], report.render()


def test_every_check_has_a_planted_linker() -> None:
    assert set(PLANTED.values()) | {"completed_loads_in_order"} == set(CLAUSE_OF)


@pytest.mark.clause("LNK-14")
def test_completed_loads_check_catches_an_early_report() -> None:
    """LNK-14 (0.5.20, 0.5.21): a batch reported before it stopped writing is caught by that check alone."""
    from tests.linker.planted import EarlyReportLinker

    report = run_linker_suite(EarlyReportLinker, release="0.5.21", mode="direct")
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == ["completed_loads_in_order"], report.render()


@pytest.mark.clause("LNK-15")
def test_cancel_of_an_unknown_rid_is_judged_where_the_release_asks_it() -> None:
    """0.5.20-0.5.21 ask cancel_queued_load about every released request, 0.5.22+ only about rids in flight: a linker
    answering True for a rid it never queued fails cancel_only_queued alone on 0.5.21 and passes on 0.5.23."""
    from tests.linker.planted import CancelAnyRidLinker

    report = run_linker_suite(CancelAnyRidLinker, release="0.5.21", mode="direct")
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == ["cancel_only_queued"], report.render()
    assert run_linker_suite(CancelAnyRidLinker, release="0.5.23", mode="direct").ok


@pytest.mark.clause("LNK-11")
def test_an_index_that_comes_back_bound_to_the_new_batch_passes() -> None:
    """SGLang finishes a batch before it starts the next: a linker whose counter hands out index 0 for every batch,
    bound to the newest, passes every check; StaleIndexLinker, whose 0 keeps standing for the first batch, fails
    start_indices alone (PLANTED)."""
    from tests.linker.planted import ReusedIndexLinker

    report = run_linker_suite(ReusedIndexLinker, release="0.5.23", mode="direct")
    assert report.ok, report.render()


@pytest.mark.clause("LNK-11")
def test_an_empty_start_is_judged_as_the_release_reads_it() -> None:
    """An empty start returning 0, whose wait returns at once, passes on 0.5.21 (the index only reaches the wait)
    and fails start_indices alone on 0.5.23, which reads a non-negative index as a load pending."""
    from tests.linker.planted import EmptyStartAsZeroLinker

    assert run_linker_suite(EmptyStartAsZeroLinker, release="0.5.21", mode="direct").ok
    report = run_linker_suite(EmptyStartAsZeroLinker, release="0.5.23", mode="direct")
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == ["start_indices"], report.render()


@pytest.mark.clause("LNK-11")
def test_an_empty_start_whose_wait_raises_fails_before_0_5_23() -> None:
    """Before 0.5.23 an empty start's index reaches the forward's wait: a wait that raises fails start_indices (and
    the counter check, LNK-5, which asks the same of any index without a batch)."""
    from tests.linker.planted import EmptyStartAsZeroRaisingLinker

    report = run_linker_suite(EmptyStartAsZeroRaisingLinker, release="0.5.21", mode="direct")
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == ["layer_done_counter", "start_indices"], report.render()
