"""``--backend my_pkg.store:MyStore`` when ``my_pkg`` is not installed: the working directory, and clear errors.

Scenario: a vendor's package sits in the directory the command runs from but
is not on the import path; or it is nowhere; or it is found but one of its
own imports is missing.
Expected: the first is imported from the working directory with a note on
stderr saying so; the others exit 2 with an error that names the module, the
folder searched and the fix.
Why it matters: a vendor's first command is ``hicache-conform run --backend``
from their own checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-P", "-c", "import sys; from hicache_contracts.cli import main; sys.exit(main())"]
"""The console script as installed: ``-P`` keeps the working directory off the import path, as the script does."""

STORE = '''
from tests.conformance.correct_backend import CorrectBackend


class MyStore(CorrectBackend):
    """A vendor's store: the suite's correct in-test backend under another name."""
'''


def run_in(directory: Path, *arguments: str) -> subprocess.CompletedProcess:
    """Run ``hicache-conform`` in ``directory``, with only the project itself on PYTHONPATH."""
    environment = dict(os.environ, PYTHONPATH=str(PROJECT), NO_COLOR="1")
    return subprocess.run(
        [*COMMAND, *arguments], cwd=directory, env=environment, capture_output=True, text=True, timeout=120
    )


@pytest.mark.clause("BE-1")
def test_a_package_in_the_working_directory_is_imported_and_the_note_says_so(tmp_path: Path) -> None:
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "store.py").write_text(STORE)
    result = run_in(
        tmp_path,
        "run",
        "--backend",
        "my_pkg.store:MyStore",
        "--extra-config",
        '{"store": "ux-cwd"}',
        "--check",
        "batch_exists_has_no_side_effects",
        "--quiet",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == (
        f"hicache-conform: imported 'my_pkg.store' from the working directory {tmp_path} "
        "(it is not on the import path)\n"
    )
    assert "backend my_pkg.store:MyStore" in result.stdout


@pytest.mark.clause("BE-1")
def test_a_module_found_nowhere_names_the_folder_searched_and_the_fix(tmp_path: Path) -> None:
    result = run_in(tmp_path, "run", "--backend", "my_pkg.store:MyStore")
    assert result.returncode == 2
    assert result.stderr == (
        "hicache-conform run: --backend: module 'my_pkg.store' must be importable; it is neither on the import "
        f"path nor in the working directory {tmp_path} (no my_pkg/ or my_pkg.py there); run from the folder that "
        "holds it, add that folder to PYTHONPATH, or install your package (pip install -e .) "
        "(got 'my_pkg.store:MyStore')\n"
    )


@pytest.mark.clause("BE-1")
def test_a_module_whose_own_import_is_missing_names_that_dependency(tmp_path: Path) -> None:
    (tmp_path / "vendor_store.py").write_text("import no_such_vendor_sdk\n\nclass MyStore:\n    pass\n")
    result = run_in(tmp_path, "run", "--backend", "vendor_store:MyStore")
    assert result.returncode == 2
    assert result.stderr == (
        "hicache-conform run: --backend: module 'vendor_store' must import without error; it needs "
        "'no_such_vendor_sdk', which is not installed (install it into this environment) "
        "(got 'vendor_store:MyStore')\n"
    )


@pytest.mark.clause("BE-1")
def test_a_module_that_raises_while_importing_names_the_error(tmp_path: Path) -> None:
    (tmp_path / "broken_store.py").write_text("raise RuntimeError('no endpoint configured')\n")
    result = run_in(tmp_path, "run", "--backend", "broken_store:MyStore")
    assert result.returncode == 2
    assert result.stderr == (
        "hicache-conform run: --backend: module 'broken_store' must import without error "
        "(RuntimeError: no endpoint configured) (got 'broken_store:MyStore')\n"
    )
