"""The pytest plugin: checks as items from the command line, checks through a vendor's fixture, and silence
when neither is used.

Scenario: pytest runs in a scratch directory (so only the plugin, loaded by
its entry point, adds anything), against the in-test backends.
Expected: one item per check, named after it and marked with its clauses;
a planted bug fails its item with the clause and the counterexample; with
no option nothing is added.
Why it matters: vendors run the suite inside their own pytest sessions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hicache_spec import clause

from tests.conformance.helpers import plugin_arguments, pytest_in, write_vendor_session


PLANTED_RUNS = [
    pytest.param(
        "ScalarV1Result",
        "unimplemented_methods_raise or v1_results_have_one_bool_per_key",  # one moves no page
        (
            "1 failed, 1 passed",
            f"[BE-14] {clause('BE-14').statement[:40]}",
            "found: batch_set_v1 returned a bool, not a list",
            "hicache conformance",  # the clause table at the end of the session
        ),
        marks=pytest.mark.clause("BE-18", "BE-14"),
        id="one item per check",
    ),
    pytest.param(
        "ShiftedV1Read",
        "distinct_keys_name_distinct_pages",
        (
            "[BE-15] Every entry of batch_get_v1's leading run of True",
            "found: found while setting up distinct_keys_name_distinct_pages: batch_get_v1 returned True",
        ),
        marks=pytest.mark.clause("BE-15", "KEY-2"),
        id="setup meets an unreported broken clause",
    ),
]
"""(planted backend, -k selection, what the output holds): the first fails its own item, the second fails the item
whose setup meets a clause no selected item reports."""


@pytest.mark.parametrize("backend, selection, shown", PLANTED_RUNS)
def test_a_command_line_backend_is_an_item_per_check_failing_with_clause_and_counterexample(
    tmp_path: Path, backend: str, selection: str, shown: tuple
) -> None:
    options = plugin_arguments(f"tests.conformance.planted_backends:{backend}")
    result = pytest_in(tmp_path, *options, "-k", selection)
    assert result.returncode == 1, result.stdout
    for text in shown:
        assert text in result.stdout


@pytest.mark.clause("BE-8", "PFX-6")
def test_vendor_fixture_and_imported_test_run_every_check(tmp_path: Path) -> None:
    write_vendor_session(tmp_path)
    result = pytest_in(
        tmp_path, "--hicache-profile", "smoke", "-k", "extra_info or prefix_keys", "-m", "clause", "-v", "-v"
    )
    assert result.returncode == 0, result.stdout
    assert "test_hicache_conformance[extra_info_accepted_in_every_shape] PASSED" in result.stdout
    assert "3 passed" in result.stdout


def test_without_options_the_plugin_adds_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    result = pytest_in(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "1 passed" in result.stdout and "hicache" not in result.stdout
