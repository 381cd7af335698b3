"""The trace-format example in ``hicache_contracts.engine._trace``'s docstring names only fields that load."""

from __future__ import annotations

import re

import pytest

from hicache_contracts.engine import _trace
from hicache_contracts.engine._trace import TraceCall, TraceDocument, TraceOperation, TraceTransfer
from hicache_contracts.models import FinalAck, PoolHitsAck, ProgressAck

MODELS = (TraceDocument, TraceOperation, TraceCall, TraceTransfer, ProgressAck, PoolHitsAck, FinalAck)
KNOWN = {name for model in MODELS for name in model.model_fields}
POOL_NAMES = {"indexer"}
"""Keys of a v2 result in the example: pool names, not fields."""


def unknown_keys(example: str) -> set[str]:
    """The JSON object keys of ``example`` that are no field of a trace model (nor a pool name)."""
    return set(re.findall(r'"(\w+)":', example)) - KNOWN - POOL_NAMES


def _example(doc: str) -> str:
    return doc.split("::", 1)[1].split("\n\n", 2)[1]


def test_the_docstring_example_names_only_loadable_fields() -> None:
    example = _example(_trace.__doc__)
    assert '"operations"' in example and '"calls"' in example
    assert unknown_keys(example) == set()


@pytest.mark.parametrize(
    "planted",
    ['{"index": 0, "method": "batch_exists", "extra_info": "present"}', '{"operation_id": "req-7", "chain_keys": []}'],
)
def test_a_field_name_that_fails_to_load_is_caught(planted: str) -> None:
    assert unknown_keys(planted)
