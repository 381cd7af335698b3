"""Clause verdicts from check outcomes.

A clause of a claimed level passes when at least one check of it ran to the
end, none found it broken, none was stopped by a broken setup and none broke
on an error of the suite itself; it is ``error`` (not judged, no verdict on
the backend) when a check of it broke that way and none found it broken; it
is skipped, with the reason, otherwise. A clause no check of its own saw broken
fails on what other checks' setups found (``outcome.needs``), so an
attribution never hides a failure.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any, Optional, Sequence

from hicache_spec import LEVELS
from hicache_spec.registry import describe_releases, holds_for
from hicache_spec.releases import SGLANG_RELEASES
from hicache_contracts.conformance.running.claims import LevelDecision
from hicache_contracts.conformance.framework import ClauseFailure
from hicache_contracts.conformance.levels import BACKEND_LEVELS, level_clauses
from hicache_contracts.conformance.reporting.report import (
    ERROR,
    FAIL,
    PASS,
    SKIP,
    CheckOutcome,
    ClauseVerdict,
    Failure,
    LevelVerdict,
)

__all__ = [
    "backend_frame",
    "clause_verdict",
    "configuration_refused",
    "error_reason",
    "not_applicable_verdicts",
    "raised_at",
    "setup_reason",
    "startup_verdicts",
    "suite_frames",
    "with_raised_at",
]

_NOT_THE_BACKEND = ("hicache_contracts", "hicache_spec", "hypothesis", "torch", "numpy", "_pytest", "pluggy")
"""Packages whose frames are never the backend's: the suite's own, and the libraries it runs on."""


def _suite_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib")}
    for name in _NOT_THE_BACKEND:
        module = sys.modules.get(name)
        location = getattr(module, "__file__", None)
        if location:
            roots.add(str(Path(location).resolve().parent))
    return tuple(sorted(root.rstrip("/") + "/" for root in roots))


def backend_frame(trace: Any) -> Optional[traceback.FrameSummary]:
    """Return the innermost frame of the traceback ``trace`` that runs the backend's code (any file outside the
    suite's packages, hypothesis, torch, numpy and the standard library), or None when none does."""
    roots = _suite_roots()
    for frame in reversed(traceback.extract_tb(trace)):
        filename = frame.filename
        if filename.startswith("<"):
            continue
        resolved = str(Path(filename).resolve())
        if not resolved.startswith(roots) and not filename.startswith(roots):
            return frame
    return None


def suite_frames(trace: Any, limit: int = 4) -> str:
    """The last ``limit`` frames of ``trace``, one line each (``file:line in function``), for an error's details."""
    frames = traceback.extract_tb(trace)[-limit:]
    return "\n".join(f"  {Path(item.filename).name}:{item.lineno} in {item.name}" for item in frames)


def raised_at(failure: BaseException) -> Optional[str]:
    """Where in the backend's code the exception behind ``failure`` was raised (a backend call that raised), as
    ``raised in the backend at FILE:LINE in FUNCTION: SOURCE``; None when no frame of the backend's raised it."""
    frame, cause = None, failure.__cause__ or failure.__context__
    while cause is not None and frame is None:  # the chain down to what the backend raised
        frame = backend_frame(cause.__traceback__)
        cause = cause.__cause__ or cause.__context__
    if frame is None:
        return None
    where = f"raised in the backend at {Path(frame.filename).name}:{frame.lineno} in {frame.name}"
    return f"{where}: {frame.line}" if frame.line else where


def with_raised_at(counterexample: Optional[str], failure: BaseException) -> Optional[str]:
    """``counterexample`` followed by ``raised_at(failure)``, when there is one."""
    line = raised_at(failure)
    if line is None:
        return counterexample
    return f"{counterexample}\n{line}" if counterexample else line


def error_reason(check: str) -> str:
    """The reason a clause of ``check`` was not judged: the suite itself broke in it."""
    return f"not judged: the suite itself broke in {check} (an error of the suite, no verdict on the backend)"


def setup_reason(root: str) -> str:
    """The reason a clause was not checked because its check's setup found ``root`` broken."""
    return f"not checked: its setup needs {root}, which failed (see {root})"


def startup_verdicts(failure: ClauseFailure) -> tuple[tuple[LevelVerdict, ...], tuple[ClauseVerdict, ...]]:
    """Return the level and clause verdicts of a run whose backend could not be built (``failure`` says why)."""
    levels = tuple(
        LevelVerdict(
            level,
            level == "core",
            "required" if level == "core" else "probed",
            None if level == "core" else "the backend could not be built",
            LEVELS[level],
        )
        for level in BACKEND_LEVELS
    )
    not_built = "not checked: the backend could not be built"
    verdicts = []
    for level in BACKEND_LEVELS:
        for item in level_clauses(level):
            if item.id == failure.clause_id and level == "core":
                failures = (Failure("startup", failure.message, failure.counterexample),)
                verdicts.append(ClauseVerdict(item.id, item.level, item.statement, FAIL, failures=failures))
            else:
                verdicts.append(ClauseVerdict(item.id, item.level, item.statement, SKIP, reason=not_built))
    return levels, tuple(verdicts)


def configuration_refused(message: str, counterexample: Optional[str], open_instances: int = 0) -> str:
    """``message``, naming the configuration when it says the backend could not be built for one it may not serve
    (an MLA model): one refusal of a whole configuration reads as one finding about that configuration. Any other
    construction failure says how many instances were open then (``open_instances``): the suite keeps them all."""
    if not message.startswith("building the backend raised "):
        return message
    if "is_mla_model=True" not in (counterexample or ""):
        if open_instances <= 0:
            return message
        return (
            f"{message}; {open_instances} other instance{'s' if open_instances != 1 else ''} of the backend were "
            "open then (the suite keeps every instance it builds open until the run ends: a backend allowing one "
            "open instance per configuration or store fails here)"
        )
    cause = message[len("building the backend raised ") :]
    return (
        f"the backend cannot be built for an MLA model (is_mla_model=True): it raised {cause}; a backend that does "
        "not serve MLA by design declares hicache_not_supported = ('mla',)"
    )


def not_applicable_verdicts(reason: str) -> tuple[tuple[LevelVerdict, ...], tuple[ClauseVerdict, ...]]:
    """Return the level and clause verdicts of a run whose configuration the backend declares it does not serve
    (``reason``, starting ``not applicable: declared``): nothing claimed, every clause skipped with the reason."""
    levels = tuple(LevelVerdict(level, False, "declared", reason, LEVELS[level]) for level in BACKEND_LEVELS)
    verdicts = tuple(
        ClauseVerdict(item.id, item.level, item.statement, SKIP, reason=reason)
        for level in BACKEND_LEVELS
        for item in level_clauses(level)
    )
    return levels, verdicts


def clause_verdict(
    item: Any,
    decision: LevelDecision,
    outcomes: Sequence[CheckOutcome],
    covered: set[str],
    release: Optional[str] = None,
) -> ClauseVerdict:
    """Return the verdict on clause ``item`` of a run that decided ``decision`` and saw ``outcomes``.

    ``covered``: the clause IDs some registered check names. ``release``: the pinned SGLang release the run
    holds, if any; a clause that does not hold for it is not applicable (the suite asks of a backend only what
    that release asks).
    """
    if release in SGLANG_RELEASES and not holds_for(item, release):
        return ClauseVerdict(
            item.id,
            item.level,
            item.statement,
            SKIP,
            reason=f"not applicable: not part of SGLang {release}'s contract ({item.id}: {describe_releases(item)})",
        )
    level_verdict = next(verdict for verdict in decision.verdicts if verdict.level == item.level)
    if not level_verdict.claimed:
        return ClauseVerdict(
            item.id,
            item.level,
            item.statement,
            SKIP,
            reason=f"level {item.level} not claimed: {level_verdict.reason}",
        )
    if item.level in decision.dishonoured:
        return ClauseVerdict(
            item.id,
            item.level,
            item.statement,
            FAIL,
            failures=(Failure("capabilities", f"level {item.level} {decision.dishonoured[item.level]}"),),
        )
    related = [outcome for outcome in outcomes if item.id in outcome.clauses or outcome.clause_id == item.id]
    errors = [outcome for outcome in related if outcome.status == ERROR]
    failures = tuple(
        Failure(outcome.check, outcome.message or "", outcome.counterexample)
        for outcome in related
        if outcome.status == FAIL and outcome.clause_id == item.id
    )
    if not failures:  # no check of its own saw it: what other checks' setups found is its failure
        found = [outcome for outcome in outcomes if outcome.needs == item.id]
        grouped: dict[str, list[CheckOutcome]] = {}  # one finding met by several checks' setups is one failure
        for outcome in found:
            grouped.setdefault(outcome.message or "", []).append(outcome)
        failures = tuple(
            Failure(
                ", ".join(names),
                f"found while setting up {', '.join(names)}: {message}",
                same[0].counterexample,
            )
            for message, same in grouped.items()
            for names in [[outcome.check for outcome in same]]
        )
        related += [outcome for outcome in found if outcome not in related]
    names = tuple(outcome.check for outcome in related)
    if failures:
        return ClauseVerdict(item.id, item.level, item.statement, FAIL, failures=failures, checks=names)
    if errors:  # a check of it broke before it could judge: no pass, and no verdict on the backend either
        return ClauseVerdict(
            item.id,
            item.level,
            item.statement,
            ERROR,
            reason="; ".join(dict.fromkeys(error_reason(outcome.check) for outcome in errors)),
            failures=tuple(Failure(outcome.check, outcome.message or "", outcome.counterexample) for outcome in errors),
            checks=names,
        )
    reasons = [setup_reason(outcome.needs) for outcome in related if outcome.needs is not None]
    if not reasons and any(outcome.passed(item.id) for outcome in related):
        return ClauseVerdict(item.id, item.level, item.statement, PASS, checks=names)
    for outcome in related:
        if outcome.needs is not None:
            continue
        if outcome.status == SKIP:
            reasons.append(outcome.message or "skipped")
        elif outcome.status == FAIL:
            reasons.append(f"not reached: {outcome.check} stopped at {outcome.clause_id}")
        elif outcome.status == PASS:
            reasons.append(f"not checked: {outcome.check} passed without running {item.id}'s assertions")
    if not related:
        reasons.append("not run in this selection of checks" if item.id in covered else "no check covers it")
    return ClauseVerdict(
        item.id, item.level, item.statement, SKIP, reason="; ".join(dict.fromkeys(reasons)), checks=names
    )
