"""What each check, run alone, reports for each planted bug it catches: the recorded verdicts
``tests/conformance/check_messages.json`` holds, and the code that records them again.

    .venv/bin/python -m tests.conformance.check_messages     # rewrite the JSON (minutes)

A verdict is (clause, message, first line of the counterexample) of the check's outcome. Only verdicts
that come out the same in two runs (fresh stores, so fresh key names and page bytes) are kept, and
concurrency checks (whose failures depend on how threads interleave) are left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from hicache_contracts.conformance import CHECKS
from tests.conformance.helpers import checks_for, run
from tests.conformance.planted_backends import PLANTED
from tests.conformance.planted_mutants import MUTANT_PLANTED
from tests.conformance.planted_single import SINGLE
from tests.conformance.test_planted import SPECIAL_OPTIONS

RECORDED = Path(__file__).with_name("check_messages.json")
BACKENDS: dict[str, type] = {backend.__name__: backend for backend in (*PLANTED, *SINGLE, *MUTANT_PLANTED)}
RACING = frozenset(check.name for check in CHECKS if check.tier == "concurrency")


def options_for(backend: type) -> dict[str, Any]:
    """The suite options a planted backend is run with."""
    if backend in MUTANT_PLANTED:
        return dict(MUTANT_PLANTED[backend][2])
    return dict(SPECIAL_OPTIONS.get(backend, {}))


def first_line(text: Optional[str]) -> Optional[str]:
    return None if text is None else text.split("\n", 1)[0]


def verdict(backend: type, check: str) -> Optional[list]:
    """``[clause, message, counterexample's first line]`` of ``check`` run alone on ``backend``; None if it passes."""
    report = run(backend, checks=(check,), **options_for(backend))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    if outcome.status != "fail":
        return None
    return [outcome.clause_id, outcome.message, first_line(outcome.counterexample)]


def candidates(backend: type) -> list[str]:
    """The checks that should catch ``backend``: those of its planted clause(s), or its own check."""
    if backend in SINGLE:
        return [SINGLE[backend]]
    if backend in MUTANT_PLANTED:
        return [MUTANT_PLANTED[backend][0]]
    clause = PLANTED[backend]
    return list(checks_for(clause if isinstance(clause, tuple) else (clause,)))


def record() -> dict[str, dict[str, list]]:
    found: dict[str, dict[str, list]] = {}
    for name, backend in sorted(BACKENDS.items()):
        for check in sorted(set(candidates(backend)) - RACING):
            first, second = verdict(backend, check), verdict(backend, check)
            if first is not None and first == second:
                found.setdefault(name, {})[check] = first
    return found


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(record(), indent=1, ensure_ascii=False) + "\n")
