"""Bounded runs: the stateful check's budget follows the backend's measured call time, and the report says so.

Scenario: the stateful check alone, standard profile (50 examples of 30 steps), its budget lowered to half a
second, against a correct backend whose lookups take 2 ms, and against the in-process correct backend with the
budget as shipped.
Expected: against the slow backend the check runs fewer examples (never under 3) and the report's notes say how
many, out of how many, at what measured call time; against the fast one nothing is scaled and nothing is said.
Why it matters: a networked store must get a verdict in bounded time, and a vendor must know when fewer
examples ran.
"""

from __future__ import annotations

import re

import pytest

from hicache_contracts.conformance.checks import stateful
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import run, statuses
from tests.conformance.planted_verdicts import TwoMillisecondLookups

CHECK = "stateful_model_of_a_lossy_write_once_store"


@pytest.mark.clause("BE-2")
def test_a_slow_backend_gets_fewer_stateful_examples_and_the_report_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stateful, "STATEFUL_BUDGET_S", 0.5)
    report = run(TwoMillisecondLookups, checks=(CHECK,), profile="standard")
    assert statuses(report)["BE-2"] == "pass", report.render_text(color=False)
    notes = [note for note in report.sections[0].notes if note.startswith("stateful check: ")]
    assert len(notes) == 1, report.sections[0].notes
    assert re.fullmatch(
        r"stateful check: 3 of the profile's 50 examples \(30 steps each\), scaled to 0\.5 s at the backend's "
        r"measured call time of \d+\.\d ms",
        notes[0],
    ), notes[0]


@pytest.mark.clause("BE-2")
def test_a_fast_backend_runs_the_profiles_examples_and_nothing_is_said() -> None:
    report = run(CorrectBackend, checks=(CHECK,))
    assert statuses(report)["BE-2"] == "pass"
    assert not [note for note in report.sections[0].notes if note.startswith("stateful check: ")]
