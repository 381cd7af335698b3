"""Which test files name each clause: the ``clause`` markers of the tests pytest collects from a folder.

``docs/spec.md`` lists, under each clause, the files of the project's tests that name it
(``hicache-conform spec --tests tests``). Markers are often built at collection (a parametrized case's
``marks=``, a list of a level's clauses), so the map is what pytest collects, in a process of its own:
the same markers the clause audit counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Union

__all__ = ["TestMapError", "clause_test_files"]

_COLLECT = """
import json, sys
import pytest

class Markers:
    def __init__(self):
        self.named = {}

    def pytest_collection_modifyitems(self, items):
        for item in items:
            for marker in item.iter_markers("clause"):
                for clause_id in marker.args:
                    self.named.setdefault(str(clause_id), set()).add(item.nodeid.split("::")[0])

markers = Markers()
status = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[1]], plugins=[markers])
with open(sys.argv[2], "w") as handle:
    json.dump({"status": int(status), "named": {k: sorted(v) for k, v in markers.named.items()}}, handle)
"""


def _environment() -> dict[str, str]:
    """The collecting process's environment: the caller's, without a pinned SGLang release held for the whole run
    (``HICACHE_SGLANG_RELEASE``), so that the map is the main run's whatever the caller holds (the release tier's
    own files are collected only in the tier's processes, and counted there)."""
    environment = {name: value for name, value in os.environ.items() if name != "HICACHE_SGLANG_RELEASE"}
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    return environment


class TestMapError(RuntimeError):
    """The tests could not be collected, so no map of them can be drawn."""

    __test__ = False  # not a test class, whatever its name


def clause_test_files(tests: Union[str, Path], timeout: float = 300.0) -> dict[str, tuple[str, ...]]:
    """Return clause ID -> the test files under ``tests`` whose collected tests name it (paths as pytest shows
    them from the folder's parent, sorted); raise TestMapError if collection fails."""
    folder = Path(tests).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "map.json"
        done = subprocess.run(
            [sys.executable, "-c", _COLLECT, str(folder), str(out)],
            cwd=folder.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_environment(),
        )
        result = json.loads(out.read_text()) if out.exists() else None
    if result is None or result["status"] not in (0, 5):  # 5: no tests collected
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise TestMapError(f"collecting the tests in {folder} failed (exit {done.returncode}):\n{tail}")
    return {clause_id: tuple(files) for clause_id, files in sorted(result["named"].items())}
