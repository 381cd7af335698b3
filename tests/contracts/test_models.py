"""The contract models: SGLang's names and fields, frozen all the way down, JSON round trips.

Each property is written as a ``check_*`` function over the class or builder
under test, so that the planted-bug variants at the end of the file can be
run through the very same check and seen to fail. Over 450 lines: each check sits beside the planted
variants it must catch.
"""

from __future__ import annotations

import pickle
from types import MappingProxyType, SimpleNamespace
from typing import Annotated, Any, Callable, Optional

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from pydantic import PlainSerializer

import hicache_spec
from tests.sglang_standin import POOL_NAMES
from hicache_contracts import (
    BackupOperationSnapshot,
    ContractViolation,
    FinalAck,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PageKeys,
    PoolHitPolicy,
    PoolHitsAck,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
    PrefetchOperationSnapshot,
    PrefixKeys,
    ProgressAck,
    ReadOnlyMapping,
    validate_ack,
    validate_ack_json,
    validate_host_indices,
    validate_page_keys,
)
from hicache_contracts.models import ContractModel

PAGE_KEY = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
KEY = st.one_of(PAGE_KEY, st.text(min_size=1, max_size=8))
KEYS = st.lists(KEY, max_size=8)
PREFIX = st.one_of(st.none(), KEYS)
JSON_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
EXTRA = st.one_of(st.none(), st.dictionaries(st.text(max_size=6), JSON_VALUE, max_size=4))


# ---------------------------------------------------------------- JSON round trips
def check_json_round_trip(model: Any) -> None:
    """A model survives model_dump_json / model_validate_json: equal, and None never becomes [] nor [] None."""
    restored = type(model).model_validate_json(model.model_dump_json())
    assert restored == model
    for field in type(model).model_fields:
        before, after = getattr(model, field), getattr(restored, field)
        assert (before is None) == (after is None), f"{field}: None and empty must stay distinct"
        if isinstance(before, (PrefixKeys, ReadOnlyMapping)):
            assert type(after) is type(before) and len(after) == len(before)


@pytest.mark.clause("PFX-1", "PFX-4", "BE-8")
@given(prefix=PREFIX, extra=EXTRA)
def test_extra_info_round_trips_through_json(prefix: Optional[list], extra: Optional[dict]) -> None:
    check_json_round_trip(HiCacheStorageExtraInfo(prefix_keys=prefix, extra_info=extra))  # type: ignore[arg-type]


CONFIG = st.builds(
    lambda tp, pp, cp, dp, flags, name, extra, lcm: HiCacheStorageConfig(
        tp_rank=tp[0],
        tp_size=tp[1],
        pp_rank=pp[0],
        pp_size=pp[1],
        attn_cp_rank=cp[0],
        attn_cp_size=cp[1],
        is_mla_model=flags[0],
        enable_storage_metrics=flags[1],
        is_page_first_layout=flags[2],
        model_name=name,
        dp_rank=dp[0],
        tp_lcm_size=None if lcm is None else lcm * tp[1],
        should_split_heads=flags[3],
        extra_config=extra,
    ),
    *[st.integers(1, 8).flatmap(lambda size: st.tuples(st.integers(0, size - 1), st.just(size)))] * 4,
    st.tuples(*[st.booleans()] * 4),
    st.one_of(st.none(), st.text(max_size=10)),
    EXTRA,
    st.one_of(st.none(), st.integers(1, 4)),
)


@pytest.mark.clause("BE-1", "NS-1", "NS-2", "NS-3", "NS-4")
@given(config=CONFIG)
def test_config_round_trips_through_json(config: HiCacheStorageConfig) -> None:
    check_json_round_trip(config)


@pytest.mark.clause("KEY-2", "BE-15", "HYB-7")
@given(
    keys=st.one_of(st.none(), KEYS),
    pages=st.integers(0, 4),
    name=st.sampled_from(list(PoolName)),
    policy=st.sampled_from(list(PoolHitPolicy)),
    derived=st.booleans(),
)
def test_pool_transfer_round_trips_through_json(keys, pages, name, policy, derived) -> None:
    host = torch.arange(pages * 4, dtype=torch.int64)
    transfer = PoolTransfer(
        name=name,
        host_indices=host,
        device_indices=host[:pages],
        keys=keys,
        hit_policy=policy,
        indices_from_pool=PoolName.KV if derived else None,
    )
    check_json_round_trip(transfer)


@pytest.mark.clause("PFX-1", "CTL-2", "CTL-5", "CTL-6", "HYB-2", "BE-21")
@given(
    keys=KEYS,
    prefix=PREFIX,
    page_size=st.integers(1, 64),
    tokens=st.integers(0, 10**6),
    policy=st.sampled_from(["best_effort", "wait_complete", "timeout"]),
    hits=st.dictionaries(st.sampled_from([p.value for p in PoolName]), st.integers(1, 9), max_size=3),
)
def test_operations_results_and_acks_round_trip(keys, prefix, page_size, tokens, policy, hits) -> None:
    check_json_round_trip(
        PrefetchOperationSnapshot(operation_id=7, keys=keys, prefix_keys=prefix, page_size=page_size, policy=policy)
    )
    check_json_round_trip(
        BackupOperationSnapshot(operation_id="node-3", keys=keys, prefix_keys=prefix, page_size=page_size, batch_size=4)
    )
    check_json_round_trip(PoolTransferResult(kv_hit_pages=min(hits.values(), default=0), extra_pool_hit_pages=hits))
    for ack in (
        ProgressAck(operation_id=1, slice_index=2, tokens=tokens),
        PoolHitsAck(operation_id=1, pool_hits=hits),
        FinalAck(operation_id=1, tokens=tokens, error=None if tokens % 2 else "terminated"),
    ):
        check_json_round_trip(ack)
        assert validate_ack_json(ack.model_dump_json()) == ack
        assert validate_ack(ack.model_dump()) == ack


# ---------------------------------------------------------------- extra info
@pytest.mark.clause("PFX-1", "PFX-3", "PFX-4", "PFX-5")
def test_extend_keeps_the_three_states_and_never_changes_the_original() -> None:
    off = HiCacheStorageExtraInfo()
    assert off.extend(["k"]).prefix_keys is None  # PFX-3: off stays off
    root = HiCacheStorageExtraInfo(prefix_keys=[], extra_info={"tenant": "t1"})  # type: ignore[arg-type]
    first = root.extend(["k0", "k1"])
    second = first.extend(["k2"])
    assert root.prefix_keys == [] and root.prefix_keys is not None  # PFX-4: [] grows, stays []
    assert first.prefix_keys == ["k0", "k1"] and second.prefix_keys == ["k0", "k1", "k2"]
    assert second.extra_info is root.extra_info  # read-only, so shared safely
    assert first is not root and second is not first


@pytest.mark.clause("BE-8", "BE-1")
def test_extra_mappings_are_read_only_copies_that_keep_unknown_keys() -> None:
    source = {"backend_name": "x", "vendor_knob": [1, 2]}
    info = HiCacheStorageExtraInfo(extra_info=source)  # type: ignore[arg-type]
    config = HiCacheStorageConfig.single_rank(extra_config=source)
    for mapping in (info.extra_info, config.extra_config):
        check_frozen_mapping(mapping, source)
    assert info.extra_info == source and info.extra_info.get("vendor_knob") == [1, 2]
    assert info.extra_info.copy() == source and type(info.extra_info.copy()) is dict
    assert pickle.loads(pickle.dumps(info)) == info


def check_frozen_mapping(mapping: Any, source: dict) -> None:
    """The model's mapping equals ``source``, refuses writes, and does not follow later writes to ``source``."""
    before = dict(source)
    assert mapping == before
    try:
        mapping["new"] = 1
    except TypeError:
        pass
    else:
        raise AssertionError("the model's mapping accepts writes")
    source["added_later"] = True
    try:
        assert "added_later" not in mapping, "the model shares the caller's dict"
    finally:
        del source["added_later"]
    assert mapping == before


@pytest.mark.clause("PFX-5")
def test_models_are_frozen() -> None:
    info = HiCacheStorageExtraInfo(prefix_keys=["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        info.prefix_keys = None  # type: ignore[misc]
    assert info.prefix_keys == ["a"]


# ---------------------------------------------------------------- enums and config
def test_enums_have_sglang_values() -> None:
    # The order and values of SGLang 0.5.23: the stand-in's list, which the release tier checks against the wheel.
    assert tuple(member.value for member in PoolName) == POOL_NAMES
    assert [member.value for member in PoolHitPolicy] == ["all_pages", "trailing_pages", "block_groups"]
    assert str(PoolName.KV) == "kv" == f"{PoolName.KV}" == PoolName.KV == hicache_spec.KV
    assert str(PoolHitPolicy.ALL_PAGES) == hicache_spec.ALL_PAGES == "all_pages"
    assert str(PoolHitPolicy.TRAILING_PAGES) == hicache_spec.TRAILING_PAGES == "trailing_pages"
    assert PoolTransfer(name="swa", hit_policy="trailing_pages").hit_policy is PoolHitPolicy.TRAILING_PAGES  # type: ignore[arg-type]


@pytest.mark.clause("BE-1")
def test_config_fields_in_sglang_order_and_single_rank() -> None:
    assert list(HiCacheStorageConfig.model_fields) == [
        "tp_rank",
        "tp_size",
        "pp_rank",
        "pp_size",
        "attn_cp_rank",
        "attn_cp_size",
        "is_mla_model",
        "enable_storage_metrics",
        "is_page_first_layout",
        "model_name",
        "tp_lcm_size",
        "should_split_heads",
        "dp_rank",
        "extra_config",
        "dcp_size",
        "dcp_rank",
        "logical_page_size",
    ]
    config = HiCacheStorageConfig.single_rank(tp_rank=3, tp_size=4, tp_lcm_size=8)
    assert (config.tp_rank, config.tp_size, config.tp_lcm_size, config.model_name) == (3, 4, 8, "test-model")
    assert config.extra_config is None and config.dp_rank == 0 and config.dcp_size == 1
    assert not hasattr(config, "dp_size")  # no SGLang release has it


# ---------------------------------------------------------------- transfers
def check_holds_tensors_without_copy(build: Callable[[torch.Tensor, torch.Tensor], Any]) -> None:
    """The built object holds the very tensors it was given: same object, same storage."""
    host = torch.arange(8 * 4, dtype=torch.int64)
    device = torch.arange(8 * 4, dtype=torch.int32)
    built = build(host, device)
    assert built.host_indices is host and built.device_indices is device, "a tensor was replaced"
    assert built.host_indices.data_ptr() == host.data_ptr()


@pytest.mark.clause("BE-15")
def test_validation_never_copies_tensors() -> None:
    check_holds_tensors_without_copy(
        lambda host, device: PoolTransfer(name=PoolName.KV, host_indices=host, device_indices=device, keys=["k"] * 8)  # type: ignore[arg-type]
    )
    host = torch.arange(8 * 4)
    assert validate_host_indices(host, 8, 4) is host


@pytest.mark.clause("KEY-2", "HYB-1")
def test_transfer_keys_read_like_a_list_and_kv_derived_flag() -> None:
    transfer = PoolTransfer(name="indexer", keys=("a", "b"), indices_from_pool="kv")  # type: ignore[arg-type]
    assert type(transfer.keys) is PageKeys and transfer.keys == ["a", "b"]
    assert transfer.keys + ["c"] == ["a", "b", "c"] and type(transfer.keys + ["c"]) is list
    assert ["z"] + transfer.keys == ["z", "a", "b"] and transfer.keys[-1] == "b" and transfer.keys[:1] == ["a"]
    assert transfer.is_kv_derived and not PoolTransfer(name="swa").is_kv_derived  # type: ignore[arg-type]
    assert PoolTransfer(name="kv", keys=[]).keys == [] and PoolTransfer(name="kv").keys is None  # type: ignore[arg-type]


@pytest.mark.clause("BE-21")
def test_transfer_result() -> None:
    empty = PoolTransferResult.empty()
    assert empty.kv_hit_pages == 0 and dict(empty.extra_pool_hit_pages) == {}
    result = PoolTransferResult(kv_hit_pages=2, extra_pool_hit_pages={PoolName.SWA: 2, "kv": 5})  # type: ignore[arg-type]
    assert result.extra_pool_hit_pages == {"swa": 2, "kv": 5}
    assert all(type(name) is str for name in result.extra_pool_hit_pages)
    with pytest.raises(TypeError):
        result.extra_pool_hit_pages["mamba"] = 1  # type: ignore[index]


# ---------------------------------------------------------------- boundary checks
@pytest.mark.clause("BE-15", "BE-10")
@pytest.mark.parametrize("page_count", [0, 1, 127, 128, 129])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_valid_host_slots_are_accepted(page_count: int, page_size: int) -> None:
    """Pages in any order, each aligned and consecutive, pass; int32 and offset views too."""
    order = torch.randperm(page_count + 3, generator=torch.Generator().manual_seed(page_count))[:page_count]
    slots = (order.unsqueeze(1) * page_size + torch.arange(page_size)).flatten()
    assert validate_host_indices(slots, page_count, page_size) is slots
    narrow = slots.to(torch.int32)
    assert validate_host_indices(narrow, page_count, page_size) is narrow
    pool = torch.arange((page_count + 2) * page_size)
    window = pool[page_size : page_size * (page_count + 1)]  # a view with an offset
    assert validate_host_indices(window, page_count, page_size) is window


def is_strict_key_list(keys: list) -> bool:
    """Return whether validate_page_keys(strict=True) accepts ``keys``."""
    try:
        validate_page_keys(keys, strict=True)
    except ContractViolation:
        return False
    return True


def check_strict_agrees_with_spec(accepts: Callable[[list], bool], keys: list) -> None:
    """Strict key validation accepts exactly the lists whose every key is hicache_spec.is_page_key."""
    assert accepts(keys) == all(hicache_spec.is_page_key(key) for key in keys)


@pytest.mark.clause("KEY-2", "KEY-1")
@given(
    keys=st.lists(st.one_of(PAGE_KEY, st.text(alphabet="0123456789abcdefABG ", min_size=63, max_size=65)), max_size=5)
)
def test_strict_key_check_agrees_with_the_spec(keys: list) -> None:
    check_strict_agrees_with_spec(is_strict_key_list, keys)


@pytest.mark.clause("KEY-1", "KEY-2")
def test_real_key_chains_pass_strict_validation() -> None:
    chain = hicache_spec.compute_key_chain(tuple(range(64 * 3)), 64)
    assert validate_page_keys(chain, strict=True) is chain
    assert validate_page_keys(PageKeys(chain), strict=True) == chain


# ---------------------------------------------------------------- planted bugs
class CollapsingExtraInfo(ContractModel):
    """Planted bug: [] is written to JSON as null, so the feature switches off after a round trip (PFX-4)."""

    prefix_keys: Annotated[Optional[PrefixKeys], PlainSerializer(lambda value: list(value) if value else None)] = None


class SharingExtraInfo(ContractModel):
    """Planted bug: a plain dict field: frozen against reassignment, but the dict itself is writable."""

    extra_info: Optional[dict] = None


class AliasingExtraInfo(ContractModel):
    """Planted bug: a read-only view of the caller's dict (``MappingProxyType``) follows the caller's writes."""

    extra_info: Any = None

    def __init__(self, extra_info: dict) -> None:
        super().__init__(extra_info=MappingProxyType(extra_info))


@pytest.mark.clause("PFX-4")
def test_planted_collapsing_serialiser_is_caught() -> None:
    with pytest.raises(AssertionError):
        given(prefix=PREFIX)(lambda prefix: check_json_round_trip(CollapsingExtraInfo(prefix_keys=prefix)))()


@pytest.mark.clause("BE-8")
def test_planted_shared_dict_is_caught() -> None:
    source = {"a": 1}
    with pytest.raises(AssertionError, match="^the model's mapping accepts writes$"):
        check_frozen_mapping(SharingExtraInfo(extra_info=source).extra_info, source)
    with pytest.raises(AssertionError, match="^the model shares the caller's dict"):
        check_frozen_mapping(AliasingExtraInfo(extra_info=source).extra_info, source)


@pytest.mark.clause("BE-15")
def test_planted_copying_validator_is_caught() -> None:
    with pytest.raises(AssertionError, match="a tensor was replaced"):
        check_holds_tensors_without_copy(
            lambda host, device: SimpleNamespace(host_indices=host.clone(), device_indices=device)
        )


@pytest.mark.clause("KEY-2")
def test_planted_length_only_strict_check_is_caught() -> None:
    def length_only(keys: list) -> bool:
        return all(isinstance(key, str) and len(key) == 64 for key in keys)

    with pytest.raises(AssertionError):
        given(keys=st.lists(st.text(alphabet="0123456789abcdefABG", min_size=64, max_size=64), max_size=3))(
            lambda keys: check_strict_agrees_with_spec(length_only, keys)
        )()


# ---------------------------------------------------------------- equality, hashing, schema
def check_hash_agrees_with_equality(first: Any, second: Any) -> None:
    """Equal values hash alike, so that models work as dict keys and in sets."""
    if first == second:
        assert hash(first) == hash(second), "equal values hash differently"


def equal_transfers_with_different_tensors(transfer_class: type) -> tuple:
    return (
        transfer_class(name="kv", keys=["a"], host_indices=torch.arange(4)),
        transfer_class(name="kv", keys=["a"], host_indices=torch.arange(4)),
    )


@pytest.mark.clause("BE-19")
def test_transfers_compare_tensors_by_value_and_hash_consistently() -> None:
    first, second = equal_transfers_with_different_tensors(PoolTransfer)
    assert first == second and first != PoolTransfer(name="kv", keys=["a"], host_indices=torch.arange(1, 5))  # type: ignore[arg-type]
    assert first != PoolTransfer(name="kv", keys=["a"]) and first != PoolTransfer(name="swa", keys=["a"])  # type: ignore[arg-type]
    check_hash_agrees_with_equality(first, second)
    assert len({first, second, PoolTransfer(name="swa")}) == 2  # type: ignore[arg-type]


class IdentityHashTransfer(PoolTransfer):
    """Planted bug: the hash takes the tensor's identity while equality compares its values."""

    def __hash__(self) -> int:
        return hash((self.name, id(self.host_indices)))


def test_planted_identity_hash_is_caught() -> None:
    with pytest.raises(AssertionError, match="equal values hash differently"):
        check_hash_agrees_with_equality(*equal_transfers_with_different_tensors(IdentityHashTransfer))


@pytest.mark.parametrize(
    "model",
    [
        HiCacheStorageExtraInfo,
        HiCacheStorageConfig,
        PoolTransfer,
        PoolTransferResult,
        PrefetchOperationSnapshot,
        BackupOperationSnapshot,
        ProgressAck,
        PoolHitsAck,
        FinalAck,
    ],
)
def test_every_model_has_a_json_schema(model: type[ContractModel]) -> None:
    schema = model.model_json_schema()
    assert schema["type"] == "object" and list(schema["properties"]) == list(model.model_fields)


# ---------------------------------------------------------------- host slots against a plain-Python reading
def host_slots_are_valid(slots: list, key_count: int, page_size: int) -> bool:
    """The rule of BE-15 read plainly: page i's slots are b, b+1, ..., b+page_size-1 with b >= 0, b % page_size == 0."""
    if len(slots) != key_count * page_size:
        return False
    for page in range(key_count):
        first = slots[page * page_size]
        if first < 0 or first % page_size:
            return False
        if slots[page * page_size : (page + 1) * page_size] != list(range(first, first + page_size)):
            return False
    return True


def accepts_host_slots(check: Callable, slots: list, key_count: int, page_size: int) -> bool:
    try:
        check(torch.tensor(slots, dtype=torch.int64), key_count, page_size)
    except ContractViolation:
        return False
    return True


HOST_LAYOUT = st.integers(1, 4).flatmap(
    lambda page_size: st.integers(0, 4).flatmap(
        lambda key_count: st.tuples(
            st.one_of(
                # a valid layout of distinct pages, then perhaps one slot changed
                st.permutations(range(key_count + 2)).map(
                    lambda order: [
                        page * page_size + offset for page in order[:key_count] for offset in range(page_size)
                    ]
                ),
                st.lists(st.integers(-2, 12), min_size=key_count * page_size, max_size=key_count * page_size),
            ),
            st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(-3, 3))),
            st.just(key_count),
            st.just(page_size),
        )
    )
)


def check_host_slot_rule(check: Callable, layout: tuple) -> None:
    slots, change, key_count, page_size = layout
    slots = list(slots)
    if change is not None and slots:
        slots[change[0] % len(slots)] += change[1]
    assert accepts_host_slots(check, slots, key_count, page_size) == host_slots_are_valid(slots, key_count, page_size)


@pytest.mark.clause("BE-15")
@given(layout=HOST_LAYOUT)
def test_host_slot_check_agrees_with_the_plain_rule(layout: tuple) -> None:
    check_host_slot_rule(validate_host_indices, layout)


def test_planted_first_slot_only_check_is_caught() -> None:
    """Planted bug: checks alignment of each page's first slot but not that the rest follow it."""

    def first_slot_only(host_indices: torch.Tensor, key_count: int, page_size: int) -> torch.Tensor:
        if host_indices.numel() != key_count * page_size or bool(
            (host_indices.view(-1, page_size)[:, 0] % page_size != 0).any() if key_count else False
        ):
            raise ContractViolation("host_indices", "bad", host_indices, "BE-15")
        return host_indices

    with pytest.raises(AssertionError):
        given(layout=HOST_LAYOUT)(lambda layout: check_host_slot_rule(first_slot_only, layout))()
