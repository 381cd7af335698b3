"""BE-23's race is told with the outcome of a second round: reproducible or not, both rounds shown, both within
the run's timeout.

Scenario: planted backends whose reads miss while another thread's write runs, their threads meeting on purpose
(each waits a moment for the other): one in every round, one only while its index is young (the first twenty
meetings), one whose writes are slow enough that the first round takes more than half the run's timeout.
Expected: BE-23 fails each, naming the first round's failure, then "a second round of the same calls on fresh keys
failed too: ...; reproducible" with both histories, "... passed: not reproducible ...", or "not retried" with the
time that was left.
Why it matters: a timing-dependent verdict a vendor cannot reproduce at one seed is told as such, and the check
never waits longer than the run's timeout for a second look.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.conformance.helpers import run
from tests.conformance.planted_branches import ReadsMissWhileAWriteRuns

CHECK = "concurrent_calls_keep_every_key_consistent"
MISSED = r"get by thread 1 missed (k\d+), stored \(set returned True\) before the get began"


class ReadsMissWhileItsIndexIsYoung(ReadsMissWhileAWriteRuns):
    """ReadsMissWhileAWriteRuns until twenty reads have met a write; then writes update the index in place and
    reads never miss (BE-23, shown by the first round only)."""

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        self.meetings = 0

    def another_write_runs(self) -> bool:
        if not super().another_write_runs():
            return False
        self.meetings += 1
        return self.meetings <= 20


class WritesSlowlyAndReadsMiss(ReadsMissWhileAWriteRuns):
    """ReadsMissWhileAWriteRuns whose writes take 80 ms each: forty of them take more than half of a 6 s timeout."""

    def write_pages(self, pool, keys, host_indices):
        written = super().write_pages(pool, keys, host_indices)
        time.sleep(0.08)  # after the rebuild, so that the paced read still meets it
        return written


def outcome_of(backend, **options):
    report = run(backend, checks=(CHECK,), **options)
    outcome = next(item for item in report.sections[0].checks if item.check == CHECK)
    assert outcome.status == "fail" and outcome.clause_id == "BE-23", outcome
    return outcome


@pytest.mark.clause("BE-23")
def test_a_race_shown_again_by_a_second_round_is_reproducible() -> None:
    outcome = outcome_of(ReadsMissWhileAWriteRuns)
    told = re.fullmatch(
        f"{MISSED}; a second round of the same calls on fresh keys failed too: {MISSED}; reproducible",
        outcome.message,
    )
    assert told, outcome.message
    first, second = told.group(1), told.group(2)
    assert first != second  # fresh keys
    rounds = outcome.counterexample.split("\nsecond round:\n")
    assert len(rounds) == 2, outcome.counterexample
    for shown, key in zip(rounds, (first, second)):
        shape, *history = shown.splitlines()
        assert shape.endswith("shared keys, plus get_stats"), shape
        calls = [line for line in history if line.startswith("  t=")]
        assert calls and all(key in re.findall(r"k\d+", line) for line in calls), calls


@pytest.mark.clause("BE-23")
def test_a_race_a_second_round_does_not_show_is_not_reproducible() -> None:
    outcome = outcome_of(ReadsMissWhileItsIndexIsYoung)
    assert re.fullmatch(
        f"{MISSED}; a second round of the same calls on fresh keys passed: not reproducible "
        r"\(it depends on how the threads interleave\)",
        outcome.message,
    ), outcome.message
    assert "second round:" not in outcome.counterexample


@pytest.mark.clause("BE-23")
def test_no_second_round_runs_past_the_runs_timeout() -> None:
    began = time.monotonic()
    outcome = outcome_of(WritesSlowlyAndReadsMiss, timeout_s=6.0)
    assert time.monotonic() - began < 2 * 6.0
    told = re.fullmatch(
        f"{MISSED}; not retried: (\\d+\\.\\d) s of the run's timeout \\(6.0 s\\) were left, the round took "
        r"(\d+\.\d) s, so whether it is reproducible is not known",
        outcome.message,
    )
    assert told, outcome.message
    assert float(told.group(2)) + float(told.group(3)) <= 6.0 + 0.1
