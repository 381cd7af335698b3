"""The format level (NS-9): checked only when a backend claims it, and then on every host pool the suite runs.

Scenario: the reference memory backend with its format guard off claims
every level of the reference but ``format``; then claims it. The reference
memory and file backends run the format check alone for both layouts, both
model kinds and both IO paths (v1, and the legacy batch methods), and an
evicting reference memory backend bounded to a few pages.
Expected: unclaimed, the guard-less backend passes and the report says
``format`` was not declared; claimed, the check fails it on NS-9. Probing
never claims ``format``. The reference backends pass the check everywhere;
the evicting one is skipped, never failed, when the pages were gone before
the same-format reader looked (its misses of other formats then show nothing).
Why it matters: SGLang requires no format guard of a backend (its keys leave
the KV layout and dtype out), so the suite must not hold a backend claiming
``namespacing`` to it; a backend that claims the guard must keep it.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import level_clause_ids
from hicache_reference.backends import FileBackend
from hicache_reference.backends.memory import MemoryBackend
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import checks_for, run, statuses
from tests.conformance.planted_single import UnguardedMemoryBackend

CHECK = "a_reader_of_another_host_pool_format_misses"
MEMORY_LEVELS = MemoryBackend.hicache_levels
"""The reference memory backend's levels: format among them."""
WITHOUT_FORMAT = tuple(level for level in MEMORY_LEVELS if level != "format")


def reason(report, clause_id: str) -> str:
    return next(verdict.reason for verdict in report.sections[0].clauses if verdict.clause_id == clause_id)


def outcome(report) -> str:
    return next(item.status for item in report.sections[0].checks if item.check == CHECK)


@pytest.mark.clause("NS-9")
def test_ns9_is_the_one_clause_of_format_and_not_of_namespacing() -> None:
    assert level_clause_ids("format") == ("NS-9",)
    assert "NS-9" not in level_clause_ids("namespacing")


@pytest.mark.clause("NS-9")
def test_a_backend_without_the_guard_is_held_to_it_only_when_it_claims_format() -> None:
    report = run(UnguardedMemoryBackend, levels=WITHOUT_FORMAT, checks=checks_for(("NS-9",)))
    assert statuses(report)["NS-9"] == "skip"
    assert reason(report, "NS-9") == "level format not claimed: not declared"
    assert report.exit_code == 0
    caught = run(UnguardedMemoryBackend, levels=MEMORY_LEVELS, checks=checks_for(("NS-9",)))
    assert statuses(caught)["NS-9"] == "fail"
    assert caught.exit_code == 1


@pytest.mark.clause("NS-9")
def test_format_is_never_probed() -> None:
    report = run(CorrectBackend, levels=None, checks=checks_for(("NS-9",)))
    line = next(level for level in report.sections[0].levels if level.level == "format")
    assert (line.claimed, line.source) == (False, "probed")
    assert line.reason == "cannot be probed; declare it with --levels or hicache_levels"
    assert statuses(report)["NS-9"] == "skip"


@pytest.mark.clause("NS-9")
@pytest.mark.parametrize("kind", ["mha", "mla"])
@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
@pytest.mark.parametrize("path", ["v1", "legacy"])
def test_the_reference_memory_backend_passes_the_format_check(kind: str, layout: str, path: str) -> None:
    levels = MEMORY_LEVELS if path == "v1" else tuple(level for level in MEMORY_LEVELS if level != "v1")
    report = run(MemoryBackend, levels=levels, kind=kind, layout=layout, checks=(CHECK,))
    assert outcome(report) == "pass", report.render_text(color=False)


@pytest.mark.clause("NS-9")
def test_the_reference_file_backend_passes_the_format_check(tmp_path) -> None:
    report = run(
        FileBackend, extra={"path": str(tmp_path / "pages")}, levels=FileBackend.hicache_levels, checks=(CHECK,)
    )
    assert outcome(report) == "pass", report.render_text(color=False)


@pytest.mark.clause("NS-9")
def test_an_evicting_backend_whose_pages_are_gone_is_skipped_not_failed() -> None:
    extra = {"capacity_pages": 2}
    report = run(MemoryBackend, extra=extra, may_evict=True, levels=MEMORY_LEVELS, checks=(CHECK,))
    assert outcome(report) == "skip", report.render_text(color=False)
    assert "the backend may evict" in reason(report, "NS-9")
    undeclared = run(MemoryBackend, extra=extra, levels=MEMORY_LEVELS, checks=(CHECK,))
    assert statuses(undeclared)["NS-9"] != "pass"  # held to keeping its pages, it cannot even keep the setup's
