"""The linker suite from pytest: ``--hicache-linker`` items and a vendor's ``hicache_linker`` fixture.

Scenario: pytest runs in a scratch directory (entry point ``hicache_linker``) against the reference
memory linker and a planted linker, through the options and through a vendor's conftest fixture.
Expected: one item per row of the suite, counted by pytest and selected by ``-k``; the ID of a
failing item re-runs that check alone and shows its clause, what was found and the replay
command; a check that does not hold for the target release is skipped saying so; the linker
section is printed at the end of the session.
Why it matters: a vendor whose CI is pytest runs the linker suite there, as for a backend.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest

from hicache_contracts.linker.pytest_plugin import ROWS
from tests.conformance import helpers

pytest_in = functools.partial(helpers.pytest_in, report="-rfs")
LINKER = ["--hicache-linker", "hicache_reference.linker:MemoryLinker", "--hicache-linker-release", "0.5.23"]


@pytest.mark.clause("LNK-7", "LNK-2")
def test_items_are_counted_and_k_selects_among_them(tmp_path: Path) -> None:
    result = pytest_in(tmp_path, *LINKER, "-k", "lookup_restorable_set or interface", "-v")
    assert f"collected {len(ROWS)} items / {len(ROWS) - 2} deselected / 2 selected" in result.stdout, result.stdout
    assert "hicache-linker::linker[interface] PASSED" in result.stdout
    assert "hicache-linker::linker[lookup_restorable_set] PASSED" in result.stdout
    assert "hicache linker conformance" in result.stdout and "LNK-7" in result.stdout
    assert result.returncode == 0


@pytest.mark.clause("LNK-16")
def test_a_failing_items_id_reruns_it_alone_with_the_clause_and_replay(tmp_path: Path) -> None:
    planted = ["--hicache-linker", "tests.linker.planted:NewestFirstOffloadLinker"]
    result = pytest_in(tmp_path, *planted, "hicache-linker::linker[offload_results_in_order]", "-v")
    assert "collected 1 item" in result.stdout, result.stdout
    assert "hicache-linker::linker[offload_results_in_order] FAILED" in result.stdout
    assert "[LNK-16] Every offload that returned True" in result.stdout
    assert "replay: hicache-conform linker --linker tests.linker.planted:NewestFirstOffloadLinker" in result.stdout
    assert result.returncode == 1


@pytest.mark.clause("LNK-14", "LNK-21")
def test_a_vendors_fixture_runs_every_row(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent("""
        import pytest

        @pytest.fixture(scope="session")
        def hicache_linker():
            return "hicache_reference.linker:MemoryLinker"
    """)
    )
    (tmp_path / "test_vendor.py").write_text(
        "from hicache_contracts.linker.pytest_plugin import test_hicache_linker_conformance  # noqa: F401\n"
    )
    result = pytest_in(tmp_path, "-k", "namespacing or completed_loads or interface", "-v")
    assert "test_hicache_linker_conformance[namespacing] PASSED" in result.stdout, result.stdout
    assert "test_hicache_linker_conformance[interface] PASSED" in result.stdout
    assert "SKIPPED" in result.stdout and "LNK-14 does not hold for 0.5.23" in result.stdout
    assert result.returncode == 0


def test_an_unknown_item_is_a_usage_error(tmp_path: Path) -> None:
    result = pytest_in(tmp_path, *LINKER, "linker[no_such_check]")
    assert "linker[no_such_check]: must name a check" in result.stderr, result.stderr
    assert result.returncode == 4
