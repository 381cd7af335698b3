"""What each check, run alone, reports for each planted bug it catches: the recorded verdicts
``tests/conformance/check_messages.json`` holds, and the code that records them again.

    .venv/bin/python -m tests.conformance.check_messages     # rewrite the JSON (minutes)
    .venv/bin/python -m tests.conformance.check_messages NAME ...   # record only these planted backends again

A verdict is (clause, message, first line of the counterexample) of the check's outcome. Concurrency
checks (whose failures depend on how threads interleave) and planted bugs run with a longer profile or
a stuck call are left out; what differs between runs (fresh stores, so fresh key names and page
bytes) is replaced by placeholders (``RUN_SPECIFIC``).
"""

from __future__ import annotations

import json
import re
import sys
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


RUN_SPECIFIC = (
    (re.compile(r"\d+ of (\d+) bytes differ \(first at byte \d+\)"), r"<n> of \1 bytes differ"),
    (re.compile(r"test-[0-9a-f]{32}"), "<store>"),
    (re.compile(r"[0-9a-fA-F]{64}"), "<hashed key>"),
    (re.compile(r"(run-|conform-)[0-9a-f]{10}"), r"\1<run>"),
    (re.compile(r" at 0x[0-9a-f]+"), ""),
    (re.compile(r"ReadOnlyMapping\((\{[^()]*\})\)"), r"\1"),
)
"""What differs between runs of the same check on the same bug: how many bytes of a page built from
fresh keys differ, the store's and the run's names, hashed keys and object addresses; and how an
extra_info mapping shows (read-only in the contract models, a plain dict in SGLang's own class)."""


def stable(text: Optional[str]) -> Optional[str]:
    """``text``'s first line with the run-specific parts replaced."""
    if text is None:
        return None
    line = text.split("\n", 1)[0]
    for pattern, replacement in RUN_SPECIFIC:
        line = pattern.sub(replacement, line)
    return line


def verdict(backend: type, check: str) -> Optional[list]:
    """``[clause, message, counterexample's first line]`` of ``check`` run alone on ``backend``; None if it passes."""
    report = run(backend, checks=(check,), **options_for(backend))
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    if outcome.status != "fail":
        return None
    return [outcome.clause_id, stable(outcome.message), stable(outcome.counterexample)]


def candidates(backend: type) -> list[str]:
    """The checks that should catch ``backend``: those of its planted clause(s), or its own check."""
    if backend in SINGLE:
        return [SINGLE[backend]]
    if backend in MUTANT_PLANTED:
        return [MUTANT_PLANTED[backend][0]]
    clause = PLANTED[backend]
    return list(checks_for(clause if isinstance(clause, tuple) else (clause,)))


def record(names: Optional[list[str]] = None) -> dict[str, dict[str, list]]:
    """The verdicts of every planted backend (or of those ``names``) on the checks that should catch it."""
    found: dict[str, dict[str, list]] = {}
    for name, backend in sorted(BACKENDS.items()):
        if names and name not in names:
            continue
        if options_for(backend).get("profile") or options_for(backend).get("timeout_s"):
            continue  # a longer profile or a stuck call: too slow to run for every check
        for check in sorted(set(candidates(backend)) - RACING):
            found_now = verdict(backend, check)
            print(name, check, found_now, flush=True)
            if found_now is not None:
                found.setdefault(name, {})[check] = found_now
    return found


if __name__ == "__main__":
    chosen = sys.argv[1:]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        raise SystemExit(f"no planted backend named {', '.join(unknown)}")
    kept = {name: found for name, found in json.loads(RECORDED.read_text()).items() if name not in chosen}
    recorded = {**kept, **record(chosen)} if chosen else record()
    for name in chosen:
        if name not in recorded:
            print(f"{name}: no check fails it (nothing recorded)", flush=True)
    RECORDED.write_text(json.dumps(dict(sorted(recorded.items())), indent=1, ensure_ascii=False) + "\n")
