"""Clause text in the guides, rendered from the registry: a guide cites a clause, it never restates one by hand.

Where a guide says what a clause states, it does so inside a marked block that
``render_guide`` fills from the registry::

    <!-- clause: HYB-5, CTL-7 -->
    - **HYB-5** (every pinned release (since 0.5.20)) — <its statement>
    - **CTL-7** (...) — <its statement>
    <!-- /clause -->

The decisions of ``docs/index.md`` are one block, ``<!-- clauses: decisions -->``:
the open questions of ``OPEN_QUESTIONS`` and every project decision of the
registry. ``stale_blocks`` names each block whose text is not a fresh render;
the tests fail on any. Re-render with::

    python -m hicache_spec.guides --write README.md docs/*.md
    python -m hicache_spec.guides --check README.md docs/*.md   # exit 1 when a block is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Optional, Sequence

from hicache_spec.registry import DECISION, Clause, clause, clauses, describe_releases

__all__ = ["OPEN_QUESTIONS", "decision_ids", "main", "render_block", "render_guide", "stale_blocks"]

OPEN_QUESTIONS: tuple[str, ...] = ("PFX-9", "PFX-10", "BE-21", "HYB-5", "HYB-6", "HYB-7")
"""The clauses that settled a question the wheels left open, listed first among the decisions."""

BLOCK = re.compile(r"<!-- (clause|clauses): ([^>]*?) -->\n(.*?)<!-- /\1 -->", re.S)
"""A marked block: its kind (``clause`` or ``clauses``), its argument and its body."""


def _is_decision(item: Clause) -> bool:
    return item.releases == DECISION or item.source.startswith(("decision", "project decision"))


def decision_ids() -> tuple[str, ...]:
    """Return the IDs the decisions block lists: ``OPEN_QUESTIONS``, then every other project decision."""
    ids = list(OPEN_QUESTIONS)
    ids += [item.id for item in clauses() if _is_decision(item) and item.id not in ids]
    return tuple(ids)


def _render_clause(item: Clause) -> str:
    return f"- **{item.id}** ({describe_releases(item)}) — {item.statement}"


def render_block(kind: str, argument: str) -> str:
    """Return the body of one block: a line per clause; raise ValueError naming what is wrong."""
    if kind == "clauses":
        if argument.strip() != "decisions":
            raise ValueError(f"guide block 'clauses': the only list is 'decisions' (got {argument.strip()!r})")
        ids: Sequence[str] = decision_ids()
    elif kind == "clause":
        ids = [part.strip() for part in argument.split(",") if part.strip()]
        if not ids:
            raise ValueError("guide block 'clause': names no clause ID (e.g. <!-- clause: HYB-5 -->)")
    else:
        raise ValueError(f"guide block: kind must be 'clause' or 'clauses' (got {kind!r})")
    try:
        return "".join(_render_clause(clause(clause_id)) + "\n" for clause_id in ids)
    except KeyError as error:
        raise ValueError(f"guide block '{kind}: {argument.strip()}': {error.args[0]}") from None


def render_guide(text: str) -> str:
    """Return ``text`` with every marked block rendered afresh from the registry."""
    return BLOCK.sub(
        lambda m: f"<!-- {m.group(1)}: {m.group(2)} -->\n{render_block(m.group(1), m.group(2))}<!-- /{m.group(1)} -->",
        text,
    )


def stale_blocks(text: str) -> list[str]:
    """Return ``'kind: argument'`` for every marked block of ``text`` whose body is not a fresh render."""
    return [
        f"{m.group(1)}: {m.group(2).strip()}"
        for m in BLOCK.finditer(text)
        if m.group(3) != render_block(m.group(1), m.group(2))
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``--write`` re-renders the blocks of each file; ``--check`` exits 1 naming each stale block."""
    parser = argparse.ArgumentParser(prog="python -m hicache_spec.guides", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="re-render the marked blocks in place")
    mode.add_argument("--check", action="store_true", help="exit 1 if a marked block is stale")
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    stale = 0
    for path in args.paths:
        text = path.read_text(encoding="utf-8")
        try:
            found = stale_blocks(text)
        except ValueError as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
        for block in found:
            print(f"{path}: stale block <!-- {block} -->", file=sys.stderr)
        stale += len(found)
        if args.write and found:
            path.write_text(render_guide(text), encoding="utf-8")
            print(f"rendered {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
