"""The engine scenarios as data, and how their checked traces fold into one result per clause.

``STANDARD_SCENARIOS`` — prefetch and backup, prefix None / [] / non-empty,
1 to 5 slices, base and hybrid pools, and the faults that stop IO early (a
partial hit, a short slice, a raising read, termination, a read that hangs
while the operation is terminated) — are plain ``EngineScenario`` values;
``hicache_contracts.engine.scenarios.check_engine`` runs them against any
controller and ``clause_results`` folds the checked traces into one
``ClauseVerdict`` per clause (the verdict every suite reports in). The reference controller runs them through the
same runner (``hicache_reference.engine_check``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from hicache_contracts.engine._report import TraceReport
from hicache_contracts.verdicts import FAIL, PASS, ClauseVerdict, Failure
from hicache_spec import clauses, compute_key_chain

__all__ = [
    "ANCHOR",
    "PAGE_SIZE",
    "STANDARD_SCENARIOS",
    "SWA_WINDOW",
    "EngineScenario",
    "clause_results",
]

PAGE_SIZE = 2
"""Tokens per page in the scenarios: small, so that 3 slices of 128 pages stay cheap."""
SWA_WINDOW = 4
"""N of the trailing-window sidecar of the hybrid scenarios."""
ANCHOR = compute_key_chain(tuple(range(1000, 1000 + 3 * PAGE_SIZE)), PAGE_SIZE)
"""The keys of three anchor pages: the non-empty prefix of the scenarios (PFX-10)."""
PREFIXES: dict[str, Optional[tuple[Any, ...]]] = {"none": None, "empty": (), "anchor": ANCHOR}
"""The three states of an operation's prefix (PFX-1)."""


_FAULTS = ("stored", "unreadable_from", "raise_on_read", "terminate_after_read", "hang_on_read")


@dataclass(frozen=True)
class EngineScenario:
    """One operation to run and check, and the faults scripted around it."""

    kind: str
    """``"prefetch"`` or ``"backup"``."""
    pages: int
    prefix: str = "anchor"
    """A key of PREFIXES: ``"none"``, ``"empty"`` or ``"anchor"``."""
    hybrid: bool = False
    """With a KV-derived indexer pool and a trailing-window SWA pool."""
    stored: Optional[int] = None
    """Pages present in the store (the chain's leading run); all of them when None."""
    unreadable_from: Optional[int] = None
    """Chain index from which batch_get_v1 reports False although the pages exist (a short slice)."""
    raise_on_read: Optional[int] = None
    """The batch_get_v1 call (from 0) that raises instead of reading."""
    terminate_after_read: Optional[int] = None
    """The batch_get_v1 call during which the prefetch is terminated: no later slice may be read."""
    hang_on_read: Optional[int] = None
    """The batch_get_v1 call (from 0) that blocks until the scenario has terminated the operation."""

    @property
    def chain(self) -> tuple[str, ...]:
        """The key chain of the operation's pages, after the anchor."""
        return compute_key_chain(tuple(range(self.pages * PAGE_SIZE)), PAGE_SIZE, ANCHOR[-1])

    @property
    def prefix_keys(self) -> Optional[tuple[Any, ...]]:
        return PREFIXES[self.prefix]

    def __str__(self) -> str:
        faults = [f"{name}={getattr(self, name)}" for name in _FAULTS if getattr(self, name) is not None]
        return " ".join(
            [self.kind, f"{self.pages} pages", f"prefix {self.prefix}", "hybrid" if self.hybrid else "base", *faults]
        )


def _standard_scenarios() -> tuple[EngineScenario, ...]:
    found = []
    for hybrid in (False, True):
        for prefix in PREFIXES:
            for pages in (1, 128, 129, 300):  # 1 page, 1 full slice, 2 and 3 slices
                found.append(EngineScenario("prefetch", pages, prefix, hybrid))
            for pages in (1, 129, 300):
                found.append(EngineScenario("backup", pages, prefix, hybrid))
        found += [
            EngineScenario("prefetch", 300, "anchor", hybrid, stored=200),  # a partial hit
            EngineScenario("prefetch", 300, "empty", hybrid, unreadable_from=150),  # a short slice
            EngineScenario("prefetch", 300, "anchor", hybrid, raise_on_read=1),  # a raising read
            EngineScenario("prefetch", 300, "empty", hybrid, terminate_after_read=0),  # termination
            EngineScenario("prefetch", 300, "anchor", hybrid, hang_on_read=1),  # terminated while hanging
        ]
    found += [EngineScenario("prefetch", 600, "anchor"), EngineScenario("backup", 600, "empty")]  # 5 slices
    return tuple(found)


STANDARD_SCENARIOS: tuple[EngineScenario, ...] = _standard_scenarios()
"""Every scenario ``check_engine`` runs: 28 base, 26 hybrid (54 operations)."""


def clause_results(checked_runs: Iterable[tuple[Any, TraceReport]]) -> list[ClauseVerdict]:
    """Fold ``(scenario, report)`` pairs into one ``ClauseVerdict`` per clause exercised, in registry order.

    The verdict is ``fail`` when any scenario broke the clause, with a
    ``Failure`` per violation (its ``check`` the scenario, its ``message``
    the violation and where it happened), else ``pass``; its ``checks`` are
    the scenarios that exercised it.
    """
    checked: dict[str, list[str]] = {}
    failures: dict[str, list[Failure]] = {}
    for scenario, report in checked_runs:
        for clause_id in dict.fromkeys(report.checked + report.violated):
            checked.setdefault(clause_id, []).append(str(scenario))
        for violation in report.violations:
            failures.setdefault(violation.clause, []).append(Failure(str(scenario), str(violation)))
    results = []
    for registered in clauses():
        if registered.id not in checked:
            continue
        found = tuple(failures.get(registered.id, ()))
        status = FAIL if found else PASS
        scenarios = tuple(dict.fromkeys(checked[registered.id]))
        results.append(
            ClauseVerdict(registered.id, registered.level, registered.statement, status, None, found, scenarios)
        )
    return results
