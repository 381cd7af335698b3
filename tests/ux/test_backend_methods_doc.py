"""docs/backend-methods.md: generated from the protocols, fresh, and true to each release's ``HiCacheStorage``.

Scenario: render the reference from ``hicache_contracts.protocols``; read
``HiCacheStorage`` of every pinned release's wheel.
Expected: the committed file equals a fresh render; every protocol method is
there with its signature and the clauses its docstring names; the releases
listed for a method are exactly those whose ``HiCacheStorage`` declares it.
Why it matters: a vendor writes a backend from this page alone.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from hicache_contracts import protocols
from hicache_contracts.cli import main
from hicache_contracts.methods import backend_methods, render_backend_methods
from hicache_spec.releases import SGLANG_RELEASES
from tests.sglang_wheels import wheel_root

PROJECT = Path(__file__).resolve().parents[2]
DOCUMENT = PROJECT / "docs" / "backend-methods.md"


def test_the_committed_reference_is_fresh(capsys) -> None:
    assert main(["methods", "--check", str(DOCUMENT)]) == 0, (
        "regenerate: hicache-conform methods --write docs/backend-methods.md"
    )
    assert DOCUMENT.read_text() == render_backend_methods()


def test_a_stale_reference_is_refused(tmp_path: Path, capsys) -> None:
    stale = tmp_path / "backend-methods.md"
    stale.write_text(render_backend_methods().replace("batch_get_v1", "batch_get_v0", 1))
    assert main(["methods", "--check", str(stale)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{stale}: stale; regenerate with `hicache-conform methods --write {stale}`"
    )


@pytest.mark.clause("BE-14", "BE-2")
def test_every_protocol_method_is_listed_with_its_signature_and_clauses() -> None:
    listed = {method.name: method for method in backend_methods()}
    for name in protocols.__all__:
        protocol = getattr(protocols, name)
        for attribute, function in vars(protocol).items():
            if not inspect.isfunction(function) or attribute.startswith("_"):
                continue
            method = listed[attribute]
            assert method.protocol == name
            assert method.signature.startswith(f"{attribute}(") and "self" not in method.signature
            assert f"### {attribute}\n" in render_backend_methods()
    assert listed["batch_get_v1"].signature == (
        "batch_get_v1(keys: list[str], host_indices: Any, extra_info: Optional[Any] = None) -> list[bool]"
    )
    assert {"BE-14", "BE-15", "BE-16"} <= set(listed["batch_get_v1"].clauses)
    assert "BE-2" in listed["batch_exists"].clauses


def declared_methods(version: str) -> set[str]:
    """The method names ``HiCacheStorage`` declares in a release's wheel; skip if the wheel is absent."""
    path = wheel_root(version) / "sglang" / "srt" / "mem_cache" / "hicache_storage.py"
    if not path.is_file():
        pytest.fail(f"SGLang {version}'s wheel has no mem_cache/hicache_storage.py")
    tree = ast.parse(path.read_text())
    (storage,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "HiCacheStorage"]
    return {node.name for node in storage.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("version", SGLANG_RELEASES)
def test_the_releases_of_each_method_match_the_wheels(version: str) -> None:
    declared = declared_methods(version)
    for method in backend_methods():
        assert (version in method.releases) == (method.name in declared), (method.name, version)
