"""The pool and hit-policy enums, and their field annotations."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import WithJsonSchema
from pydantic_core import core_schema

from hicache_contracts.errors import ContractViolation


class _ValueEnum(str, Enum):
    """A str enum whose ``str()`` and ``format()`` give the member's value (as Python 3.11's StrEnum does)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class PoolName(_ValueEnum):
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


def pool_value(name: Any) -> str:
    """Return a pool name — our ``PoolName``, SGLang's, or its value — as the plain str value (``"kv"``).

    The one normalisation of pool names: results and registrations are keyed
    by it, since an enum member of another class hashes apart from its value.
    """
    return str(name.value) if isinstance(name, Enum) else str(name)


class PoolHitPolicy(_ValueEnum):
    """Which pages of a prefix a pool must hold for a hit (HYB-6, HYB-7); ``str()`` gives the value."""

    ALL_PAGES = "all_pages"
    """Every page in [0, kv_hit) must exist in the pool."""
    TRAILING_PAGES = "trailing_pages"
    """Only the last max(1, len(transfer.keys)) pages of the prefix must exist."""
    BLOCK_GROUPS = "block_groups"
    """Whole groups of ``group_pages`` keys at block boundaries; reports its own pages, never gates (HYB-6)."""


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

        def __repr__(self) -> str:  # as signatures and help() show the annotation
            return "validated"

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
