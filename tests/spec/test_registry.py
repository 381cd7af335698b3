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
from hicache_contracts.clause_tests import TestMapError, clause_test_files

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
    decisions = [c for c in clauses() if c.releases == "decision"]
    assert {c.id for c in decisions} >= {"PFX-10", "NS-8", "CTL-12"}
    assert clause("PFX-9").releases == "0.5.21+"  # re-decided from the wheel, no longer a decision


def test_every_clause_names_its_releases_and_the_document_shows_them():
    from hicache_spec import describe_releases, holds_for

    text = render_markdown()
    for item in clauses():
        assert f"- *Releases:* {describe_releases(item)}" in text
        assert any(holds_for(item, version) for version in ("0.5.20", "0.5.21", "0.5.22", "0.5.23")), item.id
    assert describe_releases(clause("CTL-10")) == "project decision (every release)"
    assert describe_releases(clause("CTL-14")) == "0.5.23 only"
    assert describe_releases(clause("CTL-16")) == "0.5.20–0.5.22"
    assert describe_releases(clause("PFX-10")) == "project decision (every release)"


@pytest.mark.parametrize(
    "version, present, absent",
    [
        (
            "0.5.20",
            {"CTL-10", "PFX-10", "BE-21", "CTL-15", "CTL-8"},
            {"CTL-14", "PFX-9", "RANK-5", "RANK-6", "KEY-5", "BE-27", "HYB-9"},
        ),
        ("0.5.21", {"CTL-16", "PFX-9", "CTL-10"}, {"CTL-14", "RANK-5", "KEY-5"}),
        ("0.5.22", {"RANK-5", "HYB-9", "CTL-15"}, {"RANK-6", "KEY-5"}),
        ("0.5.23", {"RANK-6", "KEY-5", "BE-26", "BE-27", "CTL-14", "CTL-15", "NS-8"}, {"CTL-16"}),
    ],
)
def test_clauses_of_a_release(version, present, absent):
    from hicache_spec import clauses_for_release

    ids = {c.id for c in clauses_for_release(version)}
    assert present <= ids and not (absent & ids)
    assert f"hold for SGLang {version}" in __import__("hicache_spec.render", fromlist=["summarize"]).summarize(version)
    assert render_markdown(version).count("#### ") == len(ids)


def test_unknown_release_and_malformed_releases_are_rejected():
    from hicache_spec import clauses_for_release
    from hicache_spec.releases import UnknownReleaseError

    with pytest.raises(UnknownReleaseError, match="not a pinned release"):
        clauses_for_release("0.4.0")
    with pytest.raises(ValueError, match="Clause.releases"):
        _validate((Clause("PFX-1", "prefix", "engine", "S.", "R", "src", releases="0.5.23-0.5.20"),))
    with pytest.raises(ValueError, match="Clause.releases"):
        _validate((Clause("PFX-1", "prefix", "engine", "S.", "R", "src", releases="0.6.0+"),))


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
    fresh = render_markdown(tests=clause_test_files(ROOT / "tests"))
    assert committed == fresh, "docs/spec.md is stale: run `hicache-conform spec --tests tests --write docs/spec.md`"


def test_every_clause_lists_the_test_files_naming_it(tmp_path):
    folder = tmp_path / "tests"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "test_a.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.clause('KEY-1')\n"
        "@pytest.mark.clause('PFX-2', 'PFX-1')\n"
        "def test_x(): pass\n"
        "IDS = ['BE-2']\n"
        "@pytest.mark.parametrize('v', [pytest.param(1, marks=pytest.mark.clause(*IDS))])\n"
        "def test_y(v): pass\n"
    )
    (folder / "test_b.py").write_text("import pytest\n@pytest.mark.clause('PFX-2')\ndef test_z(): pass\n")
    (folder / "helper.py").write_text("import pytest\n@pytest.mark.clause('BE-3')\ndef test_w(): pass\n")
    assert clause_test_files(folder) == {
        "BE-2": ("tests/sub/test_a.py",),
        "KEY-1": ("tests/sub/test_a.py",),
        "PFX-1": ("tests/sub/test_a.py",),
        "PFX-2": ("tests/sub/test_a.py", "tests/test_b.py"),
    }
    text = render_markdown(tests={"KEY-1": ("tests/sub/test_a.py",)})
    assert "- *Tests:* `tests/sub/test_a.py`" in text and "- *Tests:* none" in text
    assert "*Tests:*" not in render_markdown()


def test_a_test_file_that_does_not_collect_stops_the_map(tmp_path):
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_broken.py").write_text("def (:\n")
    with pytest.raises(TestMapError, match="collecting the tests in .* failed"):
        clause_test_files(folder)


def test_cli_lists_the_clauses_of_a_release(capsys):
    from hicache_contracts.cli import main

    assert main(["clauses", "--sglang-version", "0.5.20"]) == 0
    out = capsys.readouterr().out
    assert "hold for SGLang 0.5.20" in out and "CTL-16   0.5.20–0.5.22" in out and "CTL-14" not in out
    assert main(["clauses", "--sglang-version", "9.9.9"]) == 2
    assert "--sglang-version: sglang version '9.9.9' is not a pinned release" in capsys.readouterr().err
    assert main(["divergences", "--check", str(ROOT / "docs" / "divergences.md")]) == 0
