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


UNIMPORTABLE = [
    (
        "my_pkg.store",
        None,
        "must be importable; it is neither on the import path nor in the working directory {directory} (no my_pkg/ "
        "or my_pkg.py there); run from the folder that holds it, add that folder to PYTHONPATH, or install your "
        "package (pip install -e .)",
    ),
    (
        "vendor_store",
        "import no_such_vendor_sdk\n\nclass MyStore:\n    pass\n",
        "must import without error; it needs 'no_such_vendor_sdk', which is not installed (install it into this "
        "environment)",
    ),
    (
        "broken_store",
        "raise RuntimeError('no endpoint configured')\n",
        "must import without error (RuntimeError: no endpoint configured)",
    ),
]
"""(module, its source in the working directory or None for nowhere, what the error says of it)."""


@pytest.mark.clause("BE-1")
@pytest.mark.parametrize("module, source, rule", UNIMPORTABLE, ids=["found nowhere", "missing dependency", "raises"])
def test_a_module_that_cannot_be_imported_exits_2_naming_why_and_the_fix(
    tmp_path: Path, module: str, source: str, rule: str
) -> None:
    if source is not None:
        (tmp_path / f"{module}.py").write_text(source)
    result = run_in(tmp_path, "run", "--backend", f"{module}:MyStore")
    assert result.returncode == 2
    assert result.stderr == (
        f"hicache-conform run: --backend: module '{module}' {rule.format(directory=tmp_path)} (got '{module}:MyStore')\n"
    )
