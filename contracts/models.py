"""The contract as frozen pydantic models, with SGLang's names and fields.

A backend written for SGLang reads these unchanged: ``HiCacheStorageExtraInfo``,
``HiCacheStorageConfig``, ``PoolName``, ``PoolHitPolicy``, ``PoolTransfer``,
``PoolTransferResult``. Beside them sit the operation snapshots and acks that
the reference controller emits and the engine trace checker reads.

Policy (one base, ``ContractModel``):

- frozen all the way down: sequences are ``PrefixKeys``/``PageKeys``, mappings
  are ``ReadOnlyMapping`` (a shallow freeze: values are kept as given);
  tensors are held, never copied;
- ``extra="forbid"`` and strict types (no silent coercion of ``"1"`` to 1);
  enum fields also take their string values (``"kv"``);
- validation happens once, at construction; bad input raises
  ``ContractViolation`` (a ``ValueError``) with the message
  ``Class.field: rule (got value) [CLAUSE]``; nothing is built;
- derived values (``HiCacheStorageExtraInfo.extend``) skip re-validation,
  because their parts were validated already.

Two standalone checks serve boundaries where no model is built:
``validate_page_keys`` and ``validate_host_indices``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Annotated, Any, ClassVar, Literal, Optional, TypeVar, Union

import torch
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import core_schema

from hicache_spec import STORAGE_BATCH_SIZE, is_page_key
from hicache_spec.values import is_count
from hicache_contracts.errors import ContractViolation
from hicache_contracts.prefix_keys import (
    KeysInput,
    PageKeys,
    PageKeysField,
    PrefixKeys,
    PrefixKeysField,
    find_key_problem,
)

__all__ = [
    "Ack",
    "BackupOperationSnapshot",
    "ContractModel",
    "FinalAck",
    "HiCacheStorageConfig",
    "HiCacheStorageExtraInfo",
    "IndexTensor",
    "PoolHitPolicy",
    "PoolHitsAck",
    "PoolName",
    "PoolTransfer",
    "PoolTransferResult",
    "PrefetchOperationSnapshot",
    "PrefetchPolicy",
    "ProgressAck",
    "ReadOnlyMapping",
    "pool_value",
    "validate_ack",
    "validate_ack_json",
    "validate_host_indices",
    "validate_page_keys",
]

_set_attribute = object.__setattr__

FIELD_CLAUSE = "FIELD"
"""Raised inside a field validator as the clause ID, it stands for the clause of the field being
validated (``ContractModel._field_clauses``); ``violation_from`` puts the real ID in."""


# ==================================================================== enums
class PoolName(str, Enum):
    """The host pools a v2 transfer can address (SGLang's ``PoolName``); ``str(PoolName.KV) == "kv"``."""

    KV = "kv"
    MAMBA = "mamba"
    SWA = "swa"
    AUXILIARY_SWA = "auxiliary_swa"
    INDEXER = "indexer"
    DEEPSEEK_V4_C1 = "deepseek_v4_c1"
    DEEPSEEK_V4_C1_INDEXER = "deepseek_v4_c1_indexer"
    DEEPSEEK_V4_C1_INDEXER_SCALE = "deepseek_v4_c1_indexer_scale"
    DEEPSEEK_V4_C2 = "deepseek_v4_c2"
    DEEPSEEK_V4_C2_INDEXER = "deepseek_v4_c2_indexer"
    DEEPSEEK_V4_C2_INDEXER_SCALE = "deepseek_v4_c2_indexer_scale"
    DEEPSEEK_V4_C4 = "deepseek_v4_c4"
    DEEPSEEK_V4_C4_INDEXER = "deepseek_v4_c4_indexer"
    DEEPSEEK_V4_C4_INDEXER_SCALE = "deepseek_v4_c4_indexer_scale"
    DEEPSEEK_V4_C128 = "deepseek_v4_c128"
    DEEPSEEK_V4_C4_ROPE = "deepseek_v4_c4_rope"
    DEEPSEEK_V4_C128_ROPE = "deepseek_v4_c128_rope"
    DEEPSEEK_V4_C4_STATE = "deepseek_v4_c4_state"
    DEEPSEEK_V4_C4_INDEXER_STATE = "deepseek_v4_c4_indexer_state"
    DEEPSEEK_V4_C128_STATE = "deepseek_v4_c128_state"
    DRAFT = "draft"
    DRAFT_INDEXER = "draft_indexer"
    DRAFT_SWA = "draft_swa"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def pool_value(name: Any) -> str:
    """Return a pool name — our ``PoolName``, SGLang's, or its value — as the plain str value (``"kv"``).

    The one normalisation of pool names: results and registrations are keyed
    by it, since an enum member of another class hashes apart from its value.
    """
    return str(name.value) if isinstance(name, Enum) else str(name)


class PoolHitPolicy(str, Enum):
    """Which pages of a prefix a pool must hold for a hit (HYB-6, HYB-7); ``str()`` gives the value."""

    ALL_PAGES = "all_pages"
    """Every page in [0, kv_hit) must exist in the pool."""
    TRAILING_PAGES = "trailing_pages"
    """Only the last max(1, len(transfer.keys)) pages of the prefix must exist."""
    BLOCK_GROUPS = "block_groups"
    """Whole groups of ``group_pages`` keys at block boundaries; reports its own pages, never gates (HYB-6)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


PrefetchPolicy = Literal["best_effort", "wait_complete", "timeout"]
"""The prefetch policies of CTL-9."""


def _plain(
    check: Any,
    serialize: Any = None,
    when_used: Literal["always", "unless-none", "json", "json-unless-none"] = "always",
) -> Any:
    """Return an annotation that validates with ``check`` and serialises with ``serialize``."""

    class _Schema:
        def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
            serialization = (
                None
                if serialize is None
                else core_schema.plain_serializer_function_ser_schema(serialize, when_used=when_used)
            )
            return core_schema.no_info_plain_validator_function(check, serialization=serialization)

    return _Schema()


def _enum_checker(enum: type[Enum], clause_id: str) -> Any:
    names = ", ".join(member.value for member in enum)

    def check(value: object) -> Enum:
        if type(value) is enum:
            return value
        try:
            return enum(value)
        except (ValueError, TypeError):
            raise ContractViolation("", f"must be one of {names}", value, clause_id) from None

    return check


PoolNameField = Annotated[
    PoolName,
    _plain(_enum_checker(PoolName, "BE-19"), lambda member: member.value),
    WithJsonSchema({"type": "string", "enum": [member.value for member in PoolName]}),
]
"""A PoolName, given as a member or its value (``"kv"``)."""
PoolHitPolicyField = Annotated[
    PoolHitPolicy,
    _plain(_enum_checker(PoolHitPolicy, "HYB-7"), lambda member: member.value),
    WithJsonSchema({"type": "string", "enum": [member.value for member in PoolHitPolicy]}),
]
"""A PoolHitPolicy, given as a member or its value (``"all_pages"``)."""


# ==================================================================== read-only mapping
class ReadOnlyMapping(Mapping[str, Any]):
    """An immutable mapping with str keys: reads like a dict, equals an equal dict, pickles.

    ``copy()`` returns a new plain dict, like ``dict.copy``. The freeze is
    shallow: values are kept as given.
    """

    __slots__ = ("_data",)

    _data: dict[str, Any]

    def __init__(self, data: Any = ()) -> None:
        _set_attribute(self, "_data", dict(data))

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def copy(self) -> dict[str, Any]:
        """Return a new, mutable dict with the same items."""
        return dict(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyMapping):
            return self._data == other._data
        if isinstance(other, dict):
            return self._data == other
        return Mapping.__eq__(self, other)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ReadOnlyMapping is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ReadOnlyMapping is immutable")

    def __reduce__(self) -> tuple[type[ReadOnlyMapping], tuple[dict[str, Any]]]:
        return (ReadOnlyMapping, (self._data,))

    def __repr__(self) -> str:
        return f"ReadOnlyMapping({self._data!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """Validate a dict (or any mapping) with str keys into a ReadOnlyMapping; serialise to a dict."""

        def from_python(value: object) -> ReadOnlyMapping:
            if type(value) is ReadOnlyMapping:
                return value
            if not isinstance(value, Mapping):
                raise ContractViolation("", "must be a dict with str keys", value, FIELD_CLAUSE)
            data = dict(value)
            for key in data:
                if not isinstance(key, str):
                    raise ContractViolation(f"[{key!r}]", "key must be a str", key, FIELD_CLAUSE)
            return ReadOnlyMapping(data)

        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_after_validator_function(
                ReadOnlyMapping, core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
            ),
            python_schema=core_schema.no_info_plain_validator_function(from_python),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda value: dict(value._data)),
        )


# ==================================================================== tensors
_INTEGER_DTYPES = frozenset(
    dtype
    for dtype in (
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        getattr(torch, "uint16", None),
        getattr(torch, "uint32", None),
        getattr(torch, "uint64", None),
    )
    if dtype is not None
)
"""Tensor dtypes that can hold host or device slot indices."""

_RULE_INDEX_TENSOR = "must be a 1-D integer torch.Tensor"


def _index_tensor_problem(value: object) -> Optional[str]:
    """Return why ``value`` is not a 1-D integer tensor, or None if it is."""
    if not isinstance(value, torch.Tensor):
        return _RULE_INDEX_TENSOR
    if value.dtype not in _INTEGER_DTYPES:
        return f"{_RULE_INDEX_TENSOR}, not {value.dtype}"
    if value.dim() != 1:
        return f"{_RULE_INDEX_TENSOR}, not {value.dim()}-D"
    return None


def _check_index_tensor(value: object) -> torch.Tensor:
    problem = _index_tensor_problem(value)
    if problem is not None or not isinstance(value, torch.Tensor):  # no problem: a tensor
        raise ContractViolation("", problem or _RULE_INDEX_TENSOR, value, "BE-15")
    return value  # held as given: never copied


def _index_tensor_from_json(value: list[int]) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.int64)


class _IndexTensorSchema:
    """Annotation: a 1-D integer tensor, held as given; a JSON list of ints in JSON."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.json_or_python_schema(
            json_schema=core_schema.no_info_after_validator_function(
                _index_tensor_from_json, core_schema.list_schema(core_schema.int_schema(strict=True))
            ),
            python_schema=core_schema.no_info_plain_validator_function(_check_index_tensor),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda tensor: tensor.tolist(), when_used="json"
            ),
        )


IndexTensor = Annotated[torch.Tensor, _IndexTensorSchema()]
"""A 1-D integer tensor of slot indices (host or device), held without a copy."""

NonNegativeInt = Annotated[int, Field(ge=0)]
"""A count that may be zero: pages, tokens, slice indices."""
PositiveInt = Annotated[int, Field(ge=1)]
"""A size that is at least one: page size, batch size."""


# ==================================================================== base
class _Missing:
    """Stands for a value that was not given, in error messages."""

    def __repr__(self) -> str:
        return "nothing"


_MISSING = _Missing()


def _format_location(location: tuple[Union[int, str], ...]) -> str:
    """Return ``('keys', 3)`` as ``keys[3]`` and ``('a', 'b')`` as ``a.b``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _join_path(path: str, suffix: str) -> str:
    if not suffix:
        return path
    if not path or suffix.startswith("["):
        return path + suffix
    return f"{path}.{suffix}"


def violation_from(model: type[ContractModel], error: ValidationError, location_offset: int = 0) -> ContractViolation:
    """Return a ContractViolation for the first error of ``error``, raised while building ``model``."""
    first = error.errors(include_url=False)[0]
    location = tuple(first["loc"])[location_offset:]
    path = _format_location(location)
    cause = (first.get("ctx") or {}).get("error")
    top = location[0] if location and isinstance(location[0], str) else None
    clause_id = model._default_clause if top is None else model._field_clauses.get(top, model._default_clause)
    if isinstance(cause, ContractViolation):
        field = _join_path(path, cause.field)
        clause_id = clause_id if cause.clause_id == FIELD_CLAUSE else cause.clause_id
        return ContractViolation(f"{model.__name__}.{field}", cause.rule, cause.value, clause_id)
    rule = first["msg"]
    rule = rule[:1].lower() + rule[1:]
    value = _MISSING if first["type"] == "missing" else first.get("input")
    return ContractViolation(f"{model.__name__}.{path}" if path else model.__name__, rule, value, clause_id)


_Model = TypeVar("_Model", bound="ContractModel")


class ContractModel(BaseModel):
    """The base of every contract model: frozen, strict, no unknown fields, errors as ContractViolation.

    A subclass names the clause behind each field in ``_field_clauses`` and a
    fallback in ``_default_clause``; a pydantic error on that field (a wrong
    type, a missing value) is reported under it. A validator raises
    ContractViolation with a field path relative to the value it checks (``""``
    or ``"[3]"``) and a clause ID, or ``FIELD_CLAUSE`` for "this field's clause";
    the model puts ``Class.field`` in front.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        strict=True,
        arbitrary_types_allowed=True,
        revalidate_instances="never",
    )

    _field_clauses: ClassVar[dict[str, str]] = {}
    """The clause a field's built-in type errors are reported under."""
    _default_clause: ClassVar[str] = "BE-8"
    """The clause for errors of a field not in ``_field_clauses``."""

    def __init__(self, /, **data: Any) -> None:
        try:
            self.__pydantic_validator__.validate_python(data, self_instance=self)
        except ValidationError as error:
            raise violation_from(type(self), error) from error

    # Validation does not call this __init__ (it only converts the error), so
    # model_validate_json keeps its JSON-mode validators.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def model_validate(cls: type[_Model], obj: Any, *args: Any, **kwargs: Any) -> _Model:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as error:
            raise violation_from(cls, error) from error

    @classmethod
    def model_validate_json(cls: type[_Model], json_data: Any, *args: Any, **kwargs: Any) -> _Model:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as error:
            raise violation_from(cls, error) from error

    def _evolve(self: _Model, **changes: Any) -> _Model:
        """Return a copy with ``changes`` applied, without validation: only for values already validated."""
        new = object.__new__(type(self))
        fields = dict(self.__dict__)
        fields.update(changes)
        _set_attribute(new, "__dict__", fields)
        _set_attribute(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | changes.keys())
        _set_attribute(new, "__pydantic_extra__", None)
        _set_attribute(new, "__pydantic_private__", None)
        return new


_set_model_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_model_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_model_private = BaseModel.__dict__["__pydantic_private__"].__set__


# ==================================================================== extra info
class HiCacheStorageExtraInfo(ContractModel):
    """Per-call metadata handed to a backend (SGLang's ``HiCacheStorageExtraInfo``). Clauses: PFX-1, BE-8."""

    prefix_keys: PrefixKeysField = None
    """None: the feature is off; empty: on, no page before the call's first key; else every such key, root first."""
    extra_info: Optional[ReadOnlyMapping] = None
    """Free-form metadata, read-only; unknown keys are kept."""

    _field_clauses: ClassVar[dict[str, str]] = {"prefix_keys": "PFX-1", "extra_info": "BE-8"}

    def extend(self, batch: KeysInput) -> "HiCacheStorageExtraInfo":
        """Return a new info whose prefix is followed by ``batch``; None stays None. Clauses: PFX-2, PFX-3, PFX-4, PFX-5.

        O(len(batch)); ``self`` is unchanged.
        """
        prefix = self.prefix_keys
        if prefix is None:  # PFX-3: off stays off
            if not isinstance(batch, (list, tuple, PrefixKeys)):
                raise ContractViolation(
                    "HiCacheStorageExtraInfo.extend.batch",
                    "must be a list, tuple or key sequence of str",
                    batch,
                    "PFX-1",
                )
            return self._evolve()
        try:
            extended = prefix.extended(batch)  # PFX-4: [] grows like any list
        except ContractViolation as violation:
            raise ContractViolation(
                f"HiCacheStorageExtraInfo.extend.{violation.field}",
                violation.rule,
                violation.value,
                violation.clause_id,
            ) from None
        # Built without validation: both parts were validated already. Once per batch, so kept lean.
        new = object.__new__(HiCacheStorageExtraInfo if type(self) is HiCacheStorageExtraInfo else type(self))
        _set_model_dict(new, {"prefix_keys": extended, "extra_info": self.extra_info})
        _set_fields_set(new, self.__pydantic_fields_set__)  # prefix_keys was set: it is not None
        _set_model_extra(new, None)
        _set_model_private(new, None)
        return new


# ==================================================================== config
_RANK_GROUPS = (
    ("tp_rank", "tp_size", "BE-25"),
    ("pp_rank", "pp_size", "BE-25"),
    ("attn_cp_rank", "attn_cp_size", "BE-25"),
    ("dcp_rank", "dcp_size", "BE-25"),
)
"""(rank field, size field, clause) for each parallel group of HiCacheStorageConfig."""


class HiCacheStorageConfig(ContractModel):
    """What a backend is told about its place in the deployment (SGLang's ``HiCacheStorageConfig``). Clauses: BE-1, BE-25, NS-1..NS-5."""

    tp_rank: int
    """This rank's index in its tensor-parallel group, 0 <= tp_rank < tp_size."""
    tp_size: int
    """Tensor-parallel group size, >= 1."""
    pp_rank: int
    """This rank's pipeline stage, 0 <= pp_rank < pp_size."""
    pp_size: int
    """Pipeline stages, >= 1."""
    attn_cp_rank: int
    """This rank's attention context-parallel index, 0 <= attn_cp_rank < attn_cp_size."""
    attn_cp_size: int
    """Attention context-parallel group size, >= 1."""
    is_mla_model: bool
    """KV is replicated across TP ranks (NS-5): only TP rank 0 writes it."""
    enable_storage_metrics: bool
    """Whether the backend should collect metrics for get_stats()."""
    is_page_first_layout: bool
    """Whether the host pool is laid out page first."""
    model_name: Optional[str]
    """The served model; part of every namespace (NS-4)."""
    tp_lcm_size: Optional[int] = None
    """When set, a positive multiple of tp_size used to split heads across mixed TP sizes."""
    should_split_heads: bool = False
    """Whether pages are stored split by heads to tp_lcm_size shards."""
    dp_rank: int = 0
    """Attention data-parallel rank (tp_rank is local to its attention group), >= 0; SGLang 0.5.21+."""
    extra_config: Optional[ReadOnlyMapping] = None
    """Backend-specific configuration, read-only; unknown keys are kept (BE-1)."""
    dcp_size: int = 1
    """Decode context-parallel size, >= 1; above 1 only for MLA with contiguous groups (BE-25); 0.5.23+."""
    dcp_rank: int = 0
    """This rank's decode context-parallel shard, 0 <= dcp_rank < dcp_size; 0.5.23+."""
    logical_page_size: Optional[int] = None
    """Tokens per logical page under DCP, a positive multiple of dcp_size when dcp_size > 1; 0.5.23+."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "extra_config": "BE-1",
        "tp_rank": "BE-25",
        "tp_size": "BE-25",
        "tp_lcm_size": "BE-25",
        "dp_rank": "BE-25",
        "dcp_size": "BE-25",
        "dcp_rank": "BE-25",
        "logical_page_size": "BE-25",
        "pp_rank": "BE-25",
        "pp_size": "BE-25",
        "attn_cp_rank": "BE-25",
        "attn_cp_size": "BE-25",
        "model_name": "NS-4",
        "is_mla_model": "NS-5",
    }
    _default_clause: ClassVar[str] = "BE-1"

    @model_validator(mode="after")
    def _check_ranks(self) -> "HiCacheStorageConfig":
        for rank_field, size_field, clause_id in _RANK_GROUPS:
            size = getattr(self, size_field)
            if size < 1:
                raise ContractViolation(size_field, "must be >= 1", size, clause_id)
            rank = getattr(self, rank_field)
            if not 0 <= rank < size:
                raise ContractViolation(
                    rank_field, f"must satisfy 0 <= {rank_field} < {size_field} = {size}", rank, clause_id
                )
        lcm = self.tp_lcm_size
        if lcm is not None and (lcm < 1 or lcm % self.tp_size != 0):
            raise ContractViolation(
                "tp_lcm_size", f"must be a positive multiple of tp_size = {self.tp_size}", lcm, "BE-25"
            )
        if self.dp_rank < 0:
            raise ContractViolation("dp_rank", "must be >= 0", self.dp_rank, "BE-25")
        self._check_dcp()
        return self

    def _check_dcp(self) -> None:
        """SGLang 0.5.23's DCP rules (its ``__post_init__`` raises ValueError on each). Clause: BE-25."""
        if self.dcp_size == 1:
            return
        if not self.is_mla_model:
            raise ContractViolation(
                "dcp_size", "may exceed 1 only for an MLA model (is_mla_model=True)", self.dcp_size, "BE-25"
            )
        if self.tp_size % self.dcp_size != 0 or self.tp_rank % self.dcp_size != self.dcp_rank:
            raise ContractViolation(
                "dcp_rank",
                f"must equal tp_rank % dcp_size = {self.tp_rank % self.dcp_size}, with dcp_size "
                f"dividing tp_size = {self.tp_size} (contiguous DCP groups within TP)",
                self.dcp_rank,
                "BE-25",
            )
        page = self.logical_page_size
        if page is None or page <= 0 or page % self.dcp_size != 0:
            raise ContractViolation(
                "logical_page_size", f"must be a positive multiple of dcp_size = {self.dcp_size}", page, "BE-25"
            )

    @property
    def is_storage_writer(self) -> bool:
        """Whether this rank writes rank-replicated (MLA) KV: every rank for non-MLA, else tp_rank == dcp_rank. Clause: NS-5."""
        return not self.is_mla_model or self.tp_rank == self.dcp_rank

    @classmethod
    def single_rank(cls, model_name: Optional[str] = "test-model", **overrides: Any) -> "HiCacheStorageConfig":
        """Return the configuration of a lone rank (every size 1, every flag off), with ``overrides`` applied."""
        fields: dict[str, Any] = dict(
            tp_rank=0,
            tp_size=1,
            pp_rank=0,
            pp_size=1,
            attn_cp_rank=0,
            attn_cp_size=1,
            is_mla_model=False,
            enable_storage_metrics=False,
            is_page_first_layout=False,
            model_name=model_name,
        )
        fields.update(overrides)
        return cls(**fields)


# ==================================================================== v2 transfers
class PoolTransfer(ContractModel):
    """One pool's part of a v2 call (SGLang's ``PoolTransfer``). Clauses: KEY-2, BE-15, BE-19, HYB-6, HYB-7."""

    name: PoolNameField
    """The pool this transfer reads or writes."""
    host_indices: Optional[IndexTensor] = None
    """Host slots, page_size per key; a 1-D integer tensor held as given (never copied)."""
    device_indices: Optional[IndexTensor] = None
    """Device slots, for transfers that also move data to the device; a 1-D integer tensor."""
    keys: PageKeysField = None
    """One key per page; immutable but list-like (``keys + other_list`` gives a list)."""
    hit_policy: PoolHitPolicyField = PoolHitPolicy.ALL_PAGES
    """How the pool's hit is measured against the KV hit."""
    nodes_to_load: Optional[Any] = None
    """Engine-side tree nodes this transfer restores; opaque to backends and kept as given."""
    indices_from_pool: Optional[PoolNameField] = None
    """KV for a KV-derived sidecar, which reuses the KV pool's slots; None for pools with their own."""
    block_pages: NonNegativeInt = 0
    """BLOCK_GROUPS geometry: full pages per block (0 when the policy is not BLOCK_GROUPS); 0.5.22+."""
    group_pages: NonNegativeInt = 0
    """BLOCK_GROUPS geometry: keys (pages) per group (0 when the policy is not BLOCK_GROUPS); 0.5.22+."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "name": "BE-19",
        "keys": "KEY-2",
        "host_indices": "BE-15",
        "device_indices": "BE-15",
        "hit_policy": "HYB-7",
        "indices_from_pool": "HYB-1",
    }
    _default_clause: ClassVar[str] = "BE-19"

    @property
    def is_kv_derived(self) -> bool:
        """Whether this is a KV-derived sidecar (indices_from_pool is KV). Clause: HYB-1."""
        return self.indices_from_pool is PoolName.KV

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PoolTransfer):
            return NotImplemented
        for field in ("name", "keys", "hit_policy", "indices_from_pool", "block_pages", "group_pages"):
            if getattr(self, field) != getattr(other, field):
                return False
        for field in ("host_indices", "device_indices"):
            mine, theirs = getattr(self, field), getattr(other, field)
            if (mine is None) != (theirs is None):
                return False
            if (
                mine is not None
                and mine is not theirs
                and not (mine.shape == theirs.shape and bool((mine.cpu() == theirs.cpu()).all()))
            ):
                return False
        return self.nodes_to_load is other.nodes_to_load or self.nodes_to_load == other.nodes_to_load

    def __hash__(self) -> int:
        # Tensors compare by value in __eq__, so they stay out of the hash.
        return hash((self.name, self.keys, self.hit_policy, self.indices_from_pool))


def _check_pool_hits(value: ReadOnlyMapping, minimum: int, clause_id: str) -> ReadOnlyMapping:
    """Check a pool-name → hit-pages mapping; return it with the names as plain str."""
    names = {member.value for member in PoolName}
    clean = {}
    for name, hits in value.items():
        if name not in names:
            raise ContractViolation(f"[{name!r}]", "must be a pool name", name, clause_id)
        if not is_count(hits, minimum):
            raise ContractViolation(f"[{name!r}]", f"must be an int >= {minimum}", hits, clause_id)
        clean[str(name)] = hits
    return ReadOnlyMapping(clean)


def _check_restorable(value: Any) -> Optional[tuple[int, ...]]:
    """Return prefix lengths as an ascending tuple of distinct ints >= 0 (SGLang treats them as a set)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ContractViolation("", "must be a list of prefix lengths in pages", value, "BE-21")
    lengths = list(value)
    for length in lengths:
        if not is_count(length):
            raise ContractViolation("", "must hold only ints >= 0 (prefix lengths in pages)", length, "BE-21")
    return tuple(sorted(set(lengths)))


RestorablePages = Annotated[
    tuple[int, ...],
    _plain(_check_restorable, lambda value: None if value is None else list(value)),
    WithJsonSchema({"type": "array", "items": {"type": "integer", "minimum": 0}}),
]
"""Prefix lengths in pages: given as any iterable of ints, held as an ascending tuple of distinct values."""


class PoolTransferResult(ContractModel):
    """What batch_exists_v2 returns (SGLang's ``PoolTransferResult``). Clause: BE-21."""

    kv_hit_pages: NonNegativeInt
    """Pages hit in KV and every requested pool: the folded minimum."""
    extra_pool_hit_pages: Annotated[
        ReadOnlyMapping, AfterValidator(lambda value: _check_pool_hits(value, 1, "BE-21"))
    ] = ReadOnlyMapping()
    """Pool name → hit pages, only for pools with a nonzero hit; read-only."""
    restorable_prefix_pages: Optional[RestorablePages] = None
    """Every prefix length (pages) that KV and every gating pool can restore, ascending; None when
    the backend does not say (SGLang 0.5.20+)."""

    _default_clause: ClassVar[str] = "BE-21"

    @classmethod
    def empty(cls) -> "PoolTransferResult":
        """Return the result of a complete miss: no page in any pool."""
        return cls(kv_hit_pages=0, extra_pool_hit_pages=ReadOnlyMapping())


# ==================================================================== operations and acks
class PrefetchOperationSnapshot(ContractModel):
    """A prefetch as the controller starts it: the keys it queries, its prefix and its policy. Clauses: PFX-1, CTL-2, CTL-9."""

    operation_id: Union[int, str]
    """Identifies the operation across its acks."""
    keys: PageKeys
    """The key chain of the request's pages after the anchor, root first."""
    prefix_keys: PrefixKeysField
    """The operation's prefix (tri-state, PFX-1); each batch receives it extended by the keys before it."""
    page_size: PositiveInt
    """Tokens per page."""
    batch_size: PositiveInt = STORAGE_BATCH_SIZE
    """Pages per storage call (CTL-2)."""
    policy: PrefetchPolicy = "best_effort"
    """The prefetch policy (CTL-9)."""

    _field_clauses: ClassVar[dict[str, str]] = {
        "keys": "KEY-2",
        "prefix_keys": "PFX-1",
        "batch_size": "CTL-2",
        "policy": "CTL-9",
    }
    _default_clause: ClassVar[str] = "CTL-2"


class BackupOperationSnapshot(ContractModel):
    """A backup as the controller starts it: the keys it writes and its prefix. Clauses: PFX-1, CTL-2, CTL-7."""

    operation_id: Union[int, str]
    """Identifies the operation across its acks."""
    keys: PageKeys
    """The keys of the node's pages, root first."""
    prefix_keys: PrefixKeysField
    """The operation's prefix (tri-state, PFX-1)."""
    page_size: PositiveInt
    """Tokens per page."""
    batch_size: PositiveInt = STORAGE_BATCH_SIZE
    """Pages per storage call (CTL-2)."""

    _field_clauses: ClassVar[dict[str, str]] = {"keys": "KEY-2", "prefix_keys": "PFX-1", "batch_size": "CTL-2"}
    _default_clause: ClassVar[str] = "CTL-7"


class ProgressAck(ContractModel):
    """The progress ack after one slice: cumulative loaded tokens. Clause: CTL-5."""

    kind: Literal["progress"] = "progress"
    """Tells the acks apart in the ``Ack`` union."""
    operation_id: Union[int, str]
    """The operation acked."""
    slice_index: NonNegativeInt
    """Which slice of the agreed keys this ack follows, from 0."""
    tokens: NonNegativeInt
    """Tokens loaded so far, cumulative; non-decreasing across an operation's acks."""

    _default_clause: ClassVar[str] = "CTL-5"


class PoolHitsAck(ContractModel):
    """The ack of the sidecar read of a hybrid prefetch: hit pages per pool. Clause: HYB-2."""

    kind: Literal["pool_hits"] = "pool_hits"
    """Tells the acks apart in the ``Ack`` union."""
    operation_id: Union[int, str]
    """The operation acked."""
    pool_hits: Annotated[ReadOnlyMapping, AfterValidator(lambda value: _check_pool_hits(value, 0, "HYB-2"))]
    """Pool name → pages loaded, read-only."""

    _default_clause: ClassVar[str] = "HYB-2"


class FinalAck(ContractModel):
    """The last ack of every prefetch, also a failed or terminated one. Clause: CTL-6."""

    kind: Literal["final"] = "final"
    """Tells the acks apart in the ``Ack`` union."""
    operation_id: Union[int, str]
    """The operation acked."""
    tokens: NonNegativeInt
    """Tokens loaded in all."""
    error: Optional[str] = None
    """Why the operation ended early, if it did (a backend exception, termination); None otherwise."""

    _default_clause: ClassVar[str] = "CTL-6"


Ack = Annotated[Union[ProgressAck, PoolHitsAck, FinalAck], Field(discriminator="kind")]
"""Any ack, told apart by its ``kind``."""

_ACK_ADAPTER: TypeAdapter[Union[ProgressAck, PoolHitsAck, FinalAck]] = TypeAdapter(Ack)
_ACK_CLASSES: dict[str, type[ContractModel]] = {"progress": ProgressAck, "pool_hits": PoolHitsAck, "final": FinalAck}


def _ack_violation(error: ValidationError) -> ContractViolation:
    first = error.errors(include_url=False)[0]
    location = tuple(first["loc"])
    if location and location[0] in _ACK_CLASSES:
        return violation_from(_ACK_CLASSES[location[0]], error, location_offset=1)
    return ContractViolation("Ack.kind", "must be one of progress, pool_hits, final", first.get("input"), "CTL-5")


def validate_ack(data: Any) -> Union[ProgressAck, PoolHitsAck, FinalAck]:
    """Return the ack ``data`` (a dict or an ack) describes; raise ContractViolation otherwise."""
    try:
        return _ACK_ADAPTER.validate_python(data)
    except ValidationError as error:
        raise _ack_violation(error) from error


def validate_ack_json(text: Union[str, bytes]) -> Union[ProgressAck, PoolHitsAck, FinalAck]:
    """Return the ack a JSON document describes; raise ContractViolation otherwise."""
    try:
        return _ACK_ADAPTER.validate_json(text)
    except ValidationError as error:
        raise _ack_violation(error) from error


# ==================================================================== boundary checks
_HEX_DIGITS = b"0123456789abcdef"
"""The characters of a strict page key (KEY-2)."""


def validate_page_keys(keys: Any, *, strict: bool = False, field: str = "keys") -> Any:
    """Check that ``keys`` is a list, tuple or key sequence of page keys, and return it unchanged. Clause: KEY-2.

    Every key must be a non-empty str; with ``strict``, exactly 64 lowercase hex
    characters (``hicache_spec.is_page_key``). Raises ContractViolation naming
    ``field`` and the index of the first bad key.
    """
    if isinstance(keys, PrefixKeys):
        flat = keys.as_tuple()  # checked when built
    elif isinstance(keys, (list, tuple)):
        flat = tuple(keys)
        bad = find_key_problem(flat)
        if bad is not None:
            raise ContractViolation(f"{field}[{bad}]", "page key must be a non-empty str", flat[bad], "KEY-2")
    else:
        raise ContractViolation(field, "must be a list, tuple or key sequence of str", keys, "KEY-2")
    if strict and flat:
        # Fast path: every key 64 long and only lowercase hex digits overall means every key is a page key.
        joined = "".join(flat)
        if set(map(len, flat)) != {64} or not joined.isascii() or joined.encode("ascii").translate(None, _HEX_DIGITS):
            for index, key in enumerate(flat):
                if not is_page_key(key):
                    raise ContractViolation(
                        f"{field}[{index}]", "page key must be 64 lowercase hex characters", key, "KEY-2"
                    )
    return keys


@functools.lru_cache(maxsize=64)
def _page_offsets_cached(page_size: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.arange(page_size, dtype=dtype, device=device)


def _page_offsets(page_size: int, like: torch.Tensor) -> torch.Tensor:
    """Return ``[0, 1, ..., page_size - 1]`` with the dtype and device of ``like`` (cached)."""
    return _page_offsets_cached(page_size, like.dtype, like.device)


def validate_host_indices(
    host_indices: Any, key_count: int, page_size: int, *, field: str = "host_indices"
) -> torch.Tensor:
    """Check the host slots of ``key_count`` pages and return the tensor itself (never a copy). Clauses: BE-15, BE-16.

    Rules, in order: a tensor on the CPU or a CUDA device (a meta tensor has
    no slots to read); a 1-D integer tensor; exactly ``key_count * page_size``
    slots; each page's first slot a non-negative multiple of ``page_size``;
    each page's slots consecutive. Raises ContractViolation naming ``field``
    (with the page index where one applies) and the rule.
    """
    if not is_count(page_size, 1):
        raise ContractViolation("page_size", "must be an int >= 1", page_size, "BE-15")
    if not is_count(key_count):
        raise ContractViolation("key_count", "must be an int >= 0", key_count, "BE-15")
    if isinstance(host_indices, torch.Tensor) and host_indices.device.type not in ("cpu", "cuda"):
        raise ContractViolation(
            field,
            "must be a tensor on the CPU (or a CUDA device), whose slots can be read",
            f"tensor on {host_indices.device}",
            "BE-15",
        )  # a meta tensor holds no slots
    problem = _index_tensor_problem(host_indices)
    if problem is not None:
        raise ContractViolation(field, problem, host_indices, "BE-15")
    tensor: torch.Tensor = host_indices  # no problem: a 1-D integer tensor
    expected = key_count * page_size
    if host_indices.numel() != expected:
        raise ContractViolation(
            field,
            f"must hold key_count * page_size = {key_count} * {page_size} = {expected} slots",
            host_indices,
            "BE-15",
        )
    if key_count == 0:
        return tensor
    pages = host_indices.view(key_count, page_size)  # a view of the caller's tensor: nothing is copied
    first_slots = pages[:, 0]
    # Fast path, three vectorised checks: consecutive within each page, non-negative, aligned.
    if (
        torch.equal(pages - first_slots.unsqueeze(1), _page_offsets(page_size, pages).expand(key_count, page_size))
        and int(first_slots.min()) >= 0
        and not bool((first_slots % page_size).any())
    ):
        return tensor
    # Slow path: find the first broken page, to name it.
    misaligned = (first_slots % page_size != 0) | (first_slots < 0)
    if page_size == 1:
        broken = misaligned
    else:
        steps = pages[:, 1:] - pages[:, :-1]
        broken = misaligned | (steps != 1).any(dim=1)
    if bool(broken.any()):
        page = int(broken.nonzero()[0, 0])
        if bool(misaligned[page]):
            raise ContractViolation(
                f"{field}[{page * page_size}]",
                f"page {page}'s first slot must be a non-negative multiple of page_size = {page_size}",
                int(first_slots[page]),
                "BE-15",
            )
        raise ContractViolation(
            f"{field}[{page * page_size}:{(page + 1) * page_size}]",
            f"page {page}'s slots must be consecutive",
            pages[page].tolist(),
            "BE-15",
        )
    return tensor
