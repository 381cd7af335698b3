"""The per-release linker interface table against the wheels, and docs/linkers.md's generated section.

Scenario: read each pinned release's UnifiedCacheLinker and loader from its wheel (not imported).
Expected: the abstract methods with their parameters, the declared attributes, the concrete
helpers and the loader's keywords equal ``INTERFACES``; the table in docs/linkers.md equals a
fresh render.
Why it matters: the loadability verdicts and the guide are only as right as the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hicache_contracts.linker.interface import INTERFACES, read_release_interface, render_interface_section
from hicache_spec.releases import SGLANG_RELEASES
from tests.sglang_wheels import wheel_root

DOC = Path(__file__).resolve().parents[2] / "docs" / "linkers.md"


@pytest.mark.clause("LNK-1", "LNK-2", "LNK-3", "LNK-4", "LNK-5", "LNK-6")
@pytest.mark.parametrize("release", SGLANG_RELEASES)
def test_interface_table_matches_the_wheel(release: str) -> None:
    assert read_release_interface(wheel_root(release), release) == INTERFACES[release]


def test_docs_table_is_fresh() -> None:
    text = DOC.read_text()
    assert render_interface_section(text) == text, (
        "docs/linkers.md is stale: python -m hicache_contracts.linker.interface --write docs/linkers.md"
    )


def test_a_missing_section_is_refused() -> None:
    with pytest.raises(ValueError, match="has no"):
        render_interface_section("no markers here")
