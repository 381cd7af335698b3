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
import time

from hicache_contracts.conformance.session.properties import NOT_REPRODUCIBLE, run_property, shrink_note


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
    count = calls[0]
    assert failure.message == (
        f"batch_exists returned {count + 1}, expected {count} ({NOT_REPRODUCIBLE}: first it failed BE-2, then the "
        "same example passed)"
    )
    assert failure.counterexample is not None
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


@pytest.mark.clause("BE-2")
def test_shrinking_stops_at_the_cap_and_says_so() -> None:
    """A failure whose every example is slow to run stops shrinking after the cap; the counterexample says the
    example may not be the smallest, in the suite's words, never hypothesis's own request to report it."""

    @given(strategies.lists(strategies.integers(min_value=0, max_value=1000), min_size=3, max_size=30))
    def slow(values: list) -> None:
        time.sleep(0.02)
        if sum(values) > 10:
            fail("BE-2", "batch_exists miscounted", f"values {values}")

    started = time.monotonic()
    with pytest.raises(ClauseFailure) as raised:
        run_property(0, slow, "BE-2", examples=50, shrink_cap_s=0.05)
    assert time.monotonic() - started < 20
    counterexample = raised.value.counterexample
    assert counterexample is not None
    assert shrink_note(0.05) == "shrinking stopped after 0.05 s (the suite's cap): this example may not be the smallest"
    assert shrink_note(0.05) in counterexample.splitlines(), counterexample
    assert "PLEASE REPORT" not in counterexample
