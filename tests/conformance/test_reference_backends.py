"""The reference backends pass the whole suite (the main job of ``hicache-conform run``).

Scenario: the smoke profile against the reference memory backend (one
shared store) and the file backend in a temporary directory, built as
SGLang builds dynamic backends.
Expected: every claimed clause passes; the memory backend does not claim
durability and says so; the file backend claims and passes it.
Why it matters: the reference is what vendors compare against.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import SuiteOptions, backend_clauses, run_reference_suite


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_reference_memory_and_file_backends_pass_every_claimed_clause() -> None:
    report = run_reference_suite(SuiteOptions(profile="smoke", seed=0))
    memory, file = report.sections
    assert not report.failed, report.render_text(color=False)
    assert {verdict.status for verdict in file.clauses} == {"pass"}
    assert {verdict.clause_id for verdict in memory.clauses if verdict.status != "pass"} == {"NS-7"}
    assert memory.title == "reference backend: memory" and file.title == "reference backend: file"
