"""What SGLang's Mooncake direct linker asks of its storage backend, read from each wheel (LNK-23).

Scenario: parse each pinned release's mooncake_direct_linker.py; also two planted variants of
0.5.23's source (a prefix passed to batch_exists_v2, an extra_info carrying more than session_id).
Expected: batch_exists_v2 gets the KV keys and the expanded transfers, nothing else; batch_set_v2
gets the transfers and at most an extra_info that is None or carries only session_id; the planted
variants are reported.
Why it matters: a backend behind a direct linker gets no prefix metadata and no host pool; one
that requires them fails only in production.
"""

from __future__ import annotations

import ast
from typing import cast

import pytest

from hicache_spec.releases import SGLANG_RELEASES
from tests.sglang_wheels import wheel_root

SOURCE = "sglang/srt/mem_cache/storage/mooncake_store/mooncake_direct_linker.py"


def storage_call_problems(source: str) -> list[str]:
    """Return each way the source's storage calls go beyond LNK-23 (empty: none)."""
    problems = []
    tree = ast.parse(source)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    exists = [c for c in calls if getattr(c.func, "attr", "") == "batch_exists_v2"]
    sets = [c for c in calls if getattr(c.func, "attr", "") == "batch_set_v2"]
    if not exists or not sets:
        problems.append("no batch_exists_v2 / batch_set_v2 call found")
    for call in exists:
        if len(call.args) != 2 or call.keywords:
            problems.append(f"line {call.lineno}: batch_exists_v2 gets {ast.unparse(call)}")
    for call in sets:
        if len(call.args) > 2 or call.keywords:
            problems.append(f"line {call.lineno}: batch_set_v2 gets {ast.unparse(call)}")
    for call in calls:
        if getattr(call.func, "id", "") != "HiCacheStorageExtraInfo":
            continue
        for keyword in call.keywords:
            keys = (
                [cast(ast.Constant, k).value for k in keyword.value.keys]
                if isinstance(keyword.value, ast.Dict)
                else None
            )
            if keyword.arg != "extra_info" or keys != ["session_id"]:
                problems.append(f"line {call.lineno}: extra_info is {ast.unparse(call)}")
        if call.args:
            problems.append(f"line {call.lineno}: extra_info is {ast.unparse(call)}")
    return problems


@pytest.mark.clause("LNK-23")
@pytest.mark.parametrize("release", SGLANG_RELEASES)
def test_mooncake_direct_linker_storage_calls(release: str) -> None:
    assert storage_call_problems((wheel_root(release) / SOURCE).read_text()) == []


@pytest.mark.clause("LNK-23")
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("batch_exists_v2(page_keys, expanded)", "batch_exists_v2(page_keys, expanded, prefix_keys=page_keys)"),
        ('extra_info={"session_id": session_id}', 'extra_info={"session_id": session_id, "prefix_keys": []}'),
    ],
    ids=["prefix-to-exists", "extra-info-key"],
)
def test_planted_storage_calls_are_reported(old: str, new: str) -> None:
    source = (wheel_root("0.5.23") / SOURCE).read_text()
    assert old in source
    assert storage_call_problems(source.replace(old, new))
