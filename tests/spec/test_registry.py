"""The clause registry is well formed, covers the contract, and the spec stays standard-library only."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hicache_spec import FAMILIES, LEVELS, ROLES, UnknownClauseError, clause, clauses, clauses_for_level
from hicache_spec.registry import Clause, _validate
from hicache_spec.render import render_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_registry_has_at_least_forty_wellformed_clauses():
    live = clauses()
    assert len(live) >= 40
    for item in live:
        assert re.fullmatch(r"[A-Z]+-[1-9][0-9]*", item.id), item.id
        assert item.family in FAMILIES and item.level in LEVELS and item.role in ROLES
        assert item.statement.endswith(".") and item.rationale and item.source


def test_every_family_has_clauses():
    assert {c.family for c in clauses()} == set(FAMILIES)


def test_lookup_and_unknown_id():
    assert clause("PFX-2").level == "prefix"
    with pytest.raises(UnknownClauseError, match="unknown clause ID 'PFX-999'"):
        clause("PFX-999")
    with pytest.raises(ValueError, match="level: must be one of"):
        clauses_for_level("nope")


def test_duplicate_and_malformed_clauses_are_rejected():
    good = Clause("PFX-1", "prefix", "engine", "S.", "R", "src")
    with pytest.raises(ValueError, match="duplicate ID"):
        _validate((good, good))
    with pytest.raises(ValueError, match="unknown family"):
        _validate((Clause("ZZ-1", "prefix", "engine", "S.", "R", "src"),))
    with pytest.raises(ValueError, match="unknown level"):
        _validate((Clause("PFX-1", "nope", "engine", "S.", "R", "src"),))


def test_open_questions_of_the_contract_are_decided():
    decisions = [c for c in clauses() if c.source.startswith("decision")]
    assert {c.id for c in decisions} >= {"PFX-9", "PFX-10"}


def test_importing_the_spec_pulls_in_neither_pydantic_nor_torch():
    code = (
        "import sys, hicache_spec, hicache_spec.render;"
        "bad = [m for m in ('pydantic', 'torch') if m in sys.modules];"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"hicache_spec imported: {result.stdout.strip()} {result.stderr}"


def test_committed_spec_document_is_fresh():
    committed = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), "docs/spec.md is stale: run `hicache-conform spec --write docs/spec.md`"
