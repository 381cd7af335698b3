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

from tests.conformance.helpers import plugin_arguments, pytest_in, write_vendor_session


@pytest.mark.clause("BE-18", "BE-14")
def test_command_line_backend_becomes_one_item_per_check(tmp_path: Path) -> None:
    result = pytest_in(
        tmp_path,
        *plugin_arguments("tests.conformance.planted_backends:ScalarV1Result"),
        "-k",
        "unimplemented_methods_raise or v1_results_have_one_bool_per_key",
    )  # one moves no page
    output = result.stdout
    assert result.returncode == 1, output
    assert "1 failed, 1 passed" in output
    assert "[BE-14] batch_get_v1 and batch_set_v1 return a list of exactly len(keys) bools." in output
    assert "found: batch_set_v1 returned a bool, not a list" in output
    assert "hicache conformance" in output  # the clause table at the end of the session


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


@pytest.mark.clause("BE-15", "KEY-2")
def test_an_item_whose_setup_meets_an_unreported_broken_clause_fails_on_it(tmp_path: Path) -> None:
    result = pytest_in(
        tmp_path,
        *plugin_arguments("tests.conformance.planted_backends:ShiftedV1Read"),
        "-k",
        "any_non_empty_string_is_a_key",
    )
    output = result.stdout
    assert result.returncode == 1, output
    assert "[BE-15] get result i is True only if" in output
    assert "found: found while setting up any_non_empty_string_is_a_key: batch_get_v1 returned True" in output
