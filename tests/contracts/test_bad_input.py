"""Bad input at the boundary: every malformed value is rejected with one whole, pinned message.

Each row builds something from a malformed value and names the exact message
``Class.field: rule (got value) [CLAUSE]``. ``check_rejected`` also checks
that the exception carries the field and clause it prints. The planted bugs
at the end run a lax validator through the same rows and must be caught. Over 450 lines: a table of
rows, kept in one module so that every planted validator runs through all of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest
import torch

from hicache_contracts import (
    ContractViolation,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolTransfer,
    PoolTransferResult,
    PrefetchOperationSnapshot,
    PrefixKeys,
    ProgressAck,
    FinalAck,
    validate_ack,
    validate_host_indices,
    validate_page_keys,
)

POOL_NAMES = (
    "kv, mamba, swa, auxiliary_swa, indexer, deepseek_v4_c1, deepseek_v4_c1_indexer, deepseek_v4_c1_indexer_scale, "
    "deepseek_v4_c2, deepseek_v4_c2_indexer, deepseek_v4_c2_indexer_scale, deepseek_v4_c4, deepseek_v4_c4_indexer, "
    "deepseek_v4_c4_indexer_scale, deepseek_v4_c128, deepseek_v4_c4_rope, deepseek_v4_c128_rope, deepseek_v4_c4_state, "
    "deepseek_v4_c4_indexer_state, deepseek_v4_c128_state, draft, draft_indexer, draft_swa"
)
GOOD_KEY = "0" * 64


def check_rejected(build: Callable[[], Any], message: str) -> None:
    """``build()`` raises ContractViolation with exactly ``message``, and its attributes match the text."""
    try:
        build()
    except ContractViolation as violation:
        assert str(violation) == message
        assert message.startswith(f"{violation.field}: {violation.rule} (got ")
        assert message.endswith(f") [{violation.clause_id}]")
    else:
        raise AssertionError(f"accepted bad input; expected: {message}")


def config(**overrides: Any) -> HiCacheStorageConfig:
    return HiCacheStorageConfig.single_rank(**overrides)


# (label, builder taking the host-slot validator, message); the validator is swapped in the planted tests.
HOST_SLOT_ROWS: list[tuple[str, Callable[[Callable], Any], str]] = [
    (
        "list, not tensor",
        lambda check: check([0, 1], 1, 2),
        "host_indices: must be a 1-D integer torch.Tensor (got [0, 1]) [BE-15]",
    ),
    (
        "float tensor",
        lambda check: check(torch.arange(4.0), 1, 4),
        "host_indices: must be a 1-D integer torch.Tensor, not torch.float32 "
        "(got Tensor(shape=(4,), dtype=torch.float32)) [BE-15]",
    ),
    (
        "bool tensor",
        lambda check: check(torch.ones(4, dtype=torch.bool), 1, 4),
        "host_indices: must be a 1-D integer torch.Tensor, not torch.bool "
        "(got Tensor(shape=(4,), dtype=torch.bool)) [BE-15]",
    ),
    (
        "2-D tensor",
        lambda check: check(torch.arange(8).view(2, 4), 2, 4),
        "host_indices: must be a 1-D integer torch.Tensor, not 2-D (got Tensor(shape=(2, 4), dtype=torch.int64)) [BE-15]",
    ),
    (
        "too few slots",
        lambda check: check(torch.arange(6), 2, 4),
        "host_indices: must hold key_count * page_size = 2 * 4 = 8 slots "
        "(got Tensor(shape=(6,), dtype=torch.int64)) [BE-15]",
    ),
    (
        "one slot per key, not per token",
        lambda check: check(torch.arange(128), 128, 64),
        "host_indices: must hold key_count * page_size = 128 * 64 = 8192 slots "
        "(got Tensor(shape=(128,), dtype=torch.int64)) [BE-15]",
    ),
    (
        "misaligned first page",
        lambda check: check(torch.arange(1, 9), 2, 4),
        "host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got 1) [BE-15]",
    ),
    (
        "misaligned later page",
        lambda check: check(torch.tensor([0, 1, 2, 3, 6, 7, 8, 9]), 2, 4),
        "host_indices[4]: page 1's first slot must be a non-negative multiple of page_size = 4 (got 6) [BE-15]",
    ),
    (
        "slots not consecutive",
        lambda check: check(torch.tensor([0, 1, 2, 3, 4, 5, 7, 6]), 2, 4),
        "host_indices[4:8]: page 1's slots must be consecutive (got [4, 5, 7, 6]) [BE-15]",
    ),
    (
        "negative slots",
        lambda check: check(torch.tensor([-4, -3, -2, -1]), 1, 4),
        "host_indices[0]: page 0's first slot must be a non-negative multiple of page_size = 4 (got -4) [BE-15]",
    ),
    ("page size zero", lambda check: check(torch.arange(4), 1, 0), "page_size: must be an int >= 1 (got 0) [BE-15]"),
    (
        "negative key count",
        lambda check: check(torch.arange(4), -1, 4),
        "key_count: must be an int >= 0 (got -1) [BE-15]",
    ),
    (
        "field named by the caller",
        lambda check: check(torch.arange(3), 1, 4, field="PoolTransfer.host_indices"),
        "PoolTransfer.host_indices: must hold key_count * page_size = 1 * 4 = 4 slots "
        "(got Tensor(shape=(3,), dtype=torch.int64)) [BE-15]",
    ),
]

MODEL_ROWS: list[tuple[str, Callable[[], Any], str]] = [
    # ---------------------------------------------------------------- PoolTransfer
    (
        "unknown pool name",
        lambda: PoolTransfer(name="kv_cache"),  # type: ignore[arg-type]
        f"PoolTransfer.name: must be one of {POOL_NAMES} (got 'kv_cache') [BE-19]",
    ),
    (
        "pool name missing",
        lambda: PoolTransfer(keys=[GOOD_KEY]),  # type: ignore[arg-type, call-arg]
        "PoolTransfer.name: field required (got nothing) [BE-19]",
    ),
    (
        "float host_indices",
        lambda: PoolTransfer(name="kv", host_indices=torch.zeros(4)),  # type: ignore[arg-type]
        "PoolTransfer.host_indices: must be a 1-D integer torch.Tensor, not torch.float32 "
        "(got Tensor(shape=(4,), dtype=torch.float32)) [BE-15]",
    ),
    (
        "2-D host_indices",
        lambda: PoolTransfer(name="kv", host_indices=torch.zeros(2, 2, dtype=torch.int64)),  # type: ignore[arg-type]
        "PoolTransfer.host_indices: must be a 1-D integer torch.Tensor, not 2-D "
        "(got Tensor(shape=(2, 2), dtype=torch.int64)) [BE-15]",
    ),
    (
        "host_indices as a list",
        lambda: PoolTransfer(name="kv", host_indices=[0, 1]),  # type: ignore[arg-type]
        "PoolTransfer.host_indices: must be a 1-D integer torch.Tensor (got [0, 1]) [BE-15]",
    ),
    (
        "float device_indices",
        lambda: PoolTransfer(name="kv", device_indices=torch.zeros(3, dtype=torch.float16)),  # type: ignore[arg-type]
        "PoolTransfer.device_indices: must be a 1-D integer torch.Tensor, not torch.float16 "
        "(got Tensor(shape=(3,), dtype=torch.float16)) [BE-15]",
    ),
    (
        "non-str key",
        lambda: PoolTransfer(name="kv", keys=[GOOD_KEY, 5]),  # type: ignore[arg-type]
        "PoolTransfer.keys[1]: page key must be a non-empty str (got 5) [KEY-2]",
    ),
    (
        "empty-string key",
        lambda: PoolTransfer(name="kv", keys=[""]),  # type: ignore[arg-type]
        "PoolTransfer.keys[0]: page key must be a non-empty str (got '') [KEY-2]",
    ),
    (
        "keys as one str",
        lambda: PoolTransfer(name="kv", keys=GOOD_KEY),  # type: ignore[arg-type]
        f"PoolTransfer.keys: must be a list, tuple or key sequence of str (got '{GOOD_KEY}') [KEY-2]",
    ),
    (
        "unknown hit policy",
        lambda: PoolTransfer(name="swa", hit_policy="newest_pages"),  # type: ignore[arg-type]
        "PoolTransfer.hit_policy: must be one of all_pages, trailing_pages, block_groups (got 'newest_pages') [HYB-7]",
    ),
    (
        "unknown indices_from_pool",
        lambda: PoolTransfer(name="indexer", indices_from_pool="KV"),  # type: ignore[arg-type]
        f"PoolTransfer.indices_from_pool: must be one of {POOL_NAMES} (got 'KV') [BE-19]",
    ),
    (
        "unknown field",
        lambda: PoolTransfer(name="kv", page_size=4),  # type: ignore[arg-type, call-arg]
        "PoolTransfer.page_size: extra inputs are not permitted (got 4) [BE-19]",
    ),
    # ---------------------------------------------------------------- HiCacheStorageExtraInfo
    (
        "prefix_keys of ints",
        lambda: HiCacheStorageExtraInfo(prefix_keys=[1, 2]),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.prefix_keys[0]: page key must be a non-empty str (got 1) [KEY-2]",
    ),
    (
        "prefix_keys as one str",
        lambda: HiCacheStorageExtraInfo(prefix_keys="k0"),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.prefix_keys: must be a list, tuple or key sequence of str (got 'k0') [PFX-1]",
    ),
    (
        "prefix_keys as a set",
        lambda: HiCacheStorageExtraInfo(prefix_keys={"k0"}),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.prefix_keys: must be a list, tuple or key sequence of str (got {'k0'}) [PFX-1]",
    ),
    (
        "prefix_keys as JSON ints",
        lambda: HiCacheStorageExtraInfo.model_validate_json('{"prefix_keys": [1]}'),
        "HiCacheStorageExtraInfo.prefix_keys[0]: page key must be a non-empty str (got 1) [KEY-2]",
    ),
    (
        "extra_info not a dict",
        lambda: HiCacheStorageExtraInfo(extra_info=["tenant"]),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.extra_info: must be a dict with str keys (got ['tenant']) [BE-8]",
    ),
    (
        "extra_info with an int key",
        lambda: HiCacheStorageExtraInfo(extra_info={1: "x"}),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.extra_info[1]: key must be a str (got 1) [BE-8]",
    ),
    (
        "extend by a bad batch",
        lambda: HiCacheStorageExtraInfo(prefix_keys=[]).extend(["a", 3]),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.extend.batch[1]: page key must be a non-empty str (got 3) [KEY-2]",
    ),
    (
        "extend by a str",
        lambda: HiCacheStorageExtraInfo().extend("abc"),  # type: ignore[arg-type]
        "HiCacheStorageExtraInfo.extend.batch: must be a list, tuple or key sequence of str (got 'abc') [PFX-1]",
    ),
    # ---------------------------------------------------------------- HiCacheStorageConfig
    (
        "negative tp_rank",
        lambda: config(tp_rank=-1),
        "HiCacheStorageConfig.tp_rank: must satisfy 0 <= tp_rank < tp_size = 1 (got -1) [BE-25]",
    ),
    (
        "pp_rank equal to pp_size",
        lambda: config(pp_rank=2, pp_size=2),
        "HiCacheStorageConfig.pp_rank: must satisfy 0 <= pp_rank < pp_size = 2 (got 2) [BE-25]",
    ),
    (
        "attn_cp_size zero",
        lambda: config(attn_cp_size=0),
        "HiCacheStorageConfig.attn_cp_size: must be >= 1 (got 0) [BE-25]",
    ),
    ("negative dp_rank", lambda: config(dp_rank=-1), "HiCacheStorageConfig.dp_rank: must be >= 0 (got -1) [BE-25]"),
    (
        "dcp_rank outside dcp_size",
        lambda: config(dcp_rank=1),
        "HiCacheStorageConfig.dcp_rank: must satisfy 0 <= dcp_rank < dcp_size = 1 (got 1) [BE-25]",
    ),
    (
        "DCP without MLA",
        lambda: config(tp_size=2, dcp_size=2, logical_page_size=64),
        "HiCacheStorageConfig.dcp_size: may exceed 1 only for an MLA model (is_mla_model=True) (got 2) [BE-25]",
    ),
    (
        "DCP group not contiguous",
        lambda: config(tp_size=4, tp_rank=1, is_mla_model=True, dcp_size=2, logical_page_size=64),
        "HiCacheStorageConfig.dcp_rank: must equal tp_rank % dcp_size = 1, with dcp_size dividing tp_size = 4 "
        "(contiguous DCP groups within TP) (got 0) [BE-25]",
    ),
    (
        "DCP size not dividing tp_size",
        lambda: config(tp_size=3, is_mla_model=True, dcp_size=2, logical_page_size=64),
        "HiCacheStorageConfig.dcp_rank: must equal tp_rank % dcp_size = 0, with dcp_size dividing tp_size = 3 "
        "(contiguous DCP groups within TP) (got 0) [BE-25]",
    ),
    (
        "DCP without a logical page size",
        lambda: config(tp_size=2, is_mla_model=True, dcp_size=2),
        "HiCacheStorageConfig.logical_page_size: must be a positive multiple of dcp_size = 2 (got None) [BE-25]",
    ),
    (
        "DCP logical page size not aligned",
        lambda: config(tp_size=2, is_mla_model=True, dcp_size=2, logical_page_size=63),
        "HiCacheStorageConfig.logical_page_size: must be a positive multiple of dcp_size = 2 (got 63) [BE-25]",
    ),
    (
        "tp_lcm_size not a multiple",
        lambda: config(tp_size=4, tp_lcm_size=6),
        "HiCacheStorageConfig.tp_lcm_size: must be a positive multiple of tp_size = 4 (got 6) [BE-25]",
    ),
    (
        "tp_lcm_size zero",
        lambda: config(tp_lcm_size=0),
        "HiCacheStorageConfig.tp_lcm_size: must be a positive multiple of tp_size = 1 (got 0) [BE-25]",
    ),
    (
        "tp_rank as a str",
        lambda: config(tp_rank="0"),
        "HiCacheStorageConfig.tp_rank: input should be a valid integer (got '0') [BE-25]",
    ),
    (
        "tp_size as a bool",
        lambda: config(tp_size=True),
        "HiCacheStorageConfig.tp_size: input should be a valid integer (got True) [BE-25]",
    ),
    (
        "is_mla_model as a str",
        lambda: config(is_mla_model="yes"),
        "HiCacheStorageConfig.is_mla_model: input should be a valid boolean (got 'yes') [NS-5]",
    ),
    (
        "model_name as an int",
        lambda: config(model_name=3),
        "HiCacheStorageConfig.model_name: input should be a valid string (got 3) [NS-4]",
    ),
    (
        "extra_config not a dict",
        lambda: config(extra_config=[("a", 1)]),
        "HiCacheStorageConfig.extra_config: must be a dict with str keys (got [('a', 1)]) [BE-1]",
    ),
    (
        "unknown config field",
        lambda: config(rank=0),
        "HiCacheStorageConfig.rank: extra inputs are not permitted (got 0) [BE-1]",
    ),
    (
        "required fields missing: all named at once",
        lambda: HiCacheStorageConfig(tp_rank=0, tp_size=1),  # type: ignore[call-arg]
        "HiCacheStorageConfig: is missing 8 required fields: pp_rank, pp_size, attn_cp_rank, attn_cp_size, "
        "is_mla_model, enable_storage_metrics, is_page_first_layout, model_name (got nothing) [BE-1]",
    ),
    (
        "required fields missing: of one clause, under it",
        lambda: HiCacheStorageConfig(
            **{
                key: value
                for key, value in HiCacheStorageConfig.single_rank().model_dump().items()
                if key not in ("pp_rank", "pp_size")
            }
        ),
        "HiCacheStorageConfig: is missing 2 required fields: pp_rank, pp_size (got nothing) [BE-25]",
    ),
    (
        "one required field missing",
        lambda: HiCacheStorageConfig(
            **{key: value for key, value in HiCacheStorageConfig.single_rank().model_dump().items() if key != "pp_rank"}
        ),
        "HiCacheStorageConfig.pp_rank: field required (got nothing) [BE-25]",
    ),
    (
        "a frozen field assigned",
        lambda: setattr(HiCacheStorageConfig.single_rank(), "tp_rank", 1),
        "HiCacheStorageConfig.tp_rank: cannot be assigned: HiCacheStorageConfig is frozen; build a new "
        "HiCacheStorageConfig instead (got 1) [BE-25]",
    ),
    (
        "a frozen field deleted",
        lambda: delattr(HiCacheStorageConfig.single_rank(), "model_name"),
        "HiCacheStorageConfig.model_name: cannot be deleted: HiCacheStorageConfig is frozen; build a new "
        "HiCacheStorageConfig instead (got nothing) [NS-4]",
    ),
    (
        "a name that is no field assigned",
        lambda: setattr(HiCacheStorageExtraInfo(prefix_keys=None), "prefix", ["a"]),
        "HiCacheStorageExtraInfo.prefix: is not a field of HiCacheStorageExtraInfo (its fields: prefix_keys, "
        "extra_info) (got ['a']) [BE-8]",
    ),
    # ---------------------------------------------------------------- page keys
    (
        "strict: uppercase hex",
        lambda: validate_page_keys([GOOD_KEY, "A" * 64], strict=True),
        f"keys[1]: page key must be 64 lowercase hex characters (got '{'A' * 64}') [KEY-2]",
    ),
    (
        "strict: 63 characters",
        lambda: validate_page_keys(["0" * 63], strict=True, field="batch"),
        f"batch[0]: page key must be 64 lowercase hex characters (got '{'0' * 63}') [KEY-2]",
    ),
    (
        "keys as bytes",
        lambda: validate_page_keys([b"k"]),
        "keys[0]: page key must be a non-empty str (got b'k') [KEY-2]",
    ),
    (
        "keys as one str",
        lambda: validate_page_keys("abc"),
        "keys: must be a list, tuple or key sequence of str (got 'abc') [KEY-2]",
    ),
    # ---------------------------------------------------------------- results, operations, acks
    (
        "pool with zero hits listed",
        lambda: PoolTransferResult(kv_hit_pages=0, extra_pool_hit_pages={"swa": 0}),  # type: ignore[arg-type]
        "PoolTransferResult.extra_pool_hit_pages['swa']: must be an int >= 1 (got 0) [BE-21]",
    ),
    (
        "unknown pool in a result",
        lambda: PoolTransferResult(kv_hit_pages=1, extra_pool_hit_pages={"foo": 1}),  # type: ignore[arg-type]
        "PoolTransferResult.extra_pool_hit_pages['foo']: must be a pool name (got 'foo') [BE-21]",
    ),
    (
        "negative kv hit",
        lambda: PoolTransferResult(kv_hit_pages=-1),
        "PoolTransferResult.kv_hit_pages: input should be greater than or equal to 0 (got -1) [BE-21]",
    ),
    (
        "page size zero in an operation",
        lambda: PrefetchOperationSnapshot(operation_id=1, keys=[], prefix_keys=None, page_size=0),  # type: ignore[arg-type]
        "PrefetchOperationSnapshot.page_size: input should be greater than or equal to 1 (got 0) [CTL-2]",
    ),
    (
        "unknown prefetch policy",
        lambda: PrefetchOperationSnapshot(operation_id=1, keys=[], prefix_keys=None, page_size=1, policy="eager"),  # type: ignore[arg-type]
        "PrefetchOperationSnapshot.policy: input should be 'best_effort', 'wait_complete' or 'timeout' "
        "(got 'eager') [CTL-9]",
    ),
    (
        "negative progress",
        lambda: ProgressAck(operation_id=1, slice_index=0, tokens=-64),
        "ProgressAck.tokens: input should be greater than or equal to 0 (got -64) [CTL-5]",
    ),
    (
        "error not a str",
        lambda: FinalAck(operation_id=1, tokens=0, error=3),  # type: ignore[arg-type]
        "FinalAck.error: input should be a valid string (got 3) [CTL-6]",
    ),
    (
        "unknown ack kind",
        lambda: validate_ack({"kind": "partial", "operation_id": 1}),
        "Ack.kind: must be one of progress, pool_hits, final (got {'kind': 'partial', 'operation_id': 1}) [CTL-5]",
    ),
    (
        "ack field of the wrong type",
        lambda: validate_ack({"kind": "final", "operation_id": 1, "tokens": "64"}),
        "FinalAck.tokens: input should be a valid integer (got '64') [CTL-6]",
    ),
]


def test_the_matrix_is_large_enough() -> None:
    assert len(HOST_SLOT_ROWS) + len(MODEL_ROWS) >= 25


@pytest.mark.clause("BE-15", "BE-16")
@pytest.mark.parametrize(("label", "build", "message"), HOST_SLOT_ROWS, ids=[row[0] for row in HOST_SLOT_ROWS])
def test_bad_host_slots_are_rejected(label: str, build: Callable, message: str) -> None:
    check_rejected(lambda: build(validate_host_indices), message)


@pytest.mark.clause("KEY-2", "PFX-1", "BE-1", "BE-8", "BE-15", "BE-19", "BE-21", "BE-25")
@pytest.mark.parametrize(("label", "build", "message"), MODEL_ROWS, ids=[row[0] for row in MODEL_ROWS])
def test_bad_model_input_is_rejected(label: str, build: Callable, message: str) -> None:
    check_rejected(build, message)


@pytest.mark.clause("PFX-5")
def test_a_rejected_extension_writes_nothing() -> None:
    info = HiCacheStorageExtraInfo(prefix_keys=PrefixKeys(["a"]))
    check_rejected(
        lambda: info.extend([None]),
        "HiCacheStorageExtraInfo.extend.batch[0]: page key must be a non-empty str (got None) [KEY-2]",
    )
    assert info.prefix_keys == ["a"] and info.prefix_keys._parent is None


def test_long_values_are_cut_in_messages() -> None:
    with pytest.raises(ContractViolation) as caught:
        HiCacheStorageExtraInfo(prefix_keys="k" * 500)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "HiCacheStorageExtraInfo.prefix_keys: must be a list, tuple or key sequence of str (got '"
        + "k" * 116
        + "...) [PFX-1]"
    )
    assert caught.value.value == "k" * 500  # the whole value stays on the exception


# ---------------------------------------------------------------- planted bugs
def length_only_host_check(host_indices: Any, key_count: int, page_size: int, *, field: str = "host_indices") -> Any:
    """Planted bug: checks the slot count only, as a backend that trusts the engine's layout would."""
    if not isinstance(host_indices, torch.Tensor) or host_indices.numel() != key_count * page_size:
        raise ContractViolation(field, "wrong size", host_indices, "BE-15")
    return host_indices


@dataclasses.dataclass(frozen=True)
class LaxConfig:
    """Planted bug: a config with SGLang's fields and no rank checks."""

    tp_rank: int = 0
    tp_size: int = 1


@pytest.mark.clause("BE-15")
@pytest.mark.parametrize("label", ["misaligned first page", "slots not consecutive", "negative slots"])
def test_planted_length_only_host_check_is_caught(label: str) -> None:
    ((build, message),) = [(row[1], row[2]) for row in HOST_SLOT_ROWS if row[0] == label]
    with pytest.raises(AssertionError, match="^accepted bad input"):
        check_rejected(lambda: build(length_only_host_check), message)


@pytest.mark.clause("BE-25")
def test_planted_lax_config_is_caught() -> None:
    with pytest.raises(AssertionError, match="^accepted bad input"):
        check_rejected(
            lambda: LaxConfig(tp_rank=-1),
            "HiCacheStorageConfig.tp_rank: must satisfy 0 <= tp_rank < tp_size = 1 (got -1) [BE-25]",
        )


def test_planted_wrong_message_is_caught() -> None:
    """A rejection with another message (a field not named) fails the row too."""

    def reject_naming_another_field() -> None:
        raise ContractViolation("x", "bad", 1, "BE-15")

    with pytest.raises(AssertionError):
        check_rejected(reject_naming_another_field, "host_indices: bad (got 1) [BE-15]")
