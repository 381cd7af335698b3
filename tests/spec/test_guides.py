"""Clause text in the guides is rendered from the registry, never restated by hand.

Scenario: README.md and every guide of docs/; docs/index.md's decisions; a
guide with a stale sentence planted in a marked block; blocks naming no
clause, an unknown clause or an unknown list.
Expected: every marked block is a fresh render of the registry; the decisions
block lists the open questions and every project decision; a planted stale
sentence is named by ``stale_blocks`` and by ``--check`` (exit 1), and
``--write`` repairs it; a bad block raises an error naming it.
Why it matters: a guide that restates a clause drifts when the clause is
corrected (the decisions of docs/index.md still gave PFX-9's old
operation-level prefix after the clause was re-decided).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hicache_spec.guides import OPEN_QUESTIONS, decision_ids, main, render_block, render_guide, stale_blocks
from hicache_spec.registry import DECISION, clause, clauses

ROOT = Path(__file__).resolve().parents[2]
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

STALE_PFX_9 = (
    "- **PFX-9** (since 0.5.21) — sidecar v2 reads and v2 writes carry the *operation-level* prefix (the prefix "
    "before the operation's first page), also for trailing-window transfers whose keys start later."
)
"""The sentence docs/index.md carried after PFX-9 was re-decided."""


@pytest.mark.parametrize("path", GUIDES, ids=lambda path: path.name)
def test_every_marked_block_of_a_guide_is_a_fresh_render(path: Path) -> None:
    stale = stale_blocks(path.read_text(encoding="utf-8"))
    assert not stale, f"{path.name}: stale {stale}; run `python -m hicache_spec.guides --write {path.name}`"


def test_the_decisions_of_the_index_are_the_generated_block() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = text[text.index("## Decisions") : text.index("## Guides")]
    assert "<!-- clauses: decisions -->" in section
    listed = [line.split("**")[1] for line in section.splitlines() if line.startswith("- **")]
    assert listed == list(decision_ids())
    assert list(decision_ids()[: len(OPEN_QUESTIONS)]) == list(OPEN_QUESTIONS)
    decisions = {item.id for item in clauses() if item.releases == DECISION}
    assert decisions <= set(listed)


def test_a_planted_stale_sentence_is_caught_and_repaired(tmp_path: Path, capsys) -> None:
    """The planted bug: the decisions block of docs/index.md with PFX-9's old text in it."""
    fresh = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    (line,) = [line for line in fresh.splitlines() if line.startswith("- **PFX-9**")]
    planted = fresh.replace(line, STALE_PFX_9)
    assert stale_blocks(planted) == ["clauses: decisions"]
    assert render_guide(planted) == fresh
    guide = tmp_path / "index.md"
    guide.write_text(planted, encoding="utf-8")
    assert main(["--check", str(guide)]) == 1
    assert "stale block <!-- clauses: decisions -->" in capsys.readouterr().err
    assert main(["--write", str(guide)]) == 0
    assert guide.read_text(encoding="utf-8") == fresh
    assert main(["--check", str(guide)]) == 0


def test_a_stale_clause_block_in_a_guide_is_caught() -> None:
    """The planted bug: docs/controller.md's HYB-5 block saying no KV is written when the sidecars fail."""
    fresh = (ROOT / "docs" / "controller.md").read_text(encoding="utf-8")
    statement = clause("HYB-5").statement
    assert statement in fresh
    planted = fresh.replace(statement, statement + " If they fail, no KV is written.")
    assert stale_blocks(planted) == ["clause: HYB-5"]


def test_a_block_renders_each_clause_with_its_releases() -> None:
    body = render_block("clause", "PFX-9, CTL-15")
    assert body.splitlines() == [
        f"- **PFX-9** (since 0.5.21) — {clause('PFX-9').statement}",
        f"- **CTL-15** (every pinned release (since 0.5.20)) — {clause('CTL-15').statement}",
    ]


@pytest.mark.parametrize(
    "kind, argument, message",
    [
        ("clause", "PFX-999", "unknown clause ID 'PFX-999'"),
        ("clause", " , ", "names no clause ID"),
        ("clauses", "everything", "the only list is 'decisions'"),
        ("clauze", "PFX-1", "kind must be 'clause' or 'clauses'"),
    ],
)
def test_a_bad_block_is_refused_with_what_is_wrong(kind: str, argument: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_block(kind, argument)


def test_check_reports_a_bad_block_and_writes_nothing(tmp_path: Path, capsys) -> None:
    guide = tmp_path / "guide.md"
    text = "intro\n<!-- clause: PFX-999 -->\nold\n<!-- /clause -->\n"
    guide.write_text(text, encoding="utf-8")
    assert main(["--write", str(guide)]) == 2
    assert "PFX-999" in capsys.readouterr().err
    assert guide.read_text(encoding="utf-8") == text
