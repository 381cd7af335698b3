"""The report says which engine built, fed and called the backend.

Scenario: the suite runs over the reference memory backend with the contract models (no SGLang
release). Expected: the report header names the stand-in engine and how to get engine-driven
verdicts, in every rendering (the release tier checks the line that names a release).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Optional

import pytest

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_contracts.sglang_release import STAND_IN_ENGINE, describe_engine
from hicache_reference.backends import MemoryBackend


@pytest.mark.clause("BE-1")
def test_without_a_release_the_header_names_the_stand_in_engine():
    report = run_suite(
        MemoryBackend,
        SuiteOptions(profile="smoke", seed=0, sglang_version="none", checks=("v1_pages_round_trip_bit_for_bit",)),
    )
    (section,) = report.sections
    assert STAND_IN_ENGINE in section.notes
    assert STAND_IN_ENGINE == "engine: stand-in; install a pinned SGLang release for engine-driven verdicts"
    assert STAND_IN_ENGINE in report.render_text(color=False)


@pytest.mark.clause("BE-1")
def test_with_a_release_the_line_names_the_release_and_the_tier():
    assert describe_engine("0.5.23").startswith("engine: SGLang 0.5.23, probe tier")
    assert describe_engine("0.5.23", "built by its StorageBackendFactory") == (
        "engine: SGLang 0.5.23, built by its StorageBackendFactory"
    )
    assert describe_engine(None, "anything") == STAND_IN_ENGINE


def _run_with_no_release(config: dict, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """``hicache-conform run --sglang-version none --sglang-config CONFIG`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "hicache_contracts.cli", "run", "--quiet", "--sglang-version", "none"]
        + ["--sglang-config", json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.clause("BE-1")
def test_sglang_config_without_a_release_is_a_usage_error_naming_the_option():
    config = {
        "backend_name": "x",
        "module_path": "hicache_reference.sglang_adapter",
        "class_name": "SGLangMemoryBackend",
    }
    done = _run_with_no_release(config)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--sglang-config" in done.stderr and "needs a pinned SGLang release" in done.stderr


@pytest.mark.clause("BE-1")
def test_sglang_config_with_sglang_version_none_refuses_an_installed_release():
    """An importable SGLang does not override ``--sglang-version none``: the dynamic config needs a release."""
    from hicache_contracts.sglang_release import ReleaseError, fetch_release

    try:
        folder = fetch_release("0.5.23")
    except ReleaseError as error:
        pytest.skip(f"cannot fetch SGLang 0.5.23's wheel: {error}")
    config = {"backend_name": "x", "module_path": "hicache_reference.sglang_adapter", "class_name": "Anything"}
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    )
    done = _run_with_no_release(config, environment)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--sglang-config" in done.stderr and "--sglang-version none" in done.stderr, done.stderr
