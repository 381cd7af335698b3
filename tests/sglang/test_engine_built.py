"""The vendor suite with the release building, feeding and calling the backend as SGLang does.

Scenario: ``hicache-conform run --sglang-version V`` over a backend module that imports SGLang at
its top. Expected: the release is put on the path before the module is imported: the run starts
(not exit 2) and the report names the release.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from hicache_spec.releases import SGLANG_RELEASES


def _cli(*arguments: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hicache_contracts.cli", "run", "--no-color", "--quiet", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.clause("BE-1")
def test_a_backend_that_imports_sglang_loads_with_sglang_version(release):
    if release not in (SGLANG_RELEASES[0], SGLANG_RELEASES[-1]):
        pytest.skip("the release's place on the path is checked on the oldest and the newest pinned release")
    done = _cli(
        "--backend",
        "tests.sglang.planted_driven:ImportsSGLang",
        "--sglang-version",
        release,
        "--profile",
        "smoke",
        "--seed",
        "0",
        "--check",
        "v1_pages_round_trip_bit_for_bit",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"release {release}" in done.stdout
    assert f"engine: SGLang {release}, probe tier" in done.stdout
