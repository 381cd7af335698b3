"""Expected failures: a failure that is known, classed, linked, and checked to still be there.

An entry names a clause (``BE-12``) or a check (``get_stats_returns_none_or_an_object``), a reason
class, a link, and optionally the last pinned SGLang release it holds for::

    # known-failures.yaml
    - clause: BE-12
      reason: backend defect        # backend defect | not applicable | suite bug
      link: https://tracker.example.com/store/12
      until: 0.5.22                 # optional: from 0.5.23 on the failure must be gone
      note: stats are a dict until our release 2

It works like a strict expected failure (pytest's ``xfail(strict=True)``):
a failure an entry names is reported and does not fail the run; an entry
whose clause or check now passes fails the run, loudly, so that a fixed
defect (or a fixed SGLang divergence) flips visibly and its entry goes.
An entry whose ``until`` is older than the run's release does not excuse
anything. Nothing is ever hidden: every failure stays in the report, and a
run with any failure of a claimed level is never certified.

The project's own divergence registry (``hicache_spec.divergences``) is read
through the same mechanism for SGLang's in-tree backends: a divergence in
the code of an in-tree backend class is that backend's expected failure
(``divergence_entries``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from hicache_contracts.conformance.reporting.report import FAIL, PASS, SuiteReport
from hicache_contracts.errors import bad_value

__all__ = [
    "Baseline",
    "ExpectedFailure",
    "REASONS",
    "compare_with_baseline",
    "divergence_entries",
    "entries_from_data",
    "in_tree_expected",
    "parse_expected_failures",
]

REASONS: tuple[str, ...] = ("backend defect", "not applicable", "suite bug")
"""The reason classes: the backend is wrong; the clause does not bind this product; the suite is wrong."""

_LINK = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://\S+"  # a URL
    r"|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\d+"  # owner/repo#123
    r"|DIV-\d+"  # an entry of the project's divergence registry
    r"|docs/[A-Za-z0-9_./-]+\.md(?:#[A-Za-z0-9_-]+)?)$"  # a page of the project's documentation
)
_FIELDS = ("clause", "check", "reason", "link", "until", "note")


@dataclass(frozen=True)
class ExpectedFailure:
    """One expected failure."""

    target: str
    """The clause ID, or the check name, that is expected to fail."""
    reason: str
    """One of ``REASONS``."""
    link: str
    """Where the failure is tracked: a URL, ``owner/repo#N``, ``DIV-N`` or ``docs/PAGE.md#anchor``."""
    until: Optional[str] = None
    """The last pinned SGLang release the entry holds for (None: every release)."""
    note: str = ""
    is_check: bool = False
    """``target`` names a check, not a clause."""

    def applies_to(self, release: Optional[str]) -> bool:
        """Whether the entry excuses a failure of a run with SGLang ``release`` (None: the contract models)."""
        if self.until is None or release is None:
            return True
        from hicache_spec.releases import release_key

        return release_key(release) <= release_key(self.until)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"check" if self.is_check else "clause": self.target, "reason": self.reason}
        data["link"] = self.link
        if self.until is not None:
            data["until"] = self.until
        if self.note:
            data["note"] = self.note
        return data


def entries_from_data(data: Any, *, source: str = "--known-failures") -> tuple[ExpectedFailure, ...]:
    """Return the entries of parsed YAML or JSON ``data``; raise ValueError naming the entry, the field and the rule."""
    from hicache_contracts.conformance.framework import ordered_checks
    from hicache_spec import clause as lookup_clause
    from hicache_spec.releases import SGLANG_RELEASES

    if isinstance(data, dict) and set(data) == {"expected_failures"}:
        data = data["expected_failures"]
    if data is None:
        return ()
    if not isinstance(data, list):
        raise bad_value(f"{source}: entries", "must be a list of entries (clause or check, reason, link)", data)
    checks = {check.name for check in ordered_checks()}
    found: dict[str, ExpectedFailure] = {}
    for number, item in enumerate(data, start=1):
        where = f"{source}: entry {number}"
        if not isinstance(item, dict):
            raise bad_value(f"{where}: entry", "must be a mapping with clause or check, reason and link", item)
        unknown = sorted(set(item) - set(_FIELDS), key=str)
        if unknown:
            raise bad_value(f"{where}: {unknown[0]}", f"is not a field; the fields are {', '.join(_FIELDS)}", item)
        if ("clause" in item) == ("check" in item):
            raise bad_value(f"{where}: clause", "exactly one of clause and check must be given", item)
        is_check = "check" in item
        target = item["check"] if is_check else item["clause"]
        if not isinstance(target, str):
            raise bad_value(f"{where}: {'check' if is_check else 'clause'}", "must be a string", target)
        if is_check and target not in checks:
            raise bad_value(f"{where}: check", "must name a check from `hicache-conform run --list-checks`", target)
        if not is_check:
            try:
                lookup_clause(target)
            except (KeyError, ValueError):
                raise bad_value(f"{where}: clause", "must be a clause ID of the registry", target) from None
        reason = item.get("reason")
        if reason not in REASONS:
            raise bad_value(f"{where}: reason", f"must be one of {', '.join(REASONS)}", reason)
        link = item.get("link")
        if not isinstance(link, str) or not _LINK.match(link.strip()):
            raise bad_value(
                f"{where}: link",
                "must be a URL, owner/repo#N, DIV-N or docs/PAGE.md where the failure is tracked",
                link,
            )
        until = item.get("until")
        if until is not None:
            until = str(until)
            if until not in SGLANG_RELEASES:
                raise bad_value(
                    f"{where}: until", f"must be a pinned SGLang release ({', '.join(SGLANG_RELEASES)})", until
                )
        note = item.get("note", "")
        if not isinstance(note, str):
            raise bad_value(f"{where}: note", "must be a string", note)
        if target in found:
            raise bad_value(f"{where}: {'check' if is_check else 'clause'}", "is named by an earlier entry", target)
        found[target] = ExpectedFailure(target, reason, link.strip(), until, note, is_check)
    return tuple(found.values())


def parse_expected_failures(text: str, *, source: str = "--known-failures") -> tuple[ExpectedFailure, ...]:
    """Return the entries of a YAML (or JSON) expected-failures file; raise ValueError naming what is wrong."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{source}: {line}must be YAML or JSON ({getattr(error, 'problem', None) or error})") from None
    return entries_from_data(data, source=source)


@dataclass(frozen=True)
class Baseline:
    """How a report reads against its expected failures."""

    entries: tuple[ExpectedFailure, ...]
    still_failing: tuple[str, ...]
    """Entries whose clause or check failed again (reported, not fatal)."""
    now_passing: tuple[str, ...]
    """Entries whose clause or check passed, every check of the clause reaching it: fatal, the entry must go (a strict
    expected failure)."""
    not_checked: tuple[str, ...]
    """Entries whose clause or check did not run (skipped, not in this run, or a check of the clause stopped at another
    clause before reaching it)."""
    expired: tuple[str, ...]
    """Entries that hold only until an older release than the run's: they excuse nothing."""
    unexpected: tuple[str, ...]
    """Failing clauses no applicable entry names: fatal."""

    @property
    def exit_code(self) -> int:
        """1 when a failure is not expected or an expected failure now passes, else 0."""
        return 1 if self.unexpected or self.now_passing else 0

    def lines(self) -> list[str]:
        """What the terminal shows under the report."""
        out = []
        if self.still_failing:
            out.append(f"expected failures (reported, not fatal): {', '.join(self.still_failing)}")
        if self.not_checked:
            out.append(f"expected failures not checked in this run: {', '.join(self.not_checked)}")
        if self.expired:
            out.append(f"expected failures past their release (they excuse nothing): {', '.join(self.expired)}")
        if self.now_passing:
            out.append(
                "EXPECTED FAILURES THAT NOW PASS (fatal: the defect is fixed, remove the entry): "
                + ", ".join(self.now_passing)
            )
        if self.unexpected:
            out.append(f"failures no expected failure names (fatal): {', '.join(self.unexpected)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [entry.to_dict() for entry in self.entries],
            "still_failing": list(self.still_failing),
            "now_passing": list(self.now_passing),
            "not_checked": list(self.not_checked),
            "expired": list(self.expired),
            "unexpected": list(self.unexpected),
        }


def _release_of(report: SuiteReport) -> Optional[str]:
    for section in report.sections:
        release = section.options.get("sglang_release")
        if release:
            return str(release)
    return None


def compare_with_baseline(
    report: SuiteReport, entries: Iterable[ExpectedFailure], *, release: Optional[str] = None
) -> Baseline:
    """Return how ``report`` reads against ``entries`` (``release``: the run's SGLang release, else the report's)."""
    entries = tuple(entries)
    release = release or _release_of(report)
    verdicts = [verdict for section in report.sections for verdict in section.clauses]
    outcomes = [outcome for section in report.sections for outcome in section.checks]
    live = [entry for entry in entries if entry.applies_to(release)]
    still, passing, unchecked = [], [], []
    for entry in live:
        if entry.is_check:
            statuses = {outcome.status for outcome in outcomes if outcome.check == entry.target}
            stopped = False
        else:
            statuses = {verdict.status for verdict in verdicts if verdict.clause_id == entry.target}
            stopped = any(  # a check of the clause stopped at another one before it reached this one
                entry.target in outcome.clauses and outcome.status == FAIL and outcome.clause_id != entry.target
                for outcome in outcomes
            )
        if FAIL in statuses:
            still.append(entry.target)
        elif PASS in statuses and not stopped:
            passing.append(entry.target)
        else:
            unchecked.append(entry.target)
    clause_entries = {entry.target for entry in live if not entry.is_check}
    check_entries = {entry.target for entry in live if entry.is_check}
    unexpected = []
    for verdict in verdicts:
        if verdict.status != FAIL or verdict.clause_id in clause_entries:
            continue
        if verdict.failures and all(failure.check in check_entries for failure in verdict.failures):
            continue
        unexpected.append(verdict.clause_id)
    return Baseline(
        entries=entries,
        still_failing=tuple(still),
        now_passing=tuple(passing),
        not_checked=tuple(unchecked),
        expired=tuple(entry.target for entry in entries if entry not in live),
        unexpected=tuple(dict.fromkeys(unexpected)),
    )


def divergence_entries(module: str, class_name: str, release: str) -> tuple[ExpectedFailure, ...]:
    """Return the expected failures of SGLang's in-tree backend ``class_name`` (in ``module``) on ``release``.

    Each is a divergence of the project's registry in that class's code that
    ``release`` shows: a backend defect, linked to its upstream issue (else
    to its ``DIV-N``), holding until the last release of its range when the
    range is closed. A clause can be named by one entry only; the first
    divergence recorded for it is kept.
    """
    from hicache_spec.divergences import divergences
    from hicache_spec.releases import SGLANG_RELEASES, release_key

    file = module.removeprefix("sglang.srt.").replace(".", "/") + ".py"
    found: dict[str, ExpectedFailure] = {}
    for item in divergences():
        if item.file != file or item.function.split(".", 1)[0] != class_name or not item.holds_for(release):
            continue
        if not item.suite_meets:
            continue  # the suite's run never meets its condition: no failure to expect
        last = max((version for version in SGLANG_RELEASES if item.holds_for(version)), key=release_key)
        until = None if last == SGLANG_RELEASES[-1] else last
        link = item.upstream or item.id
        note = f"{item.id}: {item.behaviour}"
        found.setdefault(item.clause_id, ExpectedFailure(item.clause_id, "backend defect", link, until, note))
    return tuple(found.values())


BY_DESIGN: dict[str, tuple[tuple[str, str], ...]] = {
    "SimHiCacheStorage": (
        ("BE-9", "SimHiCacheStorage simulates timing and keeps keys only: a read gives no stored bytes"),
        ("BE-13", "SimHiCacheStorage keeps keys only: an empty value counts as a hit"),
    ),
    "HiCacheShm": (("BE-9", "HiCacheShm is a placeholder for the shared-memory host allocator: set stores nothing"),),
}
"""SGLang's in-tree backend classes that are no storage backend by design: class → (clause, why) that does not bind it."""


def in_tree_expected(module: str, class_name: str, release: str) -> tuple[ExpectedFailure, ...]:
    """Return the expected failures of SGLang's in-tree backend ``class_name`` (in ``module``) on ``release``.

    The divergences of the project's registry in the class's code (backend
    defects), then the clauses it is by design no backend for (not
    applicable, linked to ``docs/in-tree-verdicts.md``).
    """
    found = {item.target: item for item in divergence_entries(module, class_name, release)}
    for clause_id, why in BY_DESIGN.get(class_name, ()):
        found.setdefault(clause_id, ExpectedFailure(clause_id, "not applicable", "docs/in-tree-verdicts.md", None, why))
    return tuple(found.values())
