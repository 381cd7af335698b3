"""The main job's engine section: the reference controller passes, a planted controller fails on its clause."""

from __future__ import annotations

import pytest

from hicache_contracts.conformance.reporting.report import FAIL, PASS, SKIP
from hicache_reference.main_job import reference_engine_section
from tests.planted_controllers import BY_NAME

PrefixGrownInPlaceController = BY_NAME["PrefixGrownInPlaceController"]
EmptyPrefixAsNoneInHitQueryController = BY_NAME["EmptyPrefixAsNoneInHitQueryController"]


@pytest.mark.clause("PFX-2", "PFX-5", "CTL-5", "CTL-6")
def test_reference_controller_passes_every_traced_clause():
    section = reference_engine_section()
    statuses = {verdict.clause_id: verdict.status for verdict in section.clauses}
    assert not section.failed
    assert statuses["PFX-2"] == PASS and statuses["CTL-6"] == PASS
    assert statuses["RANK-1"] == SKIP  # decided by the multi-rank tests, not one trace


@pytest.mark.clause("PFX-5")
def test_in_place_prefix_controller_fails_the_section():
    section = reference_engine_section(PrefixGrownInPlaceController)
    failed = {verdict.clause_id for verdict in section.clauses if verdict.status == FAIL}
    assert "PFX-5" in failed


@pytest.mark.clause("PFX-4")
def test_empty_prefix_collapsed_fails_the_section():
    section = reference_engine_section(EmptyPrefixAsNoneInHitQueryController)
    failed = {verdict.clause_id for verdict in section.clauses if verdict.status == FAIL}
    assert failed & {"PFX-1", "PFX-4", "PFX-7"}
