"""The trace-format example of docs/engines.md ("The trace file") names only fields of the trace models, and loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hicache_contracts.engine._trace import TraceCall, TraceDocument, TraceOperation, TraceTransfer
from hicache_contracts.models import FinalAck, PoolHitsAck, ProgressAck

MODELS = (TraceDocument, TraceOperation, TraceCall, TraceTransfer, ProgressAck, PoolHitsAck, FinalAck)
KNOWN = {name for model in MODELS for name in model.model_fields}
POOL_NAMES = {"indexer"}
"""Keys of a v2 result in the example: pool names, not fields."""


def unknown_keys(example: str) -> set[str]:
    """The JSON object keys of ``example`` that are no field of a trace model (nor a pool name)."""
    return set(re.findall(r'"(\w+)":', example)) - KNOWN - POOL_NAMES


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "engines.md"


def _example() -> str:
    """The guide's JSON block of a trace file."""
    (block,) = [b for b in re.findall(r"```json\n(.*?)```", GUIDE.read_text(), re.S) if '"hicache-trace/1"' in b]
    return block


def test_the_guides_example_names_only_fields_and_loads() -> None:
    example = _example()
    assert '"operations"' in example and '"calls"' in example
    assert unknown_keys(example) == set()
    assert TraceDocument.model_validate_json(example).operations[0].calls


@pytest.mark.parametrize(
    "planted",
    ['{"index": 0, "method": "batch_exists", "extra_info": "present"}', '{"operation_id": "req-7", "chain_keys": []}'],
)
def test_a_field_name_that_fails_to_load_is_caught(planted: str) -> None:
    assert unknown_keys(planted)
