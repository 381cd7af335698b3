"""to_sglang / from_sglang round-trip every model through the release's own classes.

Scenario: for each model, instances at their defaults and with every field
set away from its default, converted to the release's class and back.
Expected: equal models; a field the release lacks is dropped while it holds
its default and otherwise refused with a ContractViolation naming the field
and the release; a release field the project lacks is refused the same way;
never a traceback. A planted interop bug fails the round trip.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hicache_contracts.errors import ContractViolation
from hicache_contracts.interop import from_sglang, to_sglang
from hicache_contracts.models import (
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
)

KEYS = [f"{index:064x}" for index in range(3)]


def samples() -> list:
    """Models at their defaults and with fields set, one per field that has a non-default value here."""
    indices = torch.arange(6, dtype=torch.int64)
    return [
        HiCacheStorageExtraInfo(),
        HiCacheStorageExtraInfo(prefix_keys=[]),  # type: ignore[arg-type]
        HiCacheStorageExtraInfo(prefix_keys=KEYS[:2], extra_info={"session_id": "s-1"}),  # type: ignore[arg-type]
        HiCacheStorageConfig.single_rank(),
        HiCacheStorageConfig.single_rank(
            model_name=None,
            tp_size=4,
            tp_rank=3,
            pp_size=2,
            pp_rank=1,
            attn_cp_size=2,
            attn_cp_rank=1,
            is_page_first_layout=True,
            enable_storage_metrics=True,
            tp_lcm_size=8,
            should_split_heads=True,
            extra_config={"path": "/x", "nested": {"a": 1}},
        ),
        HiCacheStorageConfig.single_rank(dp_rank=2),
        HiCacheStorageConfig.single_rank(
            is_mla_model=True, tp_size=2, tp_rank=1, dcp_size=2, dcp_rank=1, logical_page_size=64
        ),
        PoolTransfer(name="kv", host_indices=indices, keys=KEYS),  # type: ignore[arg-type]
        PoolTransfer(
            name="swa",  # type: ignore[arg-type]
            host_indices=indices,
            device_indices=indices,
            keys=KEYS,  # type: ignore[arg-type]
            hit_policy="trailing_pages",  # type: ignore[arg-type]
            nodes_to_load=["node"],
        ),
        PoolTransfer(name="indexer", keys=KEYS, indices_from_pool="kv"),  # type: ignore[arg-type]
        PoolTransfer(name="mamba", keys=KEYS, hit_policy="block_groups", block_pages=4, group_pages=2),  # type: ignore[arg-type]
        PoolTransfer(name="auxiliary_swa", keys=KEYS),  # type: ignore[arg-type]
        PoolTransferResult(kv_hit_pages=0),
        PoolTransferResult(kv_hit_pages=3, extra_pool_hit_pages={"swa": 2, "mamba": 3}),  # type: ignore[arg-type]
        PoolTransferResult(kv_hit_pages=5, extra_pool_hit_pages={"swa": 5}, restorable_prefix_pages=[1, 2, 5]),  # type: ignore[arg-type]
    ]


def _release_lacks(model, module) -> list[str]:
    """The fields (or enum values) of ``model`` that hold a non-default value the release cannot carry."""
    cls = getattr(module, type(model).__name__)
    theirs = {field.name for field in dataclasses.fields(cls)}
    lacking = [
        name
        for name, info in type(model).model_fields.items()
        if name not in theirs and getattr(model, name) != info.default
    ]
    for field, enum_name in (("name", "PoolName"), ("indices_from_pool", "PoolName"), ("hit_policy", "PoolHitPolicy")):
        value = getattr(model, field, None)
        if value is not None and value.value not in {member.value for member in getattr(module, enum_name)}:
            lacking.append(field)
    return lacking


def round_trip_problems(to, back, module, release) -> list[str]:
    """Round-trip every sample with ``to`` / ``back``; return what went wrong."""
    problems = []
    for model in samples():
        lacking = _release_lacks(model, module)
        try:
            converted = to(model, storage_module=module)
        except ContractViolation as violation:
            if not lacking:
                problems.append(f"{model!r}: refused although SGLang {release} can hold it: {violation}")
            elif release not in str(violation) or not any(field in violation.field for field in lacking):
                problems.append(f"{model!r}: refusal does not name the field and the release: {violation}")
            continue
        if lacking:
            problems.append(f"{model!r}: {lacking} silently dropped for SGLang {release}")
            continue
        if type(converted) is not getattr(module, type(model).__name__):
            problems.append(f"{model!r}: became {type(converted)!r}, not SGLang's class")
            continue
        if back(converted) != model:
            problems.append(f"{model!r}: came back as {back(converted)!r}")
    return problems


@pytest.mark.clause("PFX-1", "BE-1", "BE-8", "BE-19", "BE-21", "BE-25")
def test_every_model_round_trips_through_the_release(sglang_storage, release):
    problems = round_trip_problems(to_sglang, from_sglang, sglang_storage, release)
    assert problems == [], "\n".join(problems)


def _planted_empty_prefix_to_none(model, *, storage_module):
    """Planted bug: ``[]`` (feature on, at the root) handed over as None (feature off)."""
    if isinstance(model, HiCacheStorageExtraInfo) and model.prefix_keys is not None and len(model.prefix_keys) == 0:
        return storage_module.HiCacheStorageExtraInfo(prefix_keys=None, extra_info=None)
    return to_sglang(model, storage_module=storage_module)


def _planted_silent_drop(model, *, storage_module):
    """Planted bug: fields the release lacks are dropped even when they hold a value."""
    if isinstance(model, HiCacheStorageConfig):
        cls = storage_module.HiCacheStorageConfig
        names = {field.name for field in dataclasses.fields(cls)}
        values = {name: getattr(model, name) for name in type(model).model_fields if name in names}
        values["extra_config"] = None if model.extra_config is None else dict(model.extra_config)
        return cls(**values)
    return to_sglang(model, storage_module=storage_module)


def _planted_lost_restorable(obj):
    """Planted bug: from_sglang forgets restorable_prefix_pages."""
    model = from_sglang(obj)
    if isinstance(model, PoolTransferResult) and model.restorable_prefix_pages is not None:
        return model.model_copy(update={"restorable_prefix_pages": None})
    return model


@pytest.mark.clause("PFX-1", "BE-21")
def test_planted_interop_bugs_fail_the_round_trip(sglang_storage, release):
    assert round_trip_problems(_planted_empty_prefix_to_none, from_sglang, sglang_storage, release)
    assert round_trip_problems(to_sglang, _planted_lost_restorable, sglang_storage, release)
    cls = sglang_storage.HiCacheStorageConfig
    if "dcp_size" not in {field.name for field in dataclasses.fields(cls)}:  # only where a field is missing
        assert round_trip_problems(_planted_silent_drop, from_sglang, sglang_storage, release)


@pytest.mark.clause("BE-8")
def test_a_release_field_the_project_lacks_is_refused_unless_default(sglang_storage, release):
    """from_sglang on a subclass of the release's class with one more field: dropped at its default, else refused."""
    base = sglang_storage.HiCacheStorageExtraInfo
    extended = dataclasses.make_dataclass(
        "HiCacheStorageExtraInfo", [("trace_id", object, dataclasses.field(default=None))], bases=(base,)
    )
    assert from_sglang(extended(prefix_keys=[], trace_id=None)) == HiCacheStorageExtraInfo(prefix_keys=[])
    with pytest.raises(ContractViolation) as caught:
        from_sglang(extended(prefix_keys=[], trace_id="t-1"))
    assert caught.value.field == "HiCacheStorageExtraInfo.trace_id"
    assert "does not model" in str(caught.value)


@pytest.mark.clause("BE-19")
def test_enum_members_convert_to_the_release_members(sglang_storage, release):
    for member in PoolName:
        if member.value in {item.value for item in sglang_storage.PoolName}:
            converted = to_sglang(PoolTransfer(name=member), storage_module=sglang_storage)
            assert converted.name is sglang_storage.PoolName(member.value)
    for policy in PoolHitPolicy:
        if policy.value in {item.value for item in sglang_storage.PoolHitPolicy}:
            converted = to_sglang(PoolTransfer(name="swa", hit_policy=policy), storage_module=sglang_storage)
            assert converted.hit_policy is sglang_storage.PoolHitPolicy(policy.value)
