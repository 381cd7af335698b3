"""Running hypothesis inside a check: the run's seed, the profile's sizes, the smallest counterexample.

A property check hands a ``@given`` function to ``run_property``. The
function raises ``ClauseFailure`` on the example that breaks a clause;
hypothesis shrinks it, and the failure that comes out is the one of the
smallest example, with hypothesis's own report of it ("Falsifying
example: ...", or a state machine's steps) added to the counterexample.
No example database is written: a run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional

from hypothesis import HealthCheck, Phase, Verbosity, seed, settings
from hypothesis.errors import FlakyFailure, HypothesisException

from hicache_contracts.conformance.framework import (
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    SuiteError,
    capture_hypothesis_report,
    fail,
)

__all__ = ["property_settings", "run_capturing", "run_machine", "run_property", "with_report"]

NOT_REPRODUCIBLE = "not reproducible: the backend answered differently when the same example was replayed"
"""Added to a failure that hypothesis saw once but not on replay (a backend whose answers vary from call to call)."""

SHRINK_CAP_S = 20.0
"""Seconds hypothesis may spend shrinking one failure; past them it reports the smallest example found so far."""

_SLOW_SHRINK = "Hypothesis has spent more than"
"""How hypothesis's own note on stopping a slow shrink begins; the suite says it in its own words instead."""


def shrink_note(cap_s: float) -> str:
    """What a counterexample says when shrinking it stopped at the cap."""
    return f"shrinking stopped after {cap_s:g} s (the suite's cap): this example may not be the smallest"


@contextlib.contextmanager
def shrinking_capped(cap_s: float) -> Iterator[None]:
    """Within the block, hypothesis stops shrinking a failure after ``cap_s`` seconds (its own cap is minutes)."""
    from hypothesis.internal.conjecture import engine

    saved = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if saved is None:  # a hypothesis without the cap: nothing to lower
        yield
        return
    engine.MAX_SHRINKING_SECONDS = cap_s  # type: ignore[assignment]  # hypothesis types it an int of seconds
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


def property_settings(examples: int, steps: Optional[int] = None) -> settings:
    """Return hypothesis settings for ``examples`` examples (and ``steps`` state-machine steps)."""
    extra: dict[str, Any] = {} if steps is None else {"stateful_step_count": steps}
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        verbosity=Verbosity.normal,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        **extra,
    )


def with_report(counterexample: Optional[str], lines: list[str], cap_s: float = SHRINK_CAP_S) -> Optional[str]:
    """Return ``counterexample`` followed by hypothesis's report lines, if any (its note on a slow shrink in the
    suite's words)."""
    shown = [shrink_note(cap_s) if _SLOW_SHRINK in line else line for line in lines]
    report = "\n".join(line for line in shown if line.strip())
    if not report:
        return counterexample
    return f"{counterexample}\n{report}" if counterexample else report


def run_property(
    run_seed: int, test: Callable[[], None], clause_id: str, examples: int, *, shrink_cap_s: float = SHRINK_CAP_S
) -> None:
    """Run the ``@given`` function ``test`` with the run's seed; re-raise its smallest ``ClauseFailure``.

    ``CheckSkipped``, ``PreconditionFailed`` and ``SuiteError`` pass through; an error of hypothesis itself (a
    health check, a strategy that draws differently on replay) is a ``SuiteError``; any other exception passes
    through with hypothesis's report as notes, for the runner to tell the backend's fault from the suite's.
    """
    run_capturing(seed(run_seed)(property_settings(examples)(test)), clause_id, shrink_cap_s=shrink_cap_s)


def run_machine(
    run_seed: int,
    machine: type,
    clause_id: str,
    examples: int,
    steps: int,
    *,
    shrink_cap_s: float = SHRINK_CAP_S,
) -> None:
    """Run the state machine class ``machine`` like ``run_property``; the counterexample lists its steps."""
    from hypothesis.stateful import run_state_machine_as_test

    seeded = seed(run_seed)(machine)
    run_capturing(
        lambda: run_state_machine_as_test(seeded, settings=property_settings(examples, steps)),
        clause_id,
        shrink_cap_s=shrink_cap_s,
    )


def run_capturing(runnable: Callable[[], None], clause_id: str, *, shrink_cap_s: float = SHRINK_CAP_S) -> None:
    """Call ``runnable`` (a hypothesis test), turning what comes out into a ``ClauseFailure`` with hypothesis's report;
    shrinking a failure stops after ``shrink_cap_s`` seconds."""
    with capture_hypothesis_report() as lines, shrinking_capped(shrink_cap_s):
        try:
            runnable()
        except ClauseFailure as failure:
            lines.extend(getattr(failure, "__notes__", ()))  # hypothesis attaches the falsifying example here
            raise ClauseFailure(
                failure.clause_id, failure.message, with_report(failure.counterexample, lines, shrink_cap_s)
            ) from None
        except (CheckSkipped, PreconditionFailed):
            raise
        except FlakyFailure as error:
            seen = _clause_failures(error)
            if not seen:
                lines.extend(getattr(error, "__notes__", ()))
                fail(clause_id, f"{NOT_REPRODUCIBLE} ({error})", with_report(None, lines, shrink_cap_s))
            first = seen[0]
            lines.extend(getattr(first, "__notes__", ()))
            raise ClauseFailure(
                first.clause_id,
                f"{first.message} ({NOT_REPRODUCIBLE}: {_both_outcomes(seen)})",
                with_report(first.counterexample, lines, shrink_cap_s),
            ) from None
        except SuiteError:
            raise
        except HypothesisException as error:  # hypothesis itself stopped: a health check, a flaky strategy
            lines.extend(getattr(error, "__notes__", ()))
            headline = (str(error).strip().splitlines() or [""])[0]
            raise SuiteError(
                f"hypothesis stopped the check ({type(error).__name__}: {headline})", with_report(None, lines)
            ) from None
        except Exception as error:  # whose fault it is (the backend's code or the suite's) is the runner's call
            for line in lines:
                error.add_note(line)
            raise


def _clause_failures(group: BaseException) -> list[ClauseFailure]:
    """Return the ``ClauseFailure``s inside an exception group (nested groups included), in order."""
    found: list[ClauseFailure] = []
    for inner in getattr(group, "exceptions", ()):
        if isinstance(inner, ClauseFailure):
            found.append(inner)
        else:
            found += _clause_failures(inner)
    return found


def _both_outcomes(seen: list[ClauseFailure]) -> str:
    """Both outcomes of the example: how it failed first, and what its replay did."""
    first = seen[0]
    replays = [item for item in seen[1:] if (item.clause_id, item.message) != (first.clause_id, first.message)]
    if not replays:
        return f"first it failed {first.clause_id}, then the same example passed"
    again = replays[0]
    return f"first it failed {first.clause_id}, then the same example failed {again.clause_id}: {again.message}"
