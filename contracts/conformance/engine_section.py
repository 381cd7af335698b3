"""The main job's engine half: the reference controller's traces, as a report section.

``hicache-conform run`` without a backend checks the reference backends with
the vendor suite, then drives the reference controller through the engine
scenarios of ``hicache_contracts.engine`` and reports every engine-side clause
here. Clauses a single-rank trace cannot decide (several ranks, a clock, the
engine's allocator) are listed as skipped with the tests that check them.
"""

from __future__ import annotations

import time
from typing import Optional

from hicache_contracts.conformance.report import FAIL, PASS, SKIP, ClauseVerdict, Failure, LevelVerdict, ReportSection
from hicache_spec import LEVELS, clauses

__all__ = ["ENGINE_LEVELS", "reference_engine_section"]

ENGINE_LEVELS = ("prefix", "controller", "hybrid", "ranks")
"""The levels whose engine-side clauses the section reports, in order."""

_NOT_BY_TRACE = "not decidable from one rank's trace; checked by the project's tests of the reference controller"


def reference_engine_section(controller_class: Optional[type] = None) -> ReportSection:
    """Run the reference controller (or ``controller_class``) through the engine scenarios; return the verdict per engine clause."""
    from hicache_contracts.engine import check_reference_controller

    started = time.monotonic()
    results = {result[0]: result for result in check_reference_controller(controller_class)}
    verdicts = []
    for registered in clauses():
        if registered.role == "backend" or registered.level not in ENGINE_LEVELS + ("core", "v2"):
            continue
        result = results.get(registered.id)
        if result is None:
            if registered.level not in ENGINE_LEVELS:
                continue
            verdicts.append(ClauseVerdict(registered.id, registered.level, registered.statement, SKIP, _NOT_BY_TRACE))
            continue
        _, passed, detail = result
        failures = () if passed else (Failure("reference controller trace", detail),)
        verdicts.append(
            ClauseVerdict(registered.id, registered.level, registered.statement, PASS if passed else FAIL,
                          None if passed else detail, failures, ("engine trace scenarios",))
        )
    levels = tuple(
        LevelVerdict(level, True, "required", description=LEVELS[level])
        for level in dict.fromkeys(verdict.level for verdict in verdicts)
    )
    return ReportSection(
        title="reference controller (engine conformance)",
        subject="hicache_reference.CacheController",
        levels=levels,
        clauses=tuple(verdicts),
        notes=("each scenario records the controller's backend calls and acks and checks the trace",),
        duration_s=time.monotonic() - started,
    )
