"""The suite as pytest items: ``pytest --hicache-backend my_pkg.store:MyStore`` (entry point ``hicache``).

Two ways in:

1. Options. ``--hicache-backend MODULE:CLASS`` (or ``--hicache-extra-config``
   holding ``module_path`` and ``class_name``) adds one item per check,
   ``hicache-conform::hicache[<check name>]``, after the tests pytest
   collected (they are counted in "collected N items"); ``-k`` selects among
   them as usual. An item ID given as an argument runs that check alone
   (``pytest --hicache-backend ... "hicache-conform::hicache[batch_exists_has_no_side_effects]"``),
   and ``hicache[<clause ID>]`` runs every check of that clause.

2. A fixture. A vendor's ``conftest.py`` defines a session-scoped
   ``hicache_backend_factory`` fixture (a ``BackendFactory``, a class, or a
   ``"module:Class"`` string) and a test module imports the test::

       from hicache_contracts.conformance.pytest_plugin import test_hicache_conformance  # noqa: F401

   which is parametrized with every check.

Either way each item carries ``@pytest.mark.clause(...)`` with its clause IDs,
a check that cannot look is skipped with the reason (the skip line points at
the check's own source), a failure shows the
clause, its statement and the smallest counterexample, a check whose setup
found another clause broken is skipped pointing at it when that clause
failed earlier in the session and fails on it otherwise, and the clause table
is printed at the end of the session. With none of the options and no
import, the plugin adds nothing: it only registers its options and the
``clause`` marker (with the same text as any project that registers it).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Iterator, Optional

import pytest

from hicache_spec import clause as lookup_clause
from hicache_contracts.sglang_release import ReleaseError, resolve_release
from hicache_contracts.conformance.framework import Check, ordered_checks
from hicache_contracts.conformance.levels import parse_levels
from hicache_contracts.conformance.session.loading import BackendFactory, parse_extra_config, resolve_factory
from hicache_contracts.conformance.session.options import PROFILES, SuiteOptions
from hicache_contracts.conformance.reporting.report import ERROR, FAIL, SKIP, CheckOutcome, SuiteReport
from hicache_contracts.conformance.running.runner import SuiteRunner, setup_reason
from hicache_contracts.pytest_items import CommandLineItems, SuiteCollector, SuiteFailure, SuiteItem, parametrize

__all__ = [
    "ConformanceFailure",
    "ConformanceItem",
    "ConformanceSuite",
    "SUITE_NODE",
    "hicache_backend_factory",
    "hicache_options",
    "hicache_runner",
    "test_hicache_conformance",
]

SUITE_NODE = "hicache-conform"
"""The node the command-line items hang under: their IDs read ``hicache-conform::hicache[<check name>]``."""

_ITEMS = CommandLineItems[SuiteRunner](SUITE_NODE, "hicache")


class ConformanceFailure(SuiteFailure):
    """A check found a clause broken; the message holds the clause, its statement and the counterexample."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hicache", "HiCache backend conformance")
    group.addoption(
        "--hicache-backend", metavar="MODULE:CLASS", help="run the backend conformance suite against this backend class"
    )
    group.addoption(
        "--hicache-extra-config",
        metavar="JSON|@FILE",
        help="the backend's extra config (may hold module_path and class_name)",
    )
    group.addoption("--hicache-levels", metavar="LEVEL,...", help="levels the backend claims (default: probed)")
    group.addoption("--hicache-profile", choices=list(PROFILES), default="standard", help="suite profile")
    group.addoption("--hicache-seed", type=int, default=None, help="seed of the suite's random choices")
    group.addoption("--hicache-page-size", type=int, default=64, help="tokens per page of the host pools")
    group.addoption("--hicache-layout", default="layer_first", help="host pool layout")
    group.addoption("--hicache-kind", default="mha", help="host pool kind (mha or mla)")
    group.addoption("--hicache-model-name", default="hicache-conform", help="base of the run's model name")
    group.addoption(
        "--hicache-may-evict", action="store_true", default=None, help="the backend may drop pages it accepted"
    )
    group.addoption(
        "--hicache-sglang-version",
        metavar="VERSION|none",
        default=None,
        help="whose objects the backend receives: a pinned SGLang release or none (default: the "
        "installed SGLang, else the contract models)",
    )


def pytest_configure(config: pytest.Config) -> None:
    _ITEMS.configure(config)


def options_from(config: pytest.Config) -> SuiteOptions:
    """Return the suite options the ``--hicache-*`` command-line options describe."""
    try:
        options = SuiteOptions(
            model_name=config.getoption("--hicache-model-name"),
            page_size=config.getoption("--hicache-page-size"),
            layout=config.getoption("--hicache-layout"),
            kind=config.getoption("--hicache-kind"),
            levels=parse_levels(config.getoption("--hicache-levels"), field="--hicache-levels"),
            profile=config.getoption("--hicache-profile"),
            seed=config.getoption("--hicache-seed"),
            may_evict=config.getoption("--hicache-may-evict"),
            sglang_version=config.getoption("--hicache-sglang-version"),
        )
        resolve_release(options.sglang_version)  # the release is loaded (or refused) before any item runs
        return options
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    except ReleaseError as error:
        raise pytest.UsageError(f"--hicache-sglang-version: {error}") from None


def factory_from(config: pytest.Config) -> Optional[BackendFactory]:
    """Return the factory the command-line options name, or None when they name none."""
    try:
        extra_config = parse_extra_config(
            config.getoption("--hicache-extra-config"), field_name="--hicache-extra-config"
        )
        backend = config.getoption("--hicache-backend")
        if not backend and not (extra_config and (extra_config.get("module_path") or extra_config.get("class_name"))):
            return None
        return resolve_factory(backend, extra_config)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def describe_failure(outcome: CheckOutcome) -> str:
    """Return the text a failing item shows: clause, statement, what was found, counterexample."""
    statement = lookup_clause(outcome.clause_id).statement if outcome.clause_id else ""
    lines = [f"[{outcome.clause_id}] {statement}", "", f"found: {outcome.message}"]
    if outcome.counterexample:
        lines += ["", "counterexample:", *("    " + row for row in outcome.counterexample.splitlines())]
    return "\n".join(lines)


def run_as_pytest(runner: SuiteRunner, check: Check) -> None:
    """Run ``check`` and end the way pytest expects: return, ``pytest.skip`` or ``ConformanceFailure``."""
    outcome = runner.run_check(check)
    if outcome.needs is not None:  # its setup found another clause broken: skipped only if that clause failed
        if runner.root_failed(outcome.needs):
            pytest.skip(f"{setup_reason(outcome.needs)}: {outcome.message}")
        raise ConformanceFailure(
            describe_failure(
                dataclasses.replace(
                    outcome, clause_id=outcome.needs, message=f"found while setting up {check.name}: {outcome.message}"
                )
            )
        )
    if outcome.status == SKIP:
        pytest.skip(outcome.message or "not checked")
    if outcome.status == FAIL:
        raise ConformanceFailure(describe_failure(outcome))
    if outcome.status == ERROR:  # the suite itself broke: the item does not pass, and no clause is named
        details = ["", "details:", *("    " + row for row in (outcome.counterexample or "").splitlines())]
        raise ConformanceFailure(
            "\n".join([f"error of the suite, no verdict on the backend: {outcome.message}", *details])
        )


# ---------------------------------------------------------------- way 1: options
def check_location(check: Check) -> tuple[str, int]:
    """Return the source file of ``check`` and the line its function starts on (from 0, as pytest counts)."""
    function = inspect.unwrap(check.function)
    try:
        return inspect.getsourcefile(function) or __file__, inspect.getsourcelines(function)[1] - 1
    except (OSError, TypeError):
        return __file__, 0


class ConformanceItem(SuiteItem):
    """One check of the suite, run against the backend named on the command line."""

    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(clauses=check.clauses, **kwargs)
        self.check = check

    def runtest(self) -> None:
        run_as_pytest(_command_line_runner(self.config), self.check)

    def reportinfo(self) -> tuple[str, Optional[int], str]:
        path, line = check_location(self.check)
        return path, line, f"{self.name} {','.join(self.check.clauses)}"


class ConformanceSuite(SuiteCollector[Check]):
    """The checks of the suite as one collector, so pytest counts its items and can address them by ID."""

    prefix = "hicache"

    def entries(self) -> list[Check]:
        return ordered_checks()

    def item(self, name: str, entry: Check) -> pytest.Item:
        return ConformanceItem.from_parent(self, name=name, check=entry)


def _command_line_runner(config: pytest.Config) -> SuiteRunner:
    runner = _ITEMS.command_line_run(config)
    if runner is None:
        runner = _ITEMS.keep(config, SuiteRunner(factory_from(config), options_from(config)), from_command_line=True)
    return runner


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """Take the arguments that name suite items (``hicache-conform::hicache[...]``) out of pytest's path list."""
    _ITEMS.take_arguments(
        session.config,
        has_subject=lambda: factory_from(session.config) is not None,
        missing="a hicache item needs a backend (--hicache-backend MODULE:CLASS)",
        entries=ordered_checks,
        unknown=lambda name: (
            f"hicache[{name}]: must name a check (hicache-conform run --list-checks) or a "
            f"clause a check covers (got {name!r})"
        ),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    if factory_from(config) is None:
        return
    _ITEMS.add_suite(session, items, ConformanceSuite)  # reports the collection: "collected N items" counts them


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """Point the skip line of a check's item at the check's source, not at this plugin."""
    report = yield
    check = item.check if isinstance(item, ConformanceItem) else _parametrized_check(item)
    if check is not None and report.skipped and isinstance(report.longrepr, tuple):
        path, line = check_location(check)
        report.longrepr = (path, line + 1, report.longrepr[2])
    return report


def _parametrized_check(item: pytest.Item) -> Optional[Check]:
    callspec = getattr(item, "callspec", None)
    check = callspec.params.get("hicache_check") if callspec is not None else None
    return check if isinstance(check, Check) else None


# ---------------------------------------------------------------- way 2: fixtures
@pytest.fixture(scope="session")
def hicache_options(pytestconfig: pytest.Config) -> SuiteOptions:
    """The suite options; from the ``--hicache-*`` options unless a conftest overrides this fixture."""
    return options_from(pytestconfig)


@pytest.fixture(scope="session")
def hicache_backend_factory(pytestconfig: pytest.Config) -> Any:
    """The backend to check; a vendor's conftest overrides this (session scope) with a factory, class or string."""
    factory = factory_from(pytestconfig)
    if factory is None:
        pytest.skip("no backend to check: define a hicache_backend_factory fixture or pass --hicache-backend")
    return factory


@pytest.fixture(scope="session")
def hicache_runner(
    pytestconfig: pytest.Config, hicache_backend_factory: Any, hicache_options: SuiteOptions
) -> Iterator[SuiteRunner]:
    """One suite run shared by every parametrized check of the session; cleared and closed at the end."""
    runner = SuiteRunner(hicache_backend_factory, hicache_options)
    _ITEMS.keep(pytestconfig, runner)
    runner.start()
    yield runner
    runner.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize(metafunc, "hicache_check", ordered_checks, lambda check: check)


def test_hicache_conformance(hicache_runner: SuiteRunner, hicache_check: Check) -> None:
    """Run one check of the suite against the vendor's backend (import this into a test module)."""
    run_as_pytest(hicache_runner, hicache_check)


# ---------------------------------------------------------------- the end of the session
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for runner in session.config.stash.get(_ITEMS.runs, []):
        runner.close()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    runners = [runner for runner in config.stash.get(_ITEMS.runs, []) if runner.outcomes]
    if not runners:
        return
    report = SuiteReport(tuple(runner.section() for runner in runners))
    terminalreporter.section("hicache conformance")
    terminalreporter.write_line(report.render_text(color=terminalreporter.hasmarkup))
