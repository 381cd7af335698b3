"""Property checks against a backend whose answers change between calls.

Scenario: a property whose first example breaks a clause but passes when
hypothesis replays it, as a networked or caching backend may.
Expected: the report names the clause and what was found, says the failure
did not reproduce, and carries the example; not hypothesis's internal
"FlakyFailure" error.
Why it matters: a vendor must see which clause broke even when the backend
is not deterministic.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies

from hicache_contracts.conformance.framework import ClauseFailure, fail
from hicache_contracts.conformance.session.properties import NOT_REPRODUCIBLE, run_property


@pytest.mark.clause("BE-2")
def test_a_failure_that_does_not_replay_still_names_its_clause() -> None:
    calls = []

    @given(strategies.integers(min_value=0, max_value=3))
    def leading_run(count: int) -> None:
        calls.append(count)
        if len(calls) == 1:
            fail("BE-2", f"batch_exists returned {count + 1}, expected {count}", f"batch_exists(<{count} keys>)")

    with pytest.raises(ClauseFailure) as raised:
        run_property(0, leading_run, "BE-3", examples=5)
    failure = raised.value
    assert failure.clause_id == "BE-2"
    assert failure.message.startswith("batch_exists returned ") and failure.message.endswith(f"({NOT_REPRODUCIBLE})")
    assert failure.counterexample.startswith("batch_exists(<")
    assert "FlakyFailure" not in failure.message


@pytest.mark.clause("BE-2")
def test_a_failure_that_replays_is_reported_as_it_is() -> None:
    @given(strategies.integers(min_value=0, max_value=3))
    def leading_run(count: int) -> None:
        if count >= 2:
            fail("BE-2", f"batch_exists miscounted {count} keys")

    with pytest.raises(ClauseFailure) as raised:
        run_property(0, leading_run, "BE-2", examples=20)
    assert raised.value.message == "batch_exists miscounted 2 keys"  # shrunk to the smallest example
