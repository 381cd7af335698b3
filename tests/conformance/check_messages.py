"""What each check, run alone, reports for each planted bug it catches: the recorded verdicts
``tests/conformance/check_messages.json`` holds, and the code that records them again. The planted
backends are those of ``planted_catalog.CATALOG``; each ``alone``/``only`` oracle of an entry says
whether its check's verdict is recorded.

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
from typing import Optional

from hicache_contracts.conformance import CHECKS, SuiteReport
from tests.conformance.helpers import checks_for, run
from tests.conformance.planted_catalog import BY_NAME, PlantedBackend

RECORDED = Path(__file__).with_name("check_messages.json")
RACING = frozenset(check.name for check in CHECKS if check.tier == "concurrency")


RUN_SPECIFIC = (
    (re.compile(r"\d+ of \d+ bytes differ \(first at byte \d+\)"), "<n> of <page> bytes differ"),
    (re.compile(r"<host pool of \d+ pages>"), "<host pool of <n> pages>"),
    (re.compile(r"(an? [a-z_]+ page is )\d+\)"), r"\1<page>)"),
    (re.compile(r"test-[0-9a-f]{32}"), "<store>"),
    (re.compile(r"[0-9a-fA-F]{64}"), "<hashed key>"),
    (re.compile(r"(run-|conform-)[0-9a-f]{10}"), r"\1<run>"),
    (re.compile(r" at 0x[0-9a-f]+"), ""),
    (re.compile(r"ReadOnlyMapping\((\{[^()]*\})\)"), r"\1"),
)
"""What differs between runs of the same check on the same bug: how many bytes of a page built from
fresh keys differ (and of how many: a sidecar page of SGLang's own host pool is larger than the stand-in's), the store's and the run's names, hashed keys and object addresses; and how an
extra_info mapping shows (read-only in the contract models, a plain dict in SGLang's own class)."""


def stable(text: Optional[str]) -> Optional[str]:
    """``text``'s first line with the run-specific parts replaced."""
    if text is None:
        return None
    line = text.split("\n", 1)[0]
    for pattern, replacement in RUN_SPECIFIC:
        line = pattern.sub(replacement, line)
    return line


def run_alone(entry: PlantedBackend, check: str) -> SuiteReport:
    """The suite, ``check`` alone, on ``entry``'s backend with its options."""
    return run(entry.backend, checks=(check,), **entry.options)


def verdict_of(report: SuiteReport, check: str) -> Optional[list]:
    """``[clause, message, counterexample's first line]`` of ``check`` in ``report``; None if it did not fail."""
    outcome = next(item for item in report.sections[0].checks if item.check == check)
    if outcome.status != "fail":
        return None
    return [outcome.clause_id, stable(outcome.message), stable(outcome.counterexample)]


def candidates(entry: PlantedBackend) -> list[str]:
    """The checks that should catch ``entry``: those of its clause(s) when it names no check, or its own."""
    if entry.has("caught"):
        return list(checks_for(entry.clauses))
    return [oracle.check for oracle in entry.alone() if oracle.check is not None]


def record(names: Optional[list[str]] = None) -> dict[str, dict[str, list]]:
    """The verdicts of every planted backend (or of those ``names``) on the checks that should catch it."""
    found: dict[str, dict[str, list]] = {}
    for name, entry in sorted(BY_NAME.items()):
        if names and name not in names:
            continue
        if entry.options.get("profile") or entry.options.get("timeout_s"):
            continue  # a longer profile or a stuck call: too slow to run for every check
        for check in sorted(set(candidates(entry)) - RACING):
            found_now = verdict_of(run_alone(entry, check), check)
            print(name, check, found_now, flush=True)
            if found_now is not None:
                found.setdefault(name, {})[check] = found_now
    return found


if __name__ == "__main__":
    chosen = sys.argv[1:]
    unknown = sorted(set(chosen) - set(BY_NAME))
    if unknown:
        raise SystemExit(f"no planted backend named {', '.join(unknown)}")
    kept = {name: found for name, found in json.loads(RECORDED.read_text()).items() if name not in chosen}
    recorded = {**kept, **record(chosen)} if chosen else record()
    for name in chosen:
        if name not in recorded:
            print(f"{name}: no check fails it (nothing recorded)", flush=True)
    RECORDED.write_text(json.dumps(dict(sorted(recorded.items())), indent=1, ensure_ascii=False) + "\n")
