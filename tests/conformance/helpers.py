"""Shared helpers of the conformance tests: build options and run the suite on an in-test backend."""

from __future__ import annotations

import uuid
from typing import Any, Optional

from hicache_contracts.conformance import (
    BACKEND_LEVELS,
    CHECKS,
    BackendFactory,
    SuiteOptions,
    SuiteReport,
    run_suite,
)

ALL_LEVELS = BACKEND_LEVELS
"""Every backend level, durability included: the in-test backends keep pages in a process-wide store."""

SEED = 0
"""A fixed seed: the tests' runs are reproducible."""


def fresh_store() -> str:
    """Return the name of a store no other test uses."""
    return f"test-{uuid.uuid4().hex}"


def checks_for(clause_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Return the names of the checks that cover any of ``clause_ids``."""
    return tuple(check.name for check in CHECKS if set(check.clauses) & set(clause_ids))


def run(backend: Any, *, store: Optional[str] = None, extra: Optional[dict] = None, **options: Any) -> SuiteReport:
    """Run the suite (smoke profile, fixed seed, every level declared) against ``backend`` on a fresh store."""
    settings = dict(profile="smoke", seed=SEED, levels=ALL_LEVELS)
    settings.update(options)
    config = {"store": store or fresh_store(), **(extra or {})}
    return run_suite(BackendFactory(backend, config), SuiteOptions(**settings))


def statuses(report: SuiteReport) -> dict[str, str]:
    """Return every clause's status in the report's first section."""
    return {verdict.clause_id: verdict.status for verdict in report.sections[0].clauses}


def failed(report: SuiteReport) -> list[str]:
    """Return the clauses that failed."""
    return [clause_id for clause_id, status in statuses(report).items() if status == "fail"]
