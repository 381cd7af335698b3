"""A run that holds a pinned SGLang release judges a backend only by the clauses that hold for that release.

Scenario: the verdict on BE-26 (restorable prefix lengths, 0.5.23 only) from a failing outcome of its own
check, in a run holding 0.5.20, 0.5.23 and no release. Expected: under 0.5.20 the clause is "not
applicable" (so neither a failure nor a skip that refuses certification), naming the releases it holds
for; under 0.5.23 and without a release the failure stands.
Why it matters: a suite stricter than the release a vendor targets fails backends SGLang never asks that of.
"""

from __future__ import annotations

from typing import Optional

import pytest

from hicache_contracts.conformance.levels import BACKEND_LEVELS
from hicache_contracts.conformance.reporting.report import FAIL, SKIP, CheckOutcome, LevelVerdict
from hicache_contracts.conformance.running.claims import LevelDecision
from hicache_contracts.conformance.running.verdicts import clause_verdict
from hicache_spec import clause


def verdict_on_be26(release: Optional[str]):
    decision = LevelDecision(
        claimed=frozenset(BACKEND_LEVELS),
        dishonoured={},
        verdicts=tuple(LevelVerdict(level, True, "declared") for level in BACKEND_LEVELS),
    )
    failed = CheckOutcome(
        "v2_exists_folds_pool_hits_per_policy", ("BE-26",), FAIL, "BE-26", "restorable_prefix_pages None"
    )
    return clause_verdict(clause("BE-26"), decision, [failed], {"BE-26"}, release)


@pytest.mark.clause("BE-26")
def test_a_clause_of_a_later_release_is_not_applicable_under_an_earlier_one() -> None:
    verdict = verdict_on_be26("0.5.20")
    assert (verdict.status, verdict.reason) == (
        SKIP,
        "not applicable: not part of SGLang 0.5.20's contract (BE-26: 0.5.23 only)",
    )


@pytest.mark.clause("BE-26")
@pytest.mark.parametrize("release", ["0.5.23", None, "installed"])
def test_the_clause_is_judged_where_it_holds_or_no_release_is_held(release: Optional[str]) -> None:
    assert verdict_on_be26(release).status == FAIL
