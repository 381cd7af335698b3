"""``hicache-conform run`` end to end, in process.

Scenario: the in-test backends named on the command line, with reports
written to files; malformed options; no backend at all.
Expected: exit status 0 for a conformant backend, 1 for a planted bug, 2 for
a usage error (with a message naming the option); the files parse; without
a backend the reference backends are checked.
Why it matters: CI runs exactly this command.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ElementTree

import pytest

from hicache_contracts.cli import main
from tests.conformance.helpers import CORRECT, backend_arguments, fresh_store, run_cli

PLANTED_BE14 = "tests.conformance.planted_backends:ScalarV1Result"


@pytest.mark.clause("BE-2", "BE-15", "BE-17")
def test_conformant_backend_exits_0_and_writes_every_report(tmp_path, capsys) -> None:
    paths = {name: tmp_path / "out" / name for name in ("report.json", "report.xml", "report.md")}
    status = run_cli(
        *backend_arguments(),
        "--levels",
        "core,v1",
        "--check",
        "batch_exists_counts_the_leading_run",
        "--check",
        "v1_pages_round_trip_bit_for_bit",
        "--json",
        str(paths["report.json"]),
        "--junit-xml",
        str(paths["report.xml"]),
        "--markdown",
        str(paths["report.md"]),
    )
    output = capsys.readouterr().out
    assert status == 0, output
    assert "PASSED: 3 passed, 0 failed" in output  # BE-2, BE-15 and BE-17: the round trip asserts both of its clauses
    assert json.loads(paths["report.json"].read_text())["passed"] is True
    assert ElementTree.parse(paths["report.xml"]).getroot().get("failures") == "0"
    assert "| BE-15 | v1 | ✅ pass |" in paths["report.md"].read_text()


@pytest.mark.clause("BE-14")
def test_planted_bug_exits_1_with_the_clause(capsys) -> None:
    status = run_cli(*backend_arguments(PLANTED_BE14), "--check", "v1_results_have_one_bool_per_key")
    output = capsys.readouterr().out
    assert status == 1
    assert "BE-14   FAIL" in output and "batch_set_v1 returned a bool, not a list" in output


@pytest.mark.clause("BE-1")
def test_module_path_and_class_name_inside_the_extra_config_name_the_backend(tmp_path, capsys) -> None:
    config = tmp_path / "extra.yaml"
    config.write_text(
        f"backend_name: conform\nmodule_path: tests.conformance.correct_backend\n"
        f"class_name: CorrectBackend\nstore: {fresh_store()}\n"
    )
    status = run_cli("--extra-config", f"@{config}", "--check", "batch_exists_has_no_side_effects")
    assert status == 0
    assert "backend tests.conformance.correct_backend:CorrectBackend" in capsys.readouterr().out


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["--backend", "no.such.module:Backend"],
            "hicache-conform run: --backend: module 'no.such.module' must be importable; it is neither on the import path "
            f"nor in the working directory {os.getcwd()} (no no/ or no.py there); run from the folder that holds it, add "
            "that folder to PYTHONPATH, or install your package (pip install -e .) (got 'no.such.module:Backend')",
        ),
        (
            ["--backend", CORRECT, "--extra-config", "[]"],
            "hicache-conform run: --extra-config: must be an object (a dict of options) (got [])",
        ),
        (
            ["--levels", "core,hybrid"],
            "hicache-conform run: --levels: must name backend levels from ['core', 'legacy', 'v1', 'v2', 'prefix', "
            "'namespacing', 'concurrency', 'durability', 'robustness', 'format'] (got 'hybrid', an engine "
            "level)",
        ),
        (
            ["--check", "no_such_check"],
            "hicache-conform run: --check: must name a check from --list-checks (got 'no_such_check')",
        ),
        (["--page-size", "0"], "hicache-conform run: --page-size: must be an int >= 1 (got 0)"),
        (
            ["--extra-config", '{"class_name": "CorrectBackend"}'],
            "hicache-conform run: extra_config.module_path: must be given with class_name to name the backend "
            "(or give --backend) (got None)",
        ),
        (
            ["--extra-config", '{"module_path": "tests.conformance.correct_backend"}'],
            "hicache-conform run: extra_config.class_name: must be given with module_path to name the backend "
            "(or give --backend) (got None)",
        ),
    ],
)
def test_usage_errors_exit_2_naming_the_option(arguments: list, message: str, capsys) -> None:
    assert run_cli(*arguments) == 2
    assert capsys.readouterr().err.strip() == message


def test_list_checks_names_every_check(capsys) -> None:
    from hicache_contracts.conformance import CHECKS

    assert main(["run", "--list-checks"]) == 0
    output = capsys.readouterr().out
    assert all(check.name in output for check in CHECKS)


@pytest.mark.clause("BE-2", "NS-7")
def test_without_a_backend_the_reference_backends_are_checked(capsys) -> None:
    status = run_cli("--check", "batch_exists_counts_the_leading_run", "--check", "pages_survive_a_rebuild")
    output = capsys.readouterr().out
    assert "── reference backend: memory" in output and "── reference backend: file" in output
    assert status == 0, output
