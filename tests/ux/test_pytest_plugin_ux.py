"""The pytest plugin as a vendor meets it: counts, item IDs that re-run one check, skip lines at the check.

Scenario: pytest runs in a scratch directory against the in-test backends,
through ``--hicache-backend`` and through a vendor's fixture.
Expected: the header counts the suite's items (and ``-k`` deselects from that
count); the ID of an item, given back to pytest, runs that check alone; a
clause ID runs its checks; a skipped check's line names the check's own file.
Why it matters: a vendor re-runs the one failing check they are fixing.
"""

from __future__ import annotations

import functools
import inspect
import re
from pathlib import Path

import pytest

from hicache_contracts.conformance.checks import v1 as checks_v1
from hicache_contracts.conformance.framework import ordered_checks
from tests.conformance import helpers
from tests.conformance.helpers import PROJECT, plugin_arguments, write_vendor_session

CHECKS_V1 = inspect.getsourcefile(checks_v1)
pytest_in = functools.partial(helpers.pytest_in, report="-rfs")


@pytest.mark.clause("BE-2")
def test_the_header_counts_the_suites_items_and_k_deselects_from_them(tmp_path: Path) -> None:
    result = pytest_in(tmp_path, *plugin_arguments(), "-k", "batch_exists_counts_the_leading_run")
    total = len(ordered_checks())
    assert f"collected {total} items / {total - 1} deselected / 1 selected" in result.stdout, result.stdout
    assert result.returncode == 0


@pytest.mark.clause("BE-14")
def test_the_id_of_a_failing_item_re_runs_that_check_alone(tmp_path: Path) -> None:
    options = plugin_arguments("tests.conformance.planted_backends:ScalarV1Result")
    first = pytest_in(tmp_path, *options, "-k", "v1_results_have_one_bool_per_key")
    failed = [line.split()[1] for line in first.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed == ["hicache-conform::hicache[v1_results_have_one_bool_per_key]"], first.stdout
    again = pytest_in(tmp_path, *options, failed[0], "-v")
    assert "collected 1 item" in again.stdout
    assert "hicache-conform::hicache[v1_results_have_one_bool_per_key] FAILED" in again.stdout
    assert again.returncode == 1


@pytest.mark.clause("BE-2")
def test_a_clause_id_runs_every_check_of_that_clause(tmp_path: Path) -> None:
    result = pytest_in(tmp_path, *plugin_arguments(), "hicache[BE-2]", "-v")
    names = [check.name for check in ordered_checks() if "BE-2" in check.clauses]
    assert f"collected {len(names)} item" in result.stdout
    for name in names:
        assert f"hicache-conform::hicache[{name}] PASSED" in result.stdout
    assert result.returncode == 0


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["hicache[no_such_check]"],
            "ERROR: hicache[no_such_check]: must name a check (hicache-conform run "
            "--list-checks) or a clause a check covers (got 'no_such_check')",
        ),
        (["--hicache-levels", "core", "hicache[BE-2]"], None),
    ],
)
def test_an_item_id_needs_a_backend_and_a_known_name(tmp_path: Path, arguments: list, message) -> None:
    if message is None:  # no backend named
        result = pytest_in(tmp_path, "hicache-conform::hicache[BE-2]")
        message = "ERROR: 'BE-2': a hicache item needs a backend (--hicache-backend MODULE:CLASS)"
    else:
        result = pytest_in(tmp_path, *plugin_arguments(), *arguments)
    assert result.returncode == 4
    assert message in result.stderr


@pytest.mark.clause("BE-14")
def test_a_skipped_check_points_at_its_own_source_from_the_command_line(tmp_path: Path) -> None:
    result = pytest_in(tmp_path, *plugin_arguments(levels="core"), "-k", "v1_results_have_one_bool_per_key")
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert "pytest_plugin.py" not in line and "checks/v1.py:" in line, line
    assert line.endswith(": level v1 not claimed")
    check_line = int(line.split("checks/v1.py:")[1].split(":")[0])
    assert CHECKS_V1 is not None
    source = Path(CHECKS_V1).read_text().splitlines()[check_line - 1 : check_line + 2]
    assert any("def v1_results_have_one_bool_per_key" in text for text in source), source


@pytest.mark.clause("BE-14")
def test_a_skipped_check_points_at_its_own_source_through_the_fixture(tmp_path: Path) -> None:
    write_vendor_session(tmp_path, 'SuiteOptions(profile="smoke", seed=0, levels=("core",))')
    result = pytest_in(tmp_path, "-k", "v1_results_have_one_bool_per_key")
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert "pytest_plugin.py" not in line and "checks/v1.py:" in line, line


def test_the_k_example_of_the_vendor_guide_selects_the_checks_it_says(tmp_path: Path) -> None:
    guide = (PROJECT / "docs" / "vendors.md").read_text()
    (expression,) = re.findall(r'-k "([^"]+)"\s+# the v1 and prefix checks', guide)
    result = pytest_in(tmp_path, *plugin_arguments(), "-k", expression, "--collect-only", "-q")
    selected = sorted(
        line.split("hicache[", 1)[1].rstrip("]")
        for line in result.stdout.splitlines()
        if line.startswith("hicache-conform::")
    )
    assert selected == sorted(
        check.name
        for check in ordered_checks()
        if set(check.levels) & {"v1", "prefix"} and check.requires in (("v1",), ("prefix",))
    )
