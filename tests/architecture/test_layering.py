"""The layering (spec ← contracts ← reference) as ``lint-imports`` checks it.

Each planted violation goes into a copy of the three packages; the
import-linter configuration is the project's own (pyproject.toml).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hicache_contracts.conformance.running.main_job import MainJob, load_main_job

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"hicache_spec": "spec", "hicache_contracts": "contracts", "hicache_reference": "reference"}
LINT = Path(sys.executable).parent / "lint-imports"
SPEC_CONTRACT = "hicache_spec imports only the standard library"
FORBIDDEN_CONTRACT = "hicache_contracts never imports hicache_reference"
LAYERS_CONTRACT = "layers: hicache_reference above hicache_contracts above hicache_spec, no cycle between them"
CYCLES_CONTRACT = "no import cycles between the modules of a package"


def _tree(root: Path) -> Path:
    """A copy of the three packages under their import names, with the project's lint configuration."""
    for name, folder in FOLDERS.items():
        shutil.copytree(ROOT / folder, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _lint(root: Path) -> tuple[int, str]:
    if not LINT.exists():
        pytest.skip("import-linter is not installed (it is in the test extra)")
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def _broken(output: str) -> set[str]:
    """The contracts the summary calls BROKEN (each summary line is the name, then KEPT or BROKEN)."""
    flat = " ".join(output.split())
    verdicts = {
        name: re.search(re.escape(name) + r" (KEPT|BROKEN)\b", flat)
        for name in (SPEC_CONTRACT, FORBIDDEN_CONTRACT, LAYERS_CONTRACT, CYCLES_CONTRACT)
    }
    assert all(verdicts.values()), output
    return {name for name, found in verdicts.items() if found is not None and found.group(1) == "BROKEN"}


def _plant(root: Path, module: str, body: str) -> None:
    path = root / module
    path.write_text(
        path.read_text(encoding="utf-8") + f"\n\ndef _planted():  # a lazy import\n    {body}\n", encoding="utf-8"
    )


def test_the_project_keeps_every_import_contract(tmp_path: Path) -> None:
    status, output = _lint(_tree(tmp_path))
    assert status == 0 and _broken(output) == set(), output


@pytest.mark.parametrize(
    ("module", "body", "broken"),
    [
        ("hicache_spec/keys.py", "import pydantic", {SPEC_CONTRACT}),
        ("hicache_spec/prefix.py", "from hicache_contracts import models", {SPEC_CONTRACT, LAYERS_CONTRACT}),
        (
            "hicache_contracts/conformance/running/runner.py",
            "from hicache_reference.backends import MemoryBackend",
            {FORBIDDEN_CONTRACT, LAYERS_CONTRACT},
        ),
        (
            "hicache_contracts/conformance/reporting/report.py",
            "from hicache_contracts.conformance.running.runner import SuiteRunner",
            {CYCLES_CONTRACT},
        ),
    ],
    ids=["spec-imports-pydantic", "spec-imports-contracts", "contracts-imports-reference", "report-imports-runner"],
)
def test_a_planted_violation_breaks_its_contracts(tmp_path: Path, module: str, body: str, broken: set) -> None:
    root = _tree(tmp_path)
    _plant(root, module, body)
    status, output = _lint(root)
    assert status != 0 and _broken(output) == broken, output


def test_importing_every_contracts_module_loads_no_reference_module() -> None:
    code = (
        "import pkgutil, importlib, sys, hicache_contracts\n"
        "for info in pkgutil.walk_packages(hicache_contracts.__path__, 'hicache_contracts.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(sorted(name for name in sys.modules if name.startswith('hicache_reference')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_main_job_is_the_reference_one() -> None:
    from hicache_reference.main_job import MAIN_JOB

    assert load_main_job() is MAIN_JOB and isinstance(MAIN_JOB, MainJob)


def test_a_group_without_a_main_job_is_refused_naming_the_group() -> None:
    with pytest.raises(ValueError, match=r"exactly one entry point in group 'hicache_spec\.no_such_group'"):
        load_main_job("hicache_spec.no_such_group")


def test_a_run_without_a_main_job_is_a_usage_error(monkeypatch, capsys) -> None:
    from hicache_contracts import cli
    from hicache_contracts.conformance import cli as run_cli

    monkeypatch.setattr(run_cli, "load_main_job", lambda: load_main_job("hicache_spec.no_such_group"))
    assert cli.main(["run", "--quiet"]) == 2
    assert "hicache_spec.no_such_group" in capsys.readouterr().err
