"""Declared non-support: a backend lists the configurations it does not serve (``hicache_not_supported``).

Scenario: a backend refusing MLA configurations by design, with and without the declaration; a backend
declaring the page_first layout, run with that layout and with the other; a declaration naming no known
configuration.
Expected: declared, the checks whose subject needs MLA show "not applicable: declared" and nothing fails;
undeclared, the refusal fails; a run in a declared layout has every clause not applicable; the report's
JSON records the declaration; an unknown name fails startup naming the attribute and the known names.
Why it matters: a backend that refuses a configuration by design must not fail for it, and the report
must say what it does not serve.
"""

from __future__ import annotations

import json

import pytest

from hicache_contracts.conformance.running.verdicts import setup_reason
from tests.conformance.helpers import failed, run
from tests.conformance.planted_verdicts import (
    DeclaresAnUnknownConfiguration,
    DeclaresNoMla,
    DeclaresNoPageFirst,
    RefusesMla,
)

MLA_CHECKS = ("replicated_kv_is_shared_across_tp_ranks", "a_non_writer_rank_writes_what_it_reports")


def verdict_of(report, clause_id: str):
    return next(item for item in report.sections[0].clauses if item.clause_id == clause_id)


@pytest.mark.clause("BE-1", "NS-5")
def test_an_undeclared_refusal_of_mla_fails_once_naming_the_configuration() -> None:
    report = run(RefusesMla, checks=MLA_CHECKS)
    assert failed(report) == ["BE-1"], report.render_text(color=False)
    (failure,) = verdict_of(report, "BE-1").failures
    assert failure.check == ", ".join(MLA_CHECKS)
    assert failure.message == (
        f"found while setting up {', '.join(MLA_CHECKS)}: the backend cannot be built for an MLA model "
        "(is_mla_model=True): it raised ValueError: this store serves MHA models only; a backend that does not serve MLA by design declares "
        "hicache_not_supported = ('mla',)"
    )
    assert verdict_of(report, "NS-5").reason == setup_reason("BE-1")


@pytest.mark.clause("NS-5")
def test_declared_mla_is_not_applicable_and_recorded() -> None:
    report = run(DeclaresNoMla, checks=MLA_CHECKS)
    assert failed(report) == [], report.render_text(color=False)
    for outcome in report.sections[0].checks:
        assert outcome.status == "skip"
        assert outcome.message == (
            "not applicable: declared: the backend does not serve MLA models (is_mla_model=True, one latent per token)"
        )
    assert verdict_of(report, "NS-5").reason == outcome.message
    data = json.loads(report.to_json())
    assert data["sections"][0]["options"]["not_supported"] == ["mla"]


@pytest.mark.clause("BE-2")
def test_a_run_in_a_declared_layout_has_no_clause_applicable() -> None:
    report = run(DeclaresNoPageFirst, layout="page_first", checks=("batch_exists_counts_the_leading_run",))
    reason = "not applicable: declared: the backend does not serve the page_first host pool layout, which this run uses"
    assert {verdict.status for verdict in report.sections[0].clauses} == {"skip"}
    assert {verdict.reason for verdict in report.sections[0].clauses} == {reason}
    assert report.exit_code == 0
    other = run(DeclaresNoPageFirst, checks=("batch_exists_counts_the_leading_run",))
    assert verdict_of(other, "BE-2").status == "pass"


@pytest.mark.clause("BE-1")
def test_an_unknown_declaration_fails_startup_naming_the_attribute() -> None:
    report = run(DeclaresAnUnknownConfiguration, checks=("batch_exists_counts_the_leading_run",))
    verdict = verdict_of(report, "BE-1")
    assert verdict.status == "fail"
    assert verdict.failures[0].message == (
        "hicache_not_supported: must name only configurations among "
        "['indexer', 'layer_first', 'mha', 'mla', 'page_first', 'swa'] (got ['fp8'])"
    )
