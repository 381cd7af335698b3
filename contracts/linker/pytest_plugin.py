"""The linker suite as pytest items: ``pytest --hicache-linker my_pkg.linker:MyLinker`` (entry point ``hicache_linker``).

Two ways in, as for backends (``hicache_contracts.conformance.pytest_plugin``):

1. Options. ``--hicache-linker MODULE:CLASS`` (or ``--hicache-linker-factory
   MODULE:FUNCTION``) adds one item per row of the suite,
   ``hicache-linker::linker[<check name>]``: the loadability verdict against
   the target release's interface (``interface``), the 0.5.23 loader
   (``release_factory_loads``) and every behaviour check, after the tests
   pytest collected; ``-k`` selects among them. An item ID given as an
   argument runs that check alone, and ``linker[<clause ID>]`` runs every
   check of that clause. ``--hicache-linker-sglang-version V`` imports a
   pinned release first and drives the linker through its own wrapper;
   ``--hicache-linker-release``, ``--hicache-linker-mode`` and
   ``--hicache-linker-extra-config`` are ``hicache-conform linker``'s options.

2. A fixture. A vendor's ``conftest.py`` defines a session-scoped
   ``hicache_linker`` fixture (a linker class, a ``"module:Class"`` string,
   or a function from ``LinkerSetup`` to a linker) and a test module imports
   the test::

       from hicache_contracts.linker.pytest_plugin import test_hicache_linker_conformance  # noqa: F401

   which is parametrized with every row.

Each item carries ``@pytest.mark.clause(...)``; a check that does not hold
for the target release, or could not run, is skipped with why; a failure
shows the clause, its statement, what was found, why it matters and the
replay command. The linker section (the backend suite's report form) is
printed at the end of the session. With none of the options and no import,
the plugin adds nothing but its options and the ``clause`` marker.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import pytest

from hicache_contracts.linker.checks import CHECKS
from hicache_contracts.linker.harness import LINKER_MODULE
from hicache_contracts.linker.reporting import FAIL, SKIP, CheckResult, LinkerReport
from hicache_contracts.linker.suite import run_linker_suite
from hicache_contracts.pytest_items import CommandLineItems, SuiteCollector, SuiteFailure, SuiteItem, parametrize
from hicache_spec import clause as lookup_clause
from hicache_spec.releases import SGLANG_RELEASES

__all__ = [
    "INTERFACE",
    "LinkerConformanceFailure",
    "LinkerItem",
    "LinkerSuite",
    "SUITE_NODE",
    "hicache_linker",
    "hicache_linker_run",
    "test_hicache_linker_conformance",
]

SUITE_NODE = "hicache-linker"
"""The node the command-line items hang under: ``hicache-linker::linker[<check name>]``."""

INTERFACE = "interface"
"""The item of the loadability verdict against the target release's interface (LNK-1 to LNK-4)."""
FACTORY = "release_factory_loads"

_ITEMS = CommandLineItems["LinkerRun"](SUITE_NODE, "linker")


class LinkerConformanceFailure(SuiteFailure):
    """A check found a linker clause broken; the message says which, what was found and how to replay it."""


@dataclass(frozen=True)
class Row:
    """One item of the suite: a check name and the clauses it judges."""

    name: str
    clauses: tuple[str, ...]


ROWS: tuple[Row, ...] = (
    Row(INTERFACE, ("LNK-1", "LNK-2", "LNK-3", "LNK-4")),
    Row(FACTORY, ("LNK-4",)),
    *(Row(check.name, (check.clause,)) for check in CHECKS),
)
"""Every item, in the suite's order."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hicache-linker", "HiCache linker conformance")
    group.addoption("--hicache-linker", metavar="MODULE:CLASS", help="run the linker suite against this linker class")
    group.addoption(
        "--hicache-linker-factory", metavar="MODULE:FUNCTION", help="a function from LinkerSetup to a linker"
    )
    group.addoption("--hicache-linker-release", metavar="VERSION", help="the interface to target")
    group.addoption(
        "--hicache-linker-sglang-version",
        metavar="VERSION",
        help="import this pinned SGLang release first and drive the linker through its own wrapper",
    )
    group.addoption("--hicache-linker-mode", default="auto", choices=("auto", "wrapper", "direct"))
    group.addoption(
        "--hicache-linker-extra-config", metavar="JSON", default="{}", help="added to the linker's extra_config"
    )


def pytest_configure(config: pytest.Config) -> None:
    _ITEMS.configure(config)


def _load(spec: str, option: str) -> Any:
    from hicache_contracts.conformance.session.loading import import_backend_module

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(f"{option}: expected module:Name (got {spec!r})")
    try:
        module = import_backend_module(module_name, spec, field_name=option)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    if not hasattr(module, attribute):
        raise pytest.UsageError(f"{option}: {module_name!r} has no {attribute!r}")
    return getattr(module, attribute)


class LinkerRun:
    """One linker under test for the session: runs a row at a time and keeps what each found."""

    def __init__(
        self,
        subject: Union[type, str, Callable[..., Any]],
        *,
        release: Optional[str] = None,
        mode: str = "auto",
        extra_config: Optional[dict[str, Any]] = None,
        factory: Optional[Callable[..., Any]] = None,
    ) -> None:
        built: Any = _load(subject, "hicache_linker") if isinstance(subject, str) else subject
        self.linker_cls: Optional[type] = built if isinstance(built, type) else None
        self.factory: Optional[Callable[..., Any]] = factory if self.linker_cls is not None else factory or built
        self.release, self.mode, self.extra_config = release, mode, dict(extra_config or {})
        self.rows: dict[str, list[CheckResult]] = {}
        self.last: Optional[LinkerReport] = None

    def run(self, name: str) -> list[CheckResult]:
        """Run the row ``name``; return its counted results."""
        checks = [name] if name not in (INTERFACE, FACTORY) else []
        try:
            report = run_linker_suite(
                self.linker_cls,
                factory=self.factory,
                release=self.release,
                mode=self.mode,
                extra_config=self.extra_config,
                checks=checks,
            )
        except ValueError as error:
            raise pytest.UsageError(f"hicache linker suite: {error}") from None
        self.last = report
        if name == INTERFACE:
            found = [r for r in report.results if r.check.startswith("interface_") and r.counted]
        else:
            found = [r for r in report.results if r.check == name]
        self.rows[name] = found
        return found

    def report(self) -> Optional[LinkerReport]:
        """Every row run so far, as one report (None before the first)."""
        if self.last is None:
            return None
        merged = LinkerReport(self.last.linker, self.last.release, self.last.mode)
        merged.invocation = dict(self.last.invocation, checks=None)
        for rows in self.rows.values():
            merged.results += rows
        merged.seconds = sum(r.seconds for r in merged.results)
        return merged


def describe_failure(report: Optional[LinkerReport], row: CheckResult) -> str:
    """The text a failing item shows: clause, statement, what was found, why it matters, the replay."""
    item = lookup_clause(row.clause)
    lines = [f"[{row.clause}] {item.statement}", "", f"found: {row.detail}"]
    if item.rationale:
        lines += ["", f"why it matters: {' '.join(item.rationale.split())}"]
    if report is not None:
        lines += ["", f"replay: {report.replay_command(row.check)}"]
    return "\n".join(lines)


def run_as_pytest(run: LinkerRun, name: str) -> None:
    """Run row ``name`` and end the way pytest expects: return, ``pytest.skip`` or ``LinkerConformanceFailure``."""
    rows = run.run(name)
    if not rows:
        pytest.skip(f"{name}: no verdict in this run (a linker built by a factory has no loadability verdict)")
    failed = [row for row in rows if row.status == FAIL]
    if failed:
        raise LinkerConformanceFailure("\n\n".join(describe_failure(run.last, row) for row in failed))
    if rows and all(row.status == SKIP for row in rows):
        pytest.skip("; ".join(row.detail for row in rows) or "not checked")


# ---------------------------------------------------------------- way 1: options
def _from_config(config: pytest.Config) -> Optional[LinkerRun]:
    linker = config.getoption("--hicache-linker")
    factory_spec = config.getoption("--hicache-linker-factory")
    if not linker and not factory_spec:
        return None
    run = _ITEMS.command_line_run(config)
    if run is not None:
        return run
    version = config.getoption("--hicache-linker-sglang-version")
    if version and version != "none":
        from hicache_contracts.sglang_release import ReleaseError, use_release

        try:
            use_release(version)
            importlib.import_module(LINKER_MODULE)
        except ReleaseError as error:
            raise pytest.UsageError(f"--hicache-linker-sglang-version: {error}") from None
    try:
        extra = json.loads(config.getoption("--hicache-linker-extra-config"))
    except json.JSONDecodeError as error:
        raise pytest.UsageError(f"--hicache-linker-extra-config: not JSON ({error})") from None
    if not isinstance(extra, dict):
        raise pytest.UsageError("--hicache-linker-extra-config: must be a JSON object")
    release = config.getoption("--hicache-linker-release")
    if release is not None and release not in SGLANG_RELEASES:
        raise pytest.UsageError(
            f"--hicache-linker-release: not a pinned release (got {release!r}; pinned: {', '.join(SGLANG_RELEASES)})"
        )
    factory = _load(factory_spec, "--hicache-linker-factory") if factory_spec else None
    subject: Any = _load(linker, "--hicache-linker") if linker else factory
    run = LinkerRun(
        subject, release=release, mode=config.getoption("--hicache-linker-mode"), extra_config=extra, factory=factory
    )
    return _ITEMS.keep(config, run, from_command_line=True)


class LinkerItem(SuiteItem):
    """One row of the linker suite, run against the linker named on the command line."""

    def __init__(self, *, row: Row, **kwargs: Any) -> None:
        super().__init__(clauses=row.clauses, **kwargs)
        self.row = row

    def runtest(self) -> None:
        run = _from_config(self.config)
        assert run is not None
        run_as_pytest(run, self.row.name)

    def reportinfo(self) -> tuple[str, Optional[int], str]:
        return __file__, None, f"{self.name} {','.join(self.row.clauses)}"


class LinkerSuite(SuiteCollector[Row]):
    """The rows of the linker suite as one collector, so pytest counts its items and addresses them by ID."""

    prefix = "linker"

    def entries(self) -> tuple[Row, ...]:
        return ROWS

    def item(self, name: str, entry: Row) -> pytest.Item:
        return LinkerItem.from_parent(self, name=name, row=entry)


def _named(config: pytest.Config) -> bool:
    return bool(config.getoption("--hicache-linker") or config.getoption("--hicache-linker-factory"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """Take the arguments that name linker items (``hicache-linker::linker[...]``) out of pytest's path list."""
    _ITEMS.take_arguments(
        session.config,
        has_subject=lambda: _named(session.config),
        missing="a linker item needs a linker (--hicache-linker MODULE:CLASS)",
        entries=lambda: ROWS,
        unknown=lambda name: (
            f"linker[{name}]: must name a check (hicache-conform linker --list-checks), {INTERFACE!r}, "
            f"{FACTORY!r} or a clause a check covers (got {name!r})"
        ),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    if not _named(config):
        return
    _ITEMS.add_suite(session, items, LinkerSuite)


# ---------------------------------------------------------------- way 2: fixtures
@pytest.fixture(scope="session")
def hicache_linker(pytestconfig: pytest.Config) -> Any:
    """The linker to check; a vendor's conftest overrides this (session scope) with a class, string or factory."""
    run = _from_config(pytestconfig)
    if run is None:
        pytest.skip("no linker to check: define a hicache_linker fixture or pass --hicache-linker")
    return run


@pytest.fixture(scope="session")
def hicache_linker_run(pytestconfig: pytest.Config, hicache_linker: Any) -> LinkerRun:
    """The session's run of the linker suite, shared by every parametrized row."""
    if isinstance(hicache_linker, LinkerRun):
        return hicache_linker
    return _ITEMS.keep(pytestconfig, LinkerRun(hicache_linker))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize(metafunc, "hicache_linker_row", lambda: ROWS, lambda row: row.name)


def test_hicache_linker_conformance(hicache_linker_run: LinkerRun, hicache_linker_row: str) -> None:
    """Run one row of the linker suite against the vendor's linker (import this into a test module)."""
    run_as_pytest(hicache_linker_run, hicache_linker_row)


# ---------------------------------------------------------------- the end of the session
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = [report for run in config.stash.get(_ITEMS.runs, []) if (report := run.report()) is not None]
    if not reports:
        return
    terminalreporter.section("hicache linker conformance")
    for report in reports:
        terminalreporter.write_line(report.suite_report().render_text(color=terminalreporter.hasmarkup))
