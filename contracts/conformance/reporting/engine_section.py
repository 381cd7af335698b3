"""The main job's engine half: a controller's per-clause trace results, as a report section.

``hicache-conform run`` without a backend checks the default backends with
the vendor suite, then runs the default controller through the engine
scenarios (``hicache_reference.main_job``) and reports every engine-side
clause with ``engine_section``. Clauses a single-rank trace cannot decide
(several ranks, a clock, the engine's allocator) are listed as skipped with
the tests that check them.
"""

from __future__ import annotations

from typing import Iterable

from hicache_contracts.conformance.reporting.report import (
    FAIL,
    PASS,
    SKIP,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
)
from hicache_contracts.engine._scenario import ClauseResult
from hicache_spec import LEVELS, clauses

__all__ = ["ENGINE_LEVELS", "engine_section"]

ENGINE_LEVELS = ("prefix", "controller", "hybrid", "ranks")
"""The levels whose engine-side clauses the section reports, in order."""

_NOT_BY_TRACE = "not decidable from one rank's trace; checked by the project's tests of the reference controller"


def engine_section(
    results: Iterable[ClauseResult],
    *,
    subject: str,
    duration_s: float = 0.0,
    title: str = "reference controller (engine conformance)",
) -> ReportSection:
    """Return the section of one controller's ``ClauseResult`` list: a verdict per engine clause."""
    by_clause = {result[0]: result for result in results}
    verdicts = []
    for registered in clauses():
        if registered.role == "backend" or registered.level not in ENGINE_LEVELS + ("core", "v2"):
            continue
        result = by_clause.get(registered.id)
        if result is None:
            if registered.level not in ENGINE_LEVELS:
                continue
            verdicts.append(ClauseVerdict(registered.id, registered.level, registered.statement, SKIP, _NOT_BY_TRACE))
            continue
        _, passed, detail = result
        failures = () if passed else (Failure("reference controller trace", detail),)
        verdicts.append(
            ClauseVerdict(
                registered.id,
                registered.level,
                registered.statement,
                PASS if passed else FAIL,
                None if passed else detail,
                failures,
                ("engine trace scenarios",),
            )
        )
    levels = tuple(
        LevelVerdict(level, True, "required", description=LEVELS[level])
        for level in dict.fromkeys(verdict.level for verdict in verdicts)
    )
    return ReportSection(
        title=title,
        subject=subject,
        levels=levels,
        clauses=tuple(verdicts),
        notes=("each scenario records the controller's backend calls and acks and checks the trace",),
        duration_s=duration_s,
    )
