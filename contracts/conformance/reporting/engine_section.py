"""The main job's engine half: a controller's per-clause trace results, as a report section.

``hicache-conform run`` without a backend checks the default backends with
the vendor suite, then runs the default controller through the engine
scenarios (``hicache_reference.main_job``) and reports every engine-side
clause with ``engine_section``. Clauses a single-rank trace cannot decide
(several ranks, a clock, the engine's allocator) are listed as skipped with
the tests that check them.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from hicache_contracts.verdicts import (
    FAIL,
    SKIP,
    ClauseVerdict,
    Failure,
    LevelVerdict,
    ReportSection,
)
from hicache_spec import LEVELS, clauses

__all__ = ["ENGINE_LEVELS", "engine_section"]

ENGINE_LEVELS = ("prefix", "controller", "hybrid", "ranks")
"""The levels whose engine-side clauses the section reports, in order."""

_BY_TRACE = ("engine trace scenarios",)
"""What the section names as the check of every clause it judged."""
_NOT_BY_TRACE = "not decidable from one rank's trace; checked by the project's tests of the reference controller"


def engine_section(
    results: Iterable[ClauseVerdict],
    *,
    subject: str,
    duration_s: float = 0.0,
    title: str = "reference controller (engine conformance)",
) -> ReportSection:
    """Return the section of one controller's engine verdicts (``check_engine``): a verdict per engine clause.

    A failed clause shows one failure: how many violations the scenarios
    found and the first, with its scenario (the full list is in the
    verdicts ``check_engine`` returned).
    """
    by_clause = {verdict.clause_id: verdict for verdict in results}
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
        if result.status == FAIL:
            first = result.failures[0]
            detail = f"{len(result.failures)} violation(s); first: {first.check}: {first.message}"
            folded = (Failure("reference controller trace", detail),)
            verdicts.append(dataclasses.replace(result, reason=detail, failures=folded, checks=_BY_TRACE))
        else:
            verdicts.append(dataclasses.replace(result, checks=_BY_TRACE))
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
