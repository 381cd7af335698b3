"""What the two suites' pytest plugins share: items named on the command line, their collector, their failures.

The backend suite (``hicache_contracts.conformance.pytest_plugin``) and the linker suite
(``hicache_contracts.linker.pytest_plugin``) each hang their items under one node, ``NODE::PREFIX[<name>]``,
where a name is a check (or row) of the suite. Both take such IDs out of pytest's arguments to run those
items alone (a clause ID runs every item of that clause), collect the rest as one collector, mark each item
with its clauses, show a failure as its message, and keep the session's runs (the one the command line
names among them). Each plugin keeps its options, messages and runs; this module holds the mechanics.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Optional, Protocol, TypeVar, Union

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

__all__ = [
    "CLAUSE_MARKER",
    "CommandLineItems",
    "Entry",
    "SuiteCollector",
    "SuiteFailure",
    "SuiteItem",
    "parametrize",
    "selects",
]

CLAUSE_MARKER = "clause(*ids): the spec clause IDs this test checks"
"""The marker line; identical to the project's own, so registering it twice is harmless."""

R = TypeVar("R")
E = TypeVar("E", bound="Entry")


class Entry(Protocol):
    """One item of a suite: its name and the clauses it judges (a backend check, a linker row)."""

    @property
    def name(self) -> str: ...

    @property
    def clauses(self) -> tuple[str, ...]: ...


class SuiteFailure(AssertionError):
    """A check found a clause broken; the item shows the message alone, without a traceback."""


def selects(selected: tuple[str, ...], entry: Entry) -> bool:
    """Whether ``entry`` is among the names ``selected`` (its own name or one of its clauses); all when none."""
    return not selected or any(name == entry.name or name in entry.clauses for name in selected)


class SuiteItem(pytest.Item):
    """One item of a suite, marked with the clauses it judges; a ``SuiteFailure`` shows as its message."""

    def __init__(self, *, clauses: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.clause(*clauses))

    def repr_failure(self, excinfo: Any, style: Any = None) -> Union[str, TerminalRepr]:
        """The failure's message for a ``SuiteFailure``; pytest's own report otherwise."""
        if isinstance(excinfo.value, SuiteFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)


class SuiteCollector(pytest.Collector, Generic[E]):
    """The items of a suite as one collector, so pytest counts its items and can address them by ID."""

    prefix = ""
    """The item IDs' prefix: ``PREFIX[<name>]``."""

    def __init__(self, *, selected: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.selected = selected

    def entries(self) -> Iterable[E]:
        """Every item of the suite, in its order."""
        raise NotImplementedError

    def item(self, name: str, entry: E) -> pytest.Item:
        """The item named ``name`` for ``entry``."""
        raise NotImplementedError

    def collect(self) -> list[Any]:
        """The selected items, in the suite's order."""
        chosen = [entry for entry in self.entries() if selects(self.selected, entry)]
        return [self.item(f"{self.prefix}[{entry.name}]", entry) for entry in chosen]

    def reportinfo(self) -> tuple[str, Optional[int], str]:
        """The plugin's own file (the one that defines the collector's class)."""
        return str(sys.modules[type(self).__module__].__file__), None, self.name


class CommandLineItems(Generic[R]):
    """The items a plugin adds under ``node`` (IDs ``node::prefix[<name>]``) and the runs of its session."""

    def __init__(self, node: str, prefix: str) -> None:
        self.node, self.prefix = node, prefix
        self.argument = re.compile(rf"^(?:{re.escape(node)}::)?{re.escape(prefix)}\[(?P<name>[^\]]+)\]$")
        self.runs = pytest.StashKey[list[R]]()
        self.selected = pytest.StashKey[tuple[str, ...]]()

    def configure(self, config: pytest.Config) -> None:
        """Register the ``clause`` marker and start the session's list of runs."""
        config.addinivalue_line("markers", CLAUSE_MARKER)
        config.stash[self.runs] = []

    def command_line_run(self, config: pytest.Config) -> Optional[R]:
        """The run the command-line options started, if one has been started."""
        for run in config.stash[self.runs]:
            if getattr(run, "from_command_line", False):
                return run
        return None

    def keep(self, config: pytest.Config, run: R, *, from_command_line: bool = False) -> R:
        """Add ``run`` to the session's runs (closed and summed up at the end); return it."""
        if from_command_line:
            run.from_command_line = True  # type: ignore[attr-defined]
        config.stash[self.runs].append(run)
        return run

    def take_arguments(
        self,
        config: pytest.Config,
        *,
        has_subject: Callable[[], bool],
        missing: str,
        entries: Callable[[], Iterable[Entry]],
        unknown: Callable[[str], str],
    ) -> None:
        """Take the arguments that name items out of pytest's path list and keep their names for collection.

        With such an argument and no subject to check, the usage error reads ``'<name>': <missing>``; a name
        that is neither an item's nor one of its clauses is refused with ``unknown(name)``.
        """
        selected, kept = [], []
        for argument in config.args:
            match = self.argument.match(argument)
            if match is None:
                kept.append(argument)
            else:
                selected.append(match.group("name"))
        if not selected:
            return
        if not has_subject():
            raise pytest.UsageError(f"{selected[0]!r}: {missing}")
        every = list(entries())
        known = {entry.name for entry in every} | {clause for entry in every for clause in entry.clauses}
        for name in selected:
            if name not in known:
                raise pytest.UsageError(unknown(name))
        config.args = kept
        config.stash[self.selected] = tuple(selected)

    def add_suite(self, session: pytest.Session, items: list[Any], collector: type[SuiteCollector[Any]]) -> None:
        """Collect the suite's selected items after the tests pytest collected (so they count in its header)."""
        suite = collector.from_parent(
            session, name=self.node, nodeid=self.node, selected=session.config.stash.get(self.selected, ())
        )
        items.extend(session.genitems(suite))


def parametrize(
    metafunc: pytest.Metafunc, argname: str, entries: Callable[[], Iterable[E]], value: Callable[[E], Any]
) -> None:
    """Parametrize ``argname``, where a test asks for it, with every item of a suite (ID its name, its clauses)."""
    if argname not in metafunc.fixturenames:
        return
    metafunc.parametrize(
        argname,
        [pytest.param(value(entry), id=entry.name, marks=pytest.mark.clause(*entry.clauses)) for entry in entries()],
    )
