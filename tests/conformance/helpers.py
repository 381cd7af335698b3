"""Shared helpers of the conformance tests: build options and run the suite, the CLI or pytest on an in-test backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any, Optional

from hicache_contracts.conformance import (
    BACKEND_LEVELS,
    CHECKS,
    BackendFactory,
    SuiteOptions,
    SuiteReport,
    backend_clauses,
    run_suite,
)

PROJECT = Path(__file__).resolve().parents[2]
CORRECT = "tests.conformance.correct_backend:CorrectBackend"
"""The correct in-test backend, as the command line names it."""

ALL_LEVELS = tuple(level for level in BACKEND_LEVELS if level != "format")
"""Every backend level but ``format``, durability included: the in-test backends keep pages in a process-wide store,
under names that leave the host pool's format out (NS-9 is a guard the reference backends make, ``format`` claimed)."""
UNCLAIMED_CHECKS = frozenset(check.name for check in CHECKS if set(check.requires) - set(ALL_LEVELS))
"""The checks of a level ``ALL_LEVELS`` leaves out: skipped as not claimed in every run that declares it."""
UNCLAIMED_CLAUSES = frozenset(item.id for item in backend_clauses() if item.level not in ALL_LEVELS)
"""The clauses of a level ``ALL_LEVELS`` leaves out: skipped as not claimed in every run that declares it."""

SEED = 0
"""A fixed seed: the tests' runs are reproducible."""


class UnimplementedV2:
    """SGLang's base-class stubs of the v2 data methods: they only raise NotImplementedError (mix in first)."""

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        raise NotImplementedError

    def batch_get_v2(self, transfers, extra_info=None):
        raise NotImplementedError

    def batch_set_v2(self, transfers, extra_info=None):
        raise NotImplementedError


class UnimplementedV1V2(UnimplementedV2):
    """SGLang's base-class stubs: the v1 and v2 data methods only raise NotImplementedError (mix in first)."""

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError


def fresh_store() -> str:
    """Return the name of a store no other test uses."""
    return f"test-{uuid.uuid4().hex}"


def checks_for(clause_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Return the names of the checks that cover any of ``clause_ids``."""
    return tuple(check.name for check in CHECKS if set(check.clauses) & set(clause_ids))


def run(backend: Any, *, store: Optional[str] = None, extra: Optional[dict] = None, **options: Any) -> SuiteReport:
    """Run the suite (smoke profile, fixed seed, every level declared) against ``backend`` on a fresh store."""
    settings: dict[str, Any] = dict(profile="smoke", seed=SEED, levels=ALL_LEVELS)
    settings.update(options)
    config = {"store": store or fresh_store(), **(extra or {})}
    return run_suite(BackendFactory(backend, config), SuiteOptions(**settings))


def statuses(report: SuiteReport) -> dict[str, str]:
    """Return every clause's status in the report's first section."""
    return {verdict.clause_id: verdict.status for verdict in report.sections[0].clauses}


def failed(report: SuiteReport) -> list[str]:
    """Return the clauses that failed."""
    return [clause_id for clause_id, status in statuses(report).items() if status == "fail"]


def backend_arguments(backend: str = CORRECT, *, option_prefix: str = "--") -> list[str]:
    """Name ``backend`` and a fresh store on a command line (``option_prefix`` ``--hicache-`` for the pytest plugin)."""
    return [f"{option_prefix}backend", backend, f"{option_prefix}extra-config", json.dumps({"store": fresh_store()})]


def plugin_arguments(backend: str = CORRECT, levels: str = "core,v1") -> list[str]:
    """The pytest plugin's options for a smoke run of ``backend`` at ``levels``, seed 0, on a fresh store."""
    smoke = ["--hicache-profile", "smoke", "--hicache-seed", "0", "--hicache-levels", levels]
    return [*backend_arguments(backend, option_prefix="--hicache-"), *smoke]


def run_cli(*arguments: str, profile: Optional[str] = "smoke") -> int:
    """Run ``hicache-conform run`` in process (seed 0, quiet, no colour; ``profile`` unless None) and return its status."""
    from hicache_contracts.cli import main

    chosen = ["--profile", profile] if profile else []
    return main(["run", *chosen, "--seed", "0", "--quiet", "--no-color", *arguments])


def pytest_in(directory: Path, *arguments: str, report: str = "-q") -> subprocess.CompletedProcess:
    """Run pytest in ``directory`` (this project importable, no colour), its summary option ``report`` first."""
    environment = dict(os.environ, PYTHONPATH=str(PROJECT), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", report, *arguments],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_vendor_session(directory: Path, options: Optional[str] = None) -> None:
    """Write a vendor's conftest (the correct backend on a fresh store; ``options``, a SuiteOptions expression, as
    its hicache_options fixture) and a test module that imports the suite's test."""
    fixture = f"""
        @pytest.fixture(scope="session")
        def hicache_options():
            return {options}
    """
    (directory / "conftest.py").write_text(
        textwrap.dedent(f"""
        import pytest
        from hicache_contracts.conformance import BackendFactory, SuiteOptions
        from tests.conformance.correct_backend import CorrectBackend

        @pytest.fixture(scope="session")
        def hicache_backend_factory():
            return BackendFactory(CorrectBackend, {{"store": "{fresh_store()}"}})
    """)
        + (textwrap.dedent(fixture) if options else "")
    )
    (directory / "test_vendor.py").write_text(
        "from hicache_contracts.conformance.pytest_plugin import test_hicache_conformance  # noqa: F401\n"
    )
