"""Protocol literals have one home: the pool and policy names are spelled in the spec and in the models' enums.

Scenario: every string constant in the code of ``spec/``, ``contracts/`` and ``reference/`` (docstrings
aside). Expected: the protocol's names (``"kv"``, the hit policies, the prefetch policies) appear only in
their homes: ``spec/pools.py`` and ``spec/values.py`` for the spec's functions, and
``contracts/models/_enums.py``, whose members mirror SGLang's and are checked equal to the spec's names.
Why it matters: a name spelled twice drifts, and a pool or policy compared against a stale spelling is
silently never matched.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from hicache_contracts.models import PoolHitPolicy, PoolName, PrefetchPolicy
from hicache_spec import ALL_PAGES, BLOCK_GROUPS, KV, TRAILING_PAGES
from hicache_spec.values import PREFETCH_POLICIES

ROOT = Path(__file__).resolve().parents[2]
LITERALS = frozenset({KV, ALL_PAGES, TRAILING_PAGES, BLOCK_GROUPS, *PREFETCH_POLICIES} - {"timeout"})
"""The names checked ("timeout" is too common a word to stand for the policy alone)."""
HOMES = {"spec/pools.py", "spec/values.py", "contracts/models/_enums.py"}


def literals_outside_their_home(folders: tuple[str, ...] = ("spec", "contracts", "reference")) -> list[str]:
    root = globals()["ROOT"]
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            shown = path.relative_to(root).as_posix()
            if shown in HOMES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in LITERALS and id(node) not in docstrings:
                    found.append(f"{shown}:{node.lineno}: {node.value!r}")
    return found


def test_protocol_literals_are_spelled_only_in_their_homes() -> None:
    assert literals_outside_their_home() == []


def test_a_planted_second_spelling_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "module.py").write_text('"""Docs may say "kv"."""\nPOOL = "kv"\nPOLICY = "trailing_pages"\n')
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert literals_outside_their_home(("planted",)) == [
        "planted/module.py:2: 'kv'",
        "planted/module.py:3: 'trailing_pages'",
    ]


def test_the_models_enums_spell_the_spec_names() -> None:
    assert PoolName.KV.value == KV
    assert [policy.value for policy in PoolHitPolicy] == [ALL_PAGES, TRAILING_PAGES, BLOCK_GROUPS]
    assert get_args(PrefetchPolicy) == PREFETCH_POLICIES
