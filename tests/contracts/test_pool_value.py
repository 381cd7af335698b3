"""``pool_value``: the one normalisation of a pool name (ours, SGLang's, or its value) to the plain str."""

from __future__ import annotations

import enum

import pytest

from hicache_contracts import PoolName, pool_value

OtherPoolName = enum.Enum("PoolName", [("KV", "kv"), ("INDEXER", "indexer")])  # type: ignore[misc]  # SGLang's name
"""Another release's PoolName: a plain Enum, whose str() is ``PoolName.KV``, hashing apart from ``"kv"``."""


def _planted_str(name):  # what str() alone gives
    return str(name)


@pytest.mark.clause("BE-19")
@pytest.mark.parametrize("name", [PoolName.KV, OtherPoolName.KV, "kv"], ids=["ours", "another enum", "value"])
def test_every_spelling_of_a_pool_gives_its_value(name) -> None:
    assert pool_value(name) == "kv" and type(pool_value(name)) is str


@pytest.mark.clause("BE-19")
def test_str_alone_misses_another_enum() -> None:
    assert _planted_str(OtherPoolName.INDEXER) != "indexer"
    assert pool_value(OtherPoolName.INDEXER) == "indexer"
