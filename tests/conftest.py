"""Project test configuration: hypothesis profiles, the clause marker and the clause-coverage audit.

Profiles (choose with ``HICACHE_HYPOTHESIS_PROFILE`` or ``--hypothesis-profile``):
  ci    small and derandomized, the default
  deep  many more examples and longer state-machine runs, for a nightly run

Redis: tests/redis_support.py starts the Redis tests' servers on free loopback
ports unless the environment names servers; they stop when the session ends.

The audit (``--clause-audit``, tests/clause_audit.py) fails the session when a
registered clause has no test naming it that ran and passed (a clause whose
tests all skip is uncovered); a test naming an unknown clause fails collection always.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from hicache_spec import UnknownClauseError, clause, clauses
from tests.clause_audit import ClauseAudit

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    stateful_step_count=25,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    stateful_step_count=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HICACHE_HYPOTHESIS_PROFILE", "ci"))

# HICACHE_SGLANG_RELEASE=V: the whole run holds pinned SGLang release V (importable before any test module
# loads), and the release tier in tests/sglang is collected too. Without it, that folder is left out;
# tests/test_release_tier.py runs it once per pinned release, each in a process of its own.
SGLANG_RELEASE = os.environ.get("HICACHE_SGLANG_RELEASE") or None
if SGLANG_RELEASE:
    from hicache_contracts.sglang_release import storage_module

    storage_module(SGLANG_RELEASE)
collect_ignore = [] if SGLANG_RELEASE else ["sglang"]

_AUDIT = ClauseAudit()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--clause-audit",
        action="store_true",
        default=False,
        help="fail when a registered clause has no test marked @pytest.mark.clause(ID) that ran and passed",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(*ids): the spec clause IDs this test checks")
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped without one")
    config.addinivalue_line("markers", "redis: needs a reachable Redis server; skipped without one")
    config.addinivalue_line("markers", "sglang: needs sglang importable; skipped without it")
    config.addinivalue_line("markers", "slow: longer-running test")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    for item in items:
        for marker in item.iter_markers("clause"):
            for clause_id in marker.args:
                try:
                    clause(clause_id)
                except UnknownClauseError:
                    raise pytest.UsageError(
                        f"{item.nodeid}: @pytest.mark.clause names unknown clause {clause_id!r}"
                    ) from None
                _AUDIT.name(clause_id, item.nodeid)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the release tier's runs now, so they overlap the other tests (``tests/release_runs.py``)."""
    if os.environ.get("HICACHE_SGLANG_RELEASE"):
        return  # inside one release's run: the tier does not run here
    versions = [
        str(item.callspec.params["version"])
        for item in session.items
        if isinstance(item, pytest.Function) and item.originalname == "test_release_tier"
    ]
    if versions and not session.config.option.collectonly:
        from tests import release_runs

        release_runs.start(versions)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _AUDIT.record(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _stop_redis_servers()
    if "tests.release_runs" in sys.modules:
        sys.modules["tests.release_runs"].stop()
    if not session.config.getoption("--clause-audit"):
        return
    missing = _AUDIT.uncovered(c.id for c in clauses())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing:
        if reporter:
            reporter.write_line(
                f"clause audit: FAILED — {len(missing)} clause(s) with no executed, passing test:", red=True
            )
            for clause_id, why in missing.items():
                reporter.write_line(f"  {clause_id}: {why}", red=True)
        session.exitstatus = 1
    elif reporter:
        reporter.write_line(
            f"clause audit: every one of {len(clauses())} clauses has a test naming it that ran and passed",
            green=True,
        )


def _stop_redis_servers() -> None:
    """Stop the Redis servers the session started for the Redis tests (tests/redis_support.py), if any."""
    support = sys.modules.get("tests.redis_support")
    if support is not None:
        support.stop_session_servers()
