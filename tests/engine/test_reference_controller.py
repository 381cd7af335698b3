"""The reference controller passes the trace checker, and planted-bug subclasses of it are reported.

Scenario: the reference CacheController runs the standard scenarios through a
RecordingBackend over the scripted store — prefix None, [] and non-empty, 1
to 5 slices (1, 128, 129, 300, 600 pages), base and hybrid pools, and faults
that end IO early. Then a subclass overriding one method with a bug SGLang
shipped runs the same scenario. Expected: every reference trace
conforms; every planted trace is named by the clause its bug breaks.
"""

from __future__ import annotations

import re

import pytest

from hicache_spec import clause
from hicache_contracts.engine import assert_trace_conforms
from hicache_contracts.engine import EngineScenario as Scenario
from hicache_contracts.engine.scenarios import STANDARD_SCENARIOS
from hicache_contracts.verdicts import FAIL, PASS
from hicache_reference.engine_check import check_reference_controller, run_scenario
from tests import planted_controllers as planted

PREFETCH_CLAUSES = (
    "PFX-1",
    "PFX-2",
    "PFX-3",
    "PFX-4",
    "PFX-5",
    "PFX-7",
    "CTL-1",
    "CTL-2",
    "CTL-4",
    "CTL-5",
    "CTL-6",
    "CTL-11",
    "RANK-2",
    "RANK-3",
)
HYBRID_CLAUSES = ("PFX-8", "PFX-9", "HYB-1", "HYB-2", "HYB-3")
BACKUP_CLAUSES = ("PFX-2", "PFX-5", "PFX-9", "CTL-2", "CTL-7", "CTL-13", "HYB-5")


@pytest.mark.clause(*PREFETCH_CLAUSES, *HYBRID_CLAUSES, *BACKUP_CLAUSES)
@pytest.mark.parametrize("scenario", STANDARD_SCENARIOS, ids=str)
def test_reference_controller_conforms(scenario):
    outcome = run_scenario(scenario)
    report = outcome.check()
    assert report.ok, report.format_table(statements=True)
    expected = {"CTL-2", "PFX-1"}
    if scenario.kind == "prefetch":
        expected |= {"CTL-5", "CTL-6", "RANK-3"} | ({"CTL-1"} if not scenario.hybrid else set())
    else:
        expected |= {"CTL-7", "CTL-13"} | ({"HYB-5"} if scenario.hybrid else set())
    expected |= {"PFX-3"} if scenario.prefix == "none" else {"PFX-2", "PFX-7"}
    assert expected <= set(report.checked)


@pytest.mark.clause("PFX-7", "PFX-8", "HYB-1")
@pytest.mark.parametrize("pages", [1, 128, 300])
def test_reference_hybrid_reads_share_the_slice_prefix(pages):
    outcome = run_scenario(Scenario("prefetch", pages, "anchor", hybrid=True))
    report = assert_trace_conforms(
        outcome.recorder,
        chain=outcome.scenario.chain,
        prefix_keys=outcome.operation.base_info.prefix_keys,
        acks=outcome.operation.acks,
        page_size=2,
    )
    assert {"PFX-8", "HYB-1", "HYB-2", "HYB-3", "PFX-9"} <= set(report.checked)


PLANTED = [
    (entry.name, entry.controller, oracle.scenario, oracle.clause or entry.clause)
    for entry in planted.CATALOG
    for oracle in entry.oracles
    if oracle.kind == "trace" and isinstance(oracle.scenario, Scenario)
]
"""The catalog's engine-scenario trace oracles as (name, controller, scenario, clause); run by
tests/reference/test_controller_planted.py."""


@pytest.mark.clause("PFX-5")
def test_assert_trace_conforms_lists_clause_statement_and_call():
    outcome = run_scenario(Scenario("prefetch", 129, "anchor"), planted.PrefixGrownInPlaceController)
    with pytest.raises(AssertionError) as failure:
        assert_trace_conforms(
            outcome.recorder, chain=outcome.scenario.chain, prefix_keys=outcome.operation.base_info.prefix_keys
        )
    text = str(failure.value)
    assert text.startswith("trace breaks 1 clause(s): PFX-5\n")
    # The whole-chain hit query (CTL-1), then the first KV read, share the list grown in place.
    assert re.search(
        r"  \[PFX-5\] call #(\d+): batch_exists: the prefix handed to the backend changed after the "
        r"call: 3 key\(s\) at call time, 131 key\(s\) now\n"
        r"      rule: " + re.escape(clause("PFX-5").statement) + r"\n"
        r"      call: RecordedCall\(#\1 batch_exists, keys=<129>, extra_info=present, "
        r"prefix_keys=<3 keys>, thread=",
        text,
    ), text


@pytest.mark.clause("PFX-2", "CTL-4", "CTL-6")
def test_check_reference_controller_reports_every_exercised_clause_as_passed():
    scenarios = [scenario for scenario in STANDARD_SCENARIOS if scenario.pages in (1, 300)]
    results = check_reference_controller(scenarios=scenarios)
    assert results and all(verdict.status == PASS and not verdict.failures for verdict in results), results
    clause_ids = [verdict.clause_id for verdict in results]
    assert {"PFX-2", "PFX-5", "PFX-8", "PFX-9", "CTL-1", "CTL-4", "CTL-6", "CTL-7", "HYB-2", "HYB-5"} <= set(clause_ids)
    assert all(set(verdict.checks) <= {str(scenario) for scenario in scenarios} for verdict in results), results
    assert any(len(verdict.checks) > 1 for verdict in results), results


@pytest.mark.clause("PFX-4")
def test_check_reference_controller_reports_a_planted_subclass_as_failed():
    results = check_reference_controller(
        planted.ExtendOnlyWhenNonEmptyController, scenarios=[Scenario("prefetch", 129, "empty")]
    )
    failed = {verdict.clause_id: verdict.failures for verdict in results if verdict.status == FAIL}
    assert list(failed) == ["PFX-4"]
    (failure,) = failed["PFX-4"]
    assert failure.check == "prefetch 129 pages prefix empty base"
    assert re.match(r"\[PFX-4\] call #\d+: KV read batch_get_v1 at page 128: received \[\]", failure.message), failure
