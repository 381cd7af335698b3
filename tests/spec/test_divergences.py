"""The divergence registry: well formed, rendered, and each entry still visible in the release it names.

Each entry's evidence is matched against the named function's source in that
release's wheel (fetched into the release cache when missing, see
``tests/sglang_wheels.py``). An upstream fix makes the match fail,
which is the signal to retire the entry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hicache_spec.divergences import DIVERGENCES, Divergence, divergences, divergences_for_release, render_divergences
from hicache_spec.registry import holds_for, clause
from hicache_spec.releases import SGLANG_RELEASES
from tests.sglang_wheels import wheel_root

ROOT = Path(__file__).resolve().parents[2]


def function_source(version: str, file: str, function: str) -> str:
    """Return the source of ``Class.method`` or ``function`` in a release's wheel; skip if the wheel is absent."""
    path = wheel_root(version) / "sglang" / "srt" / file
    assert path.is_file(), f"SGLang {version}'s wheel has no {file}"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    *owners, name = function.split(".")
    scope: list[ast.AST] = list(tree.body)
    for owner in owners:
        found = [node for node in scope if isinstance(node, ast.ClassDef) and node.name == owner]
        assert found, f"{version} {file}: no class {owner}"
        scope = list(found[0].body)
    matches = [
        node for node in scope if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ]
    assert matches, f"{version} {file}: no function {function}"
    return ast.get_source_segment(text, matches[0]) or ""


def evidence_found(item: Divergence, version: str) -> bool:
    """Return whether ``item``'s evidence matches its function in release ``version`` (False when the file or function is gone)."""
    path = wheel_root(version) / "sglang" / "srt" / item.file
    if not path.is_file():
        return False
    try:
        source = function_source(version, item.file, item.function)
    except AssertionError:
        return False
    return re.search(item.evidence, source) is not None


CASES = [(item, version) for item in DIVERGENCES for version in SGLANG_RELEASES if item.holds_for(version)]
ABSENT = [
    (item, version)
    for item in DIVERGENCES
    for version in SGLANG_RELEASES
    if not item.holds_for(version) and holds_for(clause(item.clause_id), version)
]
"""Every pinned release an entry does not list and its clause holds for (where the clause does not hold, there is
nothing to diverge from: DIV-7's fold is in 0.5.20, which has no BLOCK_GROUPS policy for HYB-9 to speak of)."""


@pytest.mark.parametrize("item, version", CASES, ids=[f"{item.id}-{version}" for item, version in CASES])
def test_divergence_is_still_in_the_release(item: Divergence, version: str):
    source = function_source(version, item.file, item.function)
    assert re.search(item.evidence, source), (
        f"{item.id}: SGLang {version} {item.function} no longer matches {item.evidence!r}; "
        "if upstream fixed it, narrow the entry's releases"
    )


@pytest.mark.parametrize("item, version", ABSENT, ids=[f"{item.id}-{version}" for item, version in ABSENT])
def test_divergence_is_absent_from_every_release_it_does_not_name(item: Divergence, version: str):
    """An entry's evidence found in a pinned release it does not list means its scope is too narrow."""
    assert not evidence_found(item, version), (
        f"{item.id}: SGLang {version} {item.function} matches {item.evidence!r} but the entry lists "
        f"only {item.releases}; widen its releases"
    )


def test_a_scope_too_narrow_is_caught():
    """The planted bug: DIV-11 filed for 0.5.21+ only, as it once was, while 0.5.20 has the same code."""
    (item,) = [entry for entry in DIVERGENCES if entry.id == "DIV-11"]
    narrowed = Divergence(**{**item.__dict__, "releases": "0.5.21+"})
    missed = [v for v in SGLANG_RELEASES if not narrowed.holds_for(v) and evidence_found(narrowed, v)]
    assert missed == ["0.5.20"]


def test_a_scope_too_wide_is_caught():
    """The planted bug: the thread-killing loops of 0.5.20-0.5.21 filed for every release."""
    for entry_id in ("DIV-22", "DIV-25", "DIV-26"):
        (item,) = [entry for entry in DIVERGENCES if entry.id == entry_id]
        widened = Divergence(**{**item.__dict__, "releases": "0.5.20+"})
        assert [v for v in SGLANG_RELEASES if widened.holds_for(v) and not evidence_found(widened, v)] == [
            "0.5.22",
            "0.5.23",
        ], entry_id


def test_entries_name_live_clauses_that_hold_where_they_diverge():
    for item in divergences():
        target = clause(item.clause_id)
        assert not target.retired, item.id
        for version in SGLANG_RELEASES:
            if item.holds_for(version):
                assert holds_for(target, version), f"{item.id}: {target.id} does not hold for {version}"
    assert divergences_for_release("0.5.23")
    assert {item.id for item in divergences_for_release("0.5.20")} >= {"DIV-3", "DIV-5"}


def test_registry_rejects_unknown_clause_and_duplicate_ids(monkeypatch):
    import hicache_spec.divergences as module

    bad = Divergence("DIV-9999", "0.5.23", "PFX-999", "f.py", "f", "b.", "x")
    monkeypatch.setattr(module, "DIVERGENCES", DIVERGENCES + (bad,))
    with pytest.raises(KeyError, match="PFX-999"):
        module.divergences()
    monkeypatch.setattr(module, "DIVERGENCES", DIVERGENCES + (DIVERGENCES[0],))
    with pytest.raises(ValueError, match="duplicate ID"):
        module.divergences()


def test_committed_divergence_document_is_fresh():
    committed = (ROOT / "docs" / "divergences.md").read_text(encoding="utf-8")
    assert committed == render_divergences(), (
        "docs/divergences.md is stale: run `hicache-conform divergences --write docs/divergences.md`"
    )
