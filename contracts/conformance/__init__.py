"""hicache_contracts.conformance: the backend conformance suite for storage vendors.

    from hicache_contracts.conformance import BackendFactory, SuiteOptions, run_suite

    report = run_suite(BackendFactory(MyStore, {"endpoint": "..."}), SuiteOptions(profile="smoke"))
    print(report.render_text())
    raise SystemExit(report.exit_code)

The same suite runs from the command line (``hicache-conform run``) and as
pytest items (``pytest --hicache-backend my_pkg.store:MyStore``); see
docs/vendors.md.
"""

from hicache_contracts.conformance.framework import (
    CHECKS,
    Check,
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    check_named,
    conformance_check,
)
from hicache_contracts.conformance.levels import (
    BACKEND_LEVELS,
    backend_clauses,
    level_clause_ids,
    level_clauses,
    parse_levels,
)
from hicache_contracts.conformance.session.loading import (
    BackendFactory,
    load_object,
    parse_extra_config,
    resolve_factory,
)
from hicache_contracts.conformance.session.options import PROFILES, Profile, SuiteOptions
from hicache_contracts.conformance.reporting.report import (
    FAIL,
    PASS,
    SKIP,
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
    SuiteReport,
)
from hicache_contracts.conformance.running.runner import (
    SuiteRunner,
    decide_levels,
    run_suite,
    tool_version,
)

__all__ = [
    "BACKEND_LEVELS",
    "BackendFactory",
    "CHECKS",
    "Check",
    "CheckOutcome",
    "CheckSkipped",
    "ClauseFailure",
    "ClauseVerdict",
    "FAIL",
    "Failure",
    "LevelVerdict",
    "PASS",
    "PROFILES",
    "PreconditionFailed",
    "Profile",
    "ReportSection",
    "SKIP",
    "SuiteOptions",
    "SuiteReport",
    "SuiteRunner",
    "backend_clauses",
    "check_named",
    "conformance_check",
    "decide_levels",
    "level_clause_ids",
    "level_clauses",
    "load_object",
    "parse_extra_config",
    "parse_levels",
    "resolve_factory",
    "run_suite",
    "tool_version",
]
