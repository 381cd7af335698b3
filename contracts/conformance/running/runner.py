"""Running the suite: decide what the backend claims, run every check, turn outcomes into clause verdicts.

    run_suite(factory, options)        -> SuiteReport   one backend

(``run_reference_suite``, the reference backends, is ``hicache_reference.main_job``'s.)

What a backend claims is ``decide_levels``'s (``hicache_contracts.conformance.running.claims``).

Every backend call runs under the run's deadline (``--timeout``, per call).
A call past it fails its check's clause ("did not return within T s") and
the run stops there: every later check is reported as not run, naming that
call, and the report is written as usual.

A failure carries, below its counterexample, the clause's rationale, the
check's last backend calls with what they returned, and a replay command
(``hicache-conform run ... --check NAME --seed S``).

How outcomes become clause verdicts is ``hicache_contracts.conformance.running.verdicts``'s.

Root causes: a check whose setup found another clause broken (pages written
through the suite's helpers do not read back, a v1 result of the wrong
shape: ``PreconditionFailed``, or a ``ClauseFailure`` on a clause the check
does not name) does not fail its own clauses; they are skipped with
``not checked: its setup needs BE-17, which failed (see BE-17)``. The root
clause fails through its own check; should that check not have run or not
have seen it, the setup's finding is reported on the root clause instead, so
an attribution never hides a failure.
"""

from __future__ import annotations

import json
import time
import traceback
from typing import Any, Callable, Optional

from hicache_spec import clause as lookup_clause
from hicache_contracts.capabilities import Capabilities, declared_levels, detect_capabilities
from hicache_contracts.conformance import checks as _checks  # noqa: F401  (registers the checks, in order)
from hicache_contracts.sglang_release import describe_choice, describe_engine, release_of
from hicache_contracts.conformance.running.claims import (
    ALWAYS_PROBED,
    LevelDecision,
    decide_levels,
    declared_not_supported,
    not_applicable,
)
from hicache_contracts.conformance.session.context import Session, SuiteContext
from hicache_contracts.conformance.framework import (
    CallTimedOut,
    Check,
    CheckSkipped,
    ClauseFailure,
    PreconditionFailed,
    SuiteError,
    check_named,
    ordered_checks,
)
from hicache_contracts.conformance.levels import BACKEND_LEVELS, level_clauses, level_of
from hicache_contracts.conformance.session import deadline as interrupts
from hicache_contracts.conformance.session.loading import BackendFactory, resolve_factory
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.conformance.reporting.report import (
    ERROR,
    FAIL,
    PASS,
    SKIP,
    CheckOutcome,
    ReportSection,
    SuiteReport,
)
from hicache_contracts.conformance.running.verdicts import (
    backend_frame,
    clause_verdict,
    configuration_refused,
    not_applicable_verdicts,
    setup_reason,
    startup_verdicts,
    raised_at,
    suite_frames,
    with_raised_at,
)
from hicache_contracts.conformance.reporting.version import tool_version

__all__ = [
    "ALWAYS_PROBED",
    "Progress",
    "SuiteRunner",
    "decide_levels",
    "run_suite",
    "setup_reason",
    "tool_version",
]

Progress = Callable[[int, int, Check, CheckOutcome], None]
"""Called after each check: ``(position from 1, total, check, outcome)``."""

Starting = Callable[[int, int, Check], None]
"""Called before each check: ``(position from 1, total, check)`` (the live line)."""


class SuiteRunner:
    """One conformance run against one backend: ``start``, ``run_check`` per check, ``section``, ``close``."""

    def __init__(self, factory: Any, options: Optional[SuiteOptions] = None, *, title: Optional[str] = None) -> None:
        self.factory: BackendFactory = resolve_factory(factory)
        self.options = options or SuiteOptions()
        self.title = title or f"backend {self.factory.name}"
        self.session = Session(self.factory, self.options)
        self.context: Optional[SuiteContext] = None
        self.decision: Optional[LevelDecision] = None
        self.startup_failure: Optional[ClauseFailure] = None
        self.outcomes: list[CheckOutcome] = []
        self.capabilities: Optional[Capabilities] = None
        self._started = time.monotonic()
        self._started_up = False
        self.run_notes: list[str] = []
        """What checks tell the report's notes (a budget scaled to the backend's call time, say)."""
        self.not_supported: tuple[str, ...] = ()
        """The configurations the backend declares it does not serve (``hicache_not_supported``)."""
        self.run_not_applicable: Optional[str] = None
        """Why no check applies: the run's layout or model kind is one the backend declares it does not serve."""
        self.close_problems: list[str] = []
        """What the backend raised while the run cleared and closed its instances (shown as notes)."""

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Build a probe instance, detect capabilities, decide the claimed levels."""
        if self._started_up:
            return
        self._started_up = True
        klass = self.factory.backend_class
        try:
            self.not_supported = declared_not_supported(klass)
            self.run_not_applicable = not_applicable("", self.not_supported, self.options.layout, self.options.kind)
            if self.run_not_applicable is not None:
                return  # nothing to build: the backend says it does not serve this run's configuration
            declared = self.options.levels or (None if klass is None else declared_levels(klass))
            builder = self.session.instances(register_v2=False)
            probe = builder.build(
                builder.config(model_name=self.session.names.namespace("probe")), pages=2, v2=False, tag="probe"
            )
            self.capabilities = self.session.calls.untraced(
                "BE-18",
                "probing the methods with empty inputs (batch_exists([]), batch_get_v1([], ...), ...)",
                detect_capabilities,
                probe.backend,
            )
            if declared is None:
                declared = self.capabilities.declared
        except ClauseFailure as failure:
            self.startup_failure = failure
            return
        except ValueError as error:  # a malformed hicache_levels or hicache_not_supported
            self.startup_failure = ClauseFailure("BE-1", str(error))
            return
        except BaseException as error:  # SystemExit, CancelledError, ... out of the constructor or a probe
            if isinstance(error, KeyboardInterrupt) and not interrupts.raised_by_backend():
                raise
            self.startup_failure = ClauseFailure("BE-1", f"starting the run stopped on {type(error).__name__}: {error}")
            return
        self.decision = decide_levels(self.capabilities, declared, self.factory.not_asked)
        may_evict = self.options.may_evict
        if may_evict is None:
            may_evict = bool(getattr(klass, "hicache_may_evict", False))
        self.context = SuiteContext(self.session, claimed=self.decision.claimed, may_evict=may_evict)
        self.context.run_notes = self.run_notes  # type: ignore[attr-defined]  # what checks tell the report

    def close(self) -> None:
        """Clear and close every instance the run built; whatever the backend raises is a note of the report."""
        try:
            self.session.close()
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt) and not interrupts.raised_by_backend():
                raise
            self.close_problems.append(f"clearing and closing the instances stopped on {type(error).__name__}: {error}")

    def __enter__(self) -> SuiteRunner:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ------------------------------------------------------------ checks
    def selected_checks(self) -> list[Check]:
        """The checks this run executes: all, or those named in ``options.checks``."""
        if self.options.checks is None:
            return ordered_checks()
        return [check_named(name) for name in self.options.checks]

    def run_check(self, check: Check) -> CheckOutcome:
        """Run one check (or decide why it cannot run) and remember its outcome."""
        self.start()
        outcome = self._outcome_of(check)
        self.outcomes.append(outcome)
        return outcome

    def _outcome_of(self, check: Check) -> CheckOutcome:
        if self.startup_failure is not None:
            failure = self.startup_failure
            if any(outcome.status == FAIL for outcome in self.outcomes):  # one cause, one failure: told once
                return CheckOutcome(
                    check.name,
                    check.clauses,
                    SKIP,
                    message=f"not run: the backend could not be built (see {failure.clause_id})",
                )
            return CheckOutcome(
                check.name,
                check.clauses,
                FAIL,
                failure.clause_id,
                f"the backend could not be built: {failure.message}",
                failure.counterexample,
            )
        if self.run_not_applicable is not None:
            return CheckOutcome(check.name, check.clauses, SKIP, message=self.run_not_applicable)
        decision, context = self.decision, self.context
        if decision is None or context is None:  # start() sets both unless the backend could not be built
            raise RuntimeError("SuiteRunner.start: must decide the levels before a check runs")
        hung = self.session.calls.timed_out
        if hung is not None:
            return CheckOutcome(
                check.name,
                check.clauses,
                SKIP,
                message=f"not run: the run stopped after "
                f"{hung.call} did not return within {hung.timeout_s:g} s (see {hung.clause_id})",
            )
        unclaimed = [level for level in check.requires if level not in decision.claimed]
        if unclaimed:
            level = unclaimed[0]
            why = decision.dishonoured.get(level) or "not claimed"
            return CheckOutcome(check.name, check.clauses, SKIP, message=f"level {level} {why}")
        declared = not_applicable(check.name, self.not_supported, self.options.layout, self.options.kind)
        if declared is not None:
            return CheckOutcome(check.name, check.clauses, SKIP, message=declared)
        started = time.monotonic()
        context.calls.begin_check()
        try:
            check.function(context)
        except CallTimedOut as failure:  # fails here, whichever clause the stuck call served
            clause_id = failure.clause_id if failure.clause_id in check.clauses else check.clauses[0]
            return CheckOutcome(
                check.name,
                check.clauses,
                FAIL,
                clause_id,
                failure.message,
                self._actionable(check, clause_id, failure.counterexample),
                time.monotonic() - started,
            )
        except PreconditionFailed as blocked:
            return self._blocked(check, blocked, time.monotonic() - started)
        except ClauseFailure as failure:
            if failure.clause_id not in check.clauses:
                return self._blocked(check, failure, time.monotonic() - started)
            return CheckOutcome(
                check.name,
                check.clauses,
                FAIL,
                failure.clause_id,
                failure.message,
                self._actionable(check, failure.clause_id, failure.counterexample, raised_at(failure)),
                time.monotonic() - started,
            )
        except CheckSkipped as skipped:
            return CheckOutcome(
                check.name, check.clauses, SKIP, message=str(skipped), duration_s=time.monotonic() - started
            )
        except SuiteError as error:
            return self._suite_error(check, error.message, error.details, time.monotonic() - started)
        except Exception as error:  # the suite must report, never crash, whatever the backend does
            return self._stopped_on(check, error, started)
        except BaseException as error:  # SystemExit, CancelledError, GeneratorExit: the backend's, never the run's end
            if isinstance(error, KeyboardInterrupt) and not interrupts.raised_by_backend():
                raise  # Ctrl-C: the caller ends the run with the partial report
            return self._stopped_on(check, error, started)
        asserted = tuple(item for item in check.clauses if item in context.calls.asserted)
        return CheckOutcome(check.name, check.clauses, PASS, duration_s=time.monotonic() - started, asserted=asserted)

    def _stopped_on(self, check: Check, error: BaseException, started: float) -> CheckOutcome:
        """The outcome of a check that ``error`` stopped: a failure of its first claimed clause, naming the
        backend's frame that raised it; an ``Exception`` raised by no frame of the backend's is an error of the
        suite itself (no verdict on the backend)."""
        primary = next((item for item in check.clauses if level_of(item) in self._decided().claimed), check.clauses[0])
        frames = traceback.extract_tb(error.__traceback__)
        where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
        notes = "\n".join(str(note) for note in getattr(error, "__notes__", ()) if str(note).strip()) or None
        frame = backend_frame(error.__traceback__)
        if frame is None and isinstance(error, Exception):
            details = "\n".join(
                part for part in (notes, "where the suite broke:", suite_frames(error.__traceback__)) if part
            )
            return self._suite_error(
                check, f"{type(error).__name__}: {error}{where}", details, time.monotonic() - started
            )
        if frame is not None:
            where = f" (in the backend's {frame.name}, {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
        return CheckOutcome(
            check.name,
            check.clauses,
            FAIL,
            primary,
            f"the check stopped on {type(error).__name__}: {error}{where}",
            self._actionable(check, primary, notes),
            time.monotonic() - started,
        )

    def _suite_error(self, check: Check, message: str, details: Optional[str], duration_s: float) -> CheckOutcome:
        """The outcome of a check the suite itself broke in: status error, no clause, no verdict on the backend."""
        lines = [details] if details else []
        calls = list(self.session.calls.transcript)
        if calls:
            lines.append(f"last backend calls ({len(calls)}, oldest first):")
            lines += [f"  {call}" for call in calls]
        lines.append(f"replay: {self.replay_command(check)}")
        return CheckOutcome(
            check.name,
            check.clauses,
            ERROR,
            None,
            f"the suite itself broke in {check.name}: {message}",
            "\n".join(lines),
            duration_s,
        )

    def replay_command(self, check: Check) -> str:
        """Return the command that reruns ``check`` alone with this run's seed and settings."""
        options = self.options
        parts = ["hicache-conform run", f"--backend {self.factory.name}"]
        if self.factory.extra_config:  # secrets in it are redacted wherever a report is shown
            try:
                parts.append(f"--extra-config '{json.dumps(dict(self.factory.extra_config), sort_keys=True)}'")
            except (TypeError, ValueError):
                parts.append("--extra-config '<the same extra config>'")
        if options.levels is not None:
            parts.append(f"--levels {','.join(options.levels)}")
        for flag, value, default in (
            ("--profile", options.profile, "standard"),
            ("--page-size", options.page_size, 64),
            ("--layout", options.layout, "layer_first"),
            ("--kind", options.kind, "mha"),
        ):
            if value != default:
                parts.append(f"{flag} {value}")
        if options.may_evict:
            parts.append("--may-evict")
        if options.timeout_s != 60.0:
            parts.append(f"--timeout {options.timeout_s:g}")
        parts += [f"--check {check.name}", f"--seed {self.session.seed}"]
        return " ".join(parts)

    def _actionable(
        self, check: Check, clause_id: str, counterexample: Optional[str], raised: Optional[str] = None
    ) -> str:
        """Return ``counterexample`` followed by the clause's rationale, where the backend's code raised (``raised``),
        the check's last calls and the replay."""
        lines = [counterexample] if counterexample else []
        rationale = lookup_clause(clause_id).rationale
        if rationale:
            lines.append(f"why it matters: {' '.join(rationale.split())}")
        if raised:
            lines.append(raised)
        calls = list(self.session.calls.transcript)
        if calls:
            lines.append(f"last backend calls ({len(calls)}, oldest first):")
            lines += [f"  {call}" for call in calls]
        lines.append(f"replay: {self.replay_command(check)}")
        return "\n".join(lines)

    def _blocked(self, check: Check, finding: Any, duration_s: float) -> CheckOutcome:
        """The outcome of a check whose setup found ``finding.clause_id`` broken.

        A failure of one of the check's own clauses is its failure. A root
        clause of an unclaimed level could not be reported failed, so the
        finding fails the check's first claimed clause instead.
        """
        root = finding.clause_id
        if root in check.clauses:
            return CheckOutcome(
                check.name,
                check.clauses,
                FAIL,
                root,
                finding.message,
                with_raised_at(finding.counterexample, finding),
                duration_s,
            )
        decision = self._decided()
        if level_of(root) not in decision.claimed and level_of(root) not in decision.dishonoured:
            primary = next((item for item in check.clauses if level_of(item) in decision.claimed), check.clauses[0])
            return CheckOutcome(
                check.name,
                check.clauses,
                FAIL,
                primary,
                f"its setup found {root} broken: {finding.message}",
                finding.counterexample,
                duration_s,
            )
        return CheckOutcome(
            check.name,
            check.clauses,
            SKIP,
            message=configuration_refused(finding.message, finding.counterexample, len(self.session.built.instances)),
            counterexample=finding.counterexample,
            duration_s=duration_s,
            needs=root,
        )

    def _decided(self) -> LevelDecision:
        """The level decision, which ``start`` makes unless the backend could not be built."""
        if self.decision is None:
            raise RuntimeError("SuiteRunner.start: must decide the levels first")
        return self.decision

    def section_if_stopped(self, check: Optional[Check], reason: str) -> ReportSection:
        """The section as it would read were the run to end now for ``reason`` (the isolated command keeps the
        latest, for a backend that ends or blocks the process running it): while the backend is being built, a
        startup failure (BE-1); during ``check``, a failure of that check, when it would run; else what ran."""
        if self.decision is None and self.startup_failure is None and getattr(self, "run_not_applicable", None) is None:
            saved = self.startup_failure
            self.startup_failure = ClauseFailure("BE-1", f"the run stopped while the backend was being built: {reason}")
            try:
                return self.section()
            finally:
                self.startup_failure = saved
        if check is None or not self._would_run(check):
            return self.section()
        primary = next((item for item in check.clauses if level_of(item) in self._decided().claimed), check.clauses[0])
        self.outcomes.append(
            CheckOutcome(check.name, check.clauses, FAIL, primary, f"the run stopped during this check: {reason}")
        )
        try:
            return self.section()
        finally:
            self.outcomes.pop()

    def _would_run(self, check: Check) -> bool:
        """Whether ``check`` would call the backend now (the runner decides the other checks without it)."""
        decision = self.decision
        return (
            self.startup_failure is None
            and decision is not None
            and self.context is not None
            and self.session.calls.timed_out is None
            and all(level in decision.claimed for level in check.requires)
        )

    def root_failed(self, clause_id: str) -> bool:
        """Whether a check run so far failed ``clause_id`` itself (not only found it broken in its setup)."""
        return any(outcome.status == FAIL and outcome.clause_id == clause_id for outcome in self.outcomes)

    def run_all(self, progress: Optional[Progress] = None, starting: Optional[Starting] = None) -> ReportSection:
        """Run every selected check in order; return the section."""
        self.start()
        checks = self.selected_checks()
        for position, check in enumerate(checks, start=1):
            if starting is not None:
                starting(position, len(checks), check)
            outcome = self.run_check(check)
            if progress is not None:
                progress(position, len(checks), check, outcome)
        return self.section()

    # ------------------------------------------------------------ verdicts
    def section(self) -> ReportSection:
        """Return the report section of what ran so far."""
        session = self.session
        sglang = session.wire.sglang
        release = None if sglang is None else (release_of(sglang) or "installed")
        options = dict(
            self.options.as_dict(),
            seed=session.seed,
            run_namespace=session.model_name,
            sglang_objects=sglang is not None,
            sglang_release=release,
            not_supported=list(self.not_supported),
        )
        notes = [
            f"run namespace {session.model_name} (everything written is under it and cleared at the end)",
            describe_choice(release),
            describe_engine(release, self.factory.engine),
        ]
        notes += self.run_notes
        notes += session.built.cleanup_notes
        notes += self.close_problems
        if self.startup_failure is not None:
            levels, verdicts = startup_verdicts(self.startup_failure)
        elif self.run_not_applicable is not None:
            levels, verdicts = not_applicable_verdicts(self.run_not_applicable)
        else:
            decision = self._decided()
            covered = {clause_id for check in ordered_checks() for clause_id in check.clauses}
            levels = decision.verdicts
            verdicts = tuple(
                clause_verdict(item, decision, self.outcomes, covered, release)
                for level in BACKEND_LEVELS
                for item in level_clauses(level)
            )
        return ReportSection(
            self.title,
            self.factory.name,
            levels,
            verdicts,
            tuple(self.outcomes),
            options,
            tuple(notes),
            time.monotonic() - self._started,
        )


# ---------------------------------------------------------------- entry points
def run_suite(
    factory: Any,
    options: Optional[SuiteOptions] = None,
    *,
    title: Optional[str] = None,
    progress: Optional[Progress] = None,
    starting: Optional[Starting] = None,
) -> SuiteReport:
    """Run the backend suite against one backend and return the report (one section).

    ``factory`` is a ``BackendFactory``, a backend class (built with no extra
    config) or a ``"module:Class"`` string.
    """
    with SuiteRunner(factory, options, title=title) as runner:
        runner.run_all(progress, starting)
    return SuiteReport((runner.section(),))
