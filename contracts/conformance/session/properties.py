"""Running hypothesis inside a check: the run's seed, the profile's sizes, the smallest counterexample.

A property check hands a ``@given`` function to ``run_property``. The
function raises ``ClauseFailure`` on the example that breaks a clause;
hypothesis shrinks it, and the failure that comes out is the one of the
smallest example, with hypothesis's own report of it ("Falsifying
example: ...", or a state machine's steps) added to the counterexample.
No example database is written: a run leaves nothing behind.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

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


def with_report(counterexample: Optional[str], lines: list[str]) -> Optional[str]:
    """Return ``counterexample`` followed by hypothesis's report lines, if any."""
    report = "\n".join(line for line in lines if line.strip())
    if not report:
        return counterexample
    return f"{counterexample}\n{report}" if counterexample else report


def run_property(run_seed: int, test: Callable[[], None], clause_id: str, examples: int) -> None:
    """Run the ``@given`` function ``test`` with the run's seed; re-raise its smallest ``ClauseFailure``.

    ``CheckSkipped``, ``PreconditionFailed`` and ``SuiteError`` pass through; an error of hypothesis itself (a
    health check, a strategy that draws differently on replay) is a ``SuiteError``; any other exception passes
    through with hypothesis's report as notes, for the runner to tell the backend's fault from the suite's.
    """
    run_capturing(seed(run_seed)(property_settings(examples)(test)), clause_id)


def run_machine(run_seed: int, machine: type, clause_id: str, examples: int, steps: int) -> None:
    """Run the state machine class ``machine`` like ``run_property``; the counterexample lists its steps."""
    from hypothesis.stateful import run_state_machine_as_test

    seeded = seed(run_seed)(machine)
    run_capturing(lambda: run_state_machine_as_test(seeded, settings=property_settings(examples, steps)), clause_id)


def run_capturing(runnable: Callable[[], None], clause_id: str) -> None:
    """Call ``runnable`` (a hypothesis test), turning what comes out into a ``ClauseFailure`` with hypothesis's report."""
    with capture_hypothesis_report() as lines:
        try:
            runnable()
        except ClauseFailure as failure:
            lines.extend(getattr(failure, "__notes__", ()))  # hypothesis attaches the falsifying example here
            raise ClauseFailure(
                failure.clause_id, failure.message, with_report(failure.counterexample, lines)
            ) from None
        except (CheckSkipped, PreconditionFailed):
            raise
        except FlakyFailure as error:
            first = _first_clause_failure(error)
            if first is None:
                lines.extend(getattr(error, "__notes__", ()))
                fail(clause_id, f"{NOT_REPRODUCIBLE} ({error})", with_report(None, lines))
            lines.extend(getattr(first, "__notes__", ()))
            raise ClauseFailure(
                first.clause_id, f"{first.message} ({NOT_REPRODUCIBLE})", with_report(first.counterexample, lines)
            ) from None
        except SuiteError:
            raise
        except HypothesisException as error:  # hypothesis itself stopped: a health check, a flaky strategy
            lines.extend(getattr(error, "__notes__", ()))
            first = (str(error).strip().splitlines() or [""])[0]
            raise SuiteError(
                f"hypothesis stopped the check ({type(error).__name__}: {first})", with_report(None, lines)
            ) from None
        except Exception as error:  # whose fault it is (the backend's code or the suite's) is the runner's call
            for line in lines:
                error.add_note(line)
            raise


def _first_clause_failure(group: BaseException) -> Optional[ClauseFailure]:
    """Return the first ``ClauseFailure`` inside an exception group (nested groups included), or None."""
    for inner in getattr(group, "exceptions", ()):
        if isinstance(inner, ClauseFailure):
            return inner
        found = _first_clause_failure(inner)
        if found is not None:
            return found
    return None
