"""How a conformance check is written: a function of the suite context, tagged with its clause IDs.

    @conformance_check("BE-2")
    def batch_exists_counts_the_leading_run(suite: SuiteContext) -> None:
        \"\"\"batch_exists returns the leading run of stored keys, in pages.\"\"\"
        ...
        expect(count == leading, "BE-2", "batch_exists miscounted", counterexample=...)

A check ends in one of three ways:

- it returns: every clause it names holds, as far as it looked;
- it raises ``ClauseFailure``: the clause named in the failure is broken, and
  the failure carries the smallest counterexample the check found;
- it raises ``CheckSkipped``: the check could not look (the reason says why);
- it raises ``PreconditionFailed``: the check's shared setup (pages written
  and read back through the suite's helpers) found another clause broken,
  the root cause; the check's own clauses are reported as not checked,
  pointing at that clause. A ``ClauseFailure`` on a clause the check does
  not name is treated the same way.

Any other exception out of a check is reported as a failure of its first
clause, with the exception as the message.

A backend call that does not return within the run's ``--timeout`` raises
``CallTimedOut`` (a ``ClauseFailure`` of the clause the call serves): the
check fails on it, and the run stops cleanly there, every later check
reported as not run, because a backend stuck in one call may be stuck for
every other.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, NoReturn, Optional

from hicache_spec import clause as lookup_clause
from hicache_contracts.conformance.levels import level_of

__all__ = [
    "CHECKS",
    "Check",
    "CallTimedOut",
    "CheckSkipped",
    "ClauseFailure",
    "PreconditionFailed",
    "SuiteError",
    "capture_hypothesis_report",
    "TIERS",
    "check_named",
    "ordered_checks",
    "conformance_check",
    "expect",
    "fail",
]


class _ClauseError(Exception):
    """What both clause exceptions carry: the clause, the message and the counterexample; pickled by them."""

    _shown = "[{clause_id}] {message}"
    """The exception's text."""

    def __init__(self, clause_id: str, message: str, counterexample: Optional[str] = None) -> None:
        lookup_clause(clause_id)  # an unknown ID is a bug of the suite: fail loudly
        self.clause_id = clause_id
        self.message = message
        self.counterexample = counterexample
        super().__init__(self._shown.format(clause_id=clause_id, message=message))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.clause_id, self.message, self.counterexample))


class ClauseFailure(_ClauseError, AssertionError):
    """A backend broke a clause; ``counterexample`` is the smallest input the check found that shows it."""


class CallTimedOut(ClauseFailure):
    """A backend call did not return within the run's deadline; ``call`` shows it as the check made it."""

    def __init__(self, clause_id: str, call: str, timeout_s: float) -> None:
        self.call = call
        self.timeout_s = timeout_s
        super().__init__(
            clause_id,
            f"{call} did not return within {timeout_s:g} s",
            f"{call} -> (no return within {timeout_s:g} s; the run stopped here)",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.clause_id, self.call, self.timeout_s))


class CheckSkipped(Exception):
    """A check could not look at what it checks; the message says why."""


class PreconditionFailed(_ClauseError):
    """A check's setup found ``clause_id`` broken (the root cause), so the check could not look at its own clauses."""

    _shown = "setup needs [{clause_id}]: {message}"


class SuiteError(Exception):
    """The suite itself broke while judging a check (its own bug, a hypothesis health-check or flakiness error):
    reported with status ``error``, never as a verdict on the backend; ``details`` shows what it was doing."""

    def __init__(self, message: str, details: Optional[str] = None) -> None:
        self.message = message
        self.details = details
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.details))


def fail(clause_id: str, message: str, counterexample: Optional[str] = None) -> NoReturn:
    """Raise ``ClauseFailure``."""
    raise ClauseFailure(clause_id, message, counterexample)


_asserted: list[set[str]] = [set()]


def record_assertions() -> set[str]:
    """Start a fresh record of the clause IDs whose ``expect`` runs from now on, and return it."""
    _asserted[0] = set()
    return _asserted[0]


def expect(condition: Any, clause_id: str, message: str, counterexample: Optional[str] = None) -> None:
    """Raise ``ClauseFailure`` unless ``condition`` holds (the clause is recorded as asserted either way)."""
    _asserted[0].add(clause_id)
    if not condition:
        raise ClauseFailure(clause_id, message, counterexample)


@dataclass(frozen=True)
class Check:
    """One check of the suite."""

    name: str
    """Stable name, used by ``--check`` and as the pytest item name."""
    clauses: tuple[str, ...]
    """The clause IDs it checks, the main one first."""
    requires: tuple[str, ...]
    """Levels that must be claimed for it to run."""
    function: Callable[[Any], None]
    """The check itself: takes the ``SuiteContext``."""
    tier: str = "examples"
    """``examples`` (chosen or generated inputs), ``stateful`` or ``concurrency``: the order of the run."""

    @property
    def summary(self) -> str:
        """The first line of the check's docstring."""
        return (self.function.__doc__ or self.name).strip().splitlines()[0]

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels of its clauses, in first-seen order."""
        return tuple(dict.fromkeys(level_of(clause_id) for clause_id in self.clauses))


CHECKS: list[Check] = []
"""Every registered check, in registration order (the order of the run)."""


TIERS: tuple[str, ...] = ("examples", "stateful", "concurrency")
"""Check tiers, in run order."""


def conformance_check(
    *clause_ids: str, requires: Optional[tuple[str, ...]] = None, tier: str = "examples"
) -> Callable[..., Any]:
    """Register the decorated function as a check of ``clause_ids``.

    ``requires`` defaults to the levels of the clauses: the check runs only
    when all of them are claimed. A check that serves several levels (it
    adapts to what is claimed) names fewer.
    """
    if not clause_ids:
        raise ValueError("conformance_check.clause_ids: must name at least one clause (got ())")
    for clause_id in clause_ids:
        level_of(clause_id)
    if tier not in TIERS:
        raise ValueError(f"conformance_check.tier: must be one of {list(TIERS)} (got {tier!r})")

    def register(function: Callable[[Any], None]) -> Callable[[Any], None]:
        name = function.__name__
        if any(existing.name == name for existing in CHECKS):
            raise ValueError(f"conformance_check.name: must be unique (got {name!r})")
        levels = tuple(dict.fromkeys(level_of(clause_id) for clause_id in clause_ids))
        CHECKS.append(Check(name, tuple(clause_ids), requires if requires is not None else levels, function, tier))
        return function

    return register


def ordered_checks() -> list[Check]:
    """Return every check in run order: by tier, then by the level of its first clause, then as registered."""
    from hicache_contracts.conformance.levels import BACKEND_LEVELS

    return sorted(CHECKS, key=lambda item: (TIERS.index(item.tier), BACKEND_LEVELS.index(item.levels[0])))


def check_named(name: str) -> Check:
    """Return the registered check called ``name``; raise ValueError naming the known ones otherwise."""
    for item in CHECKS:
        if item.name == name:
            return item
    raise ValueError(f"checks: must name registered checks (got {name!r}; see --list-checks)")


@contextlib.contextmanager
def capture_hypothesis_report() -> Iterator[list[str]]:
    """Collect what hypothesis reports (the falsifying example, the steps of a state machine) into a list."""
    from hypothesis.reporting import with_reporter

    lines: list[str] = []
    with with_reporter(lambda text: lines.append(str(text))):
        yield lines
