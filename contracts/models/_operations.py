"""Operation snapshots the controller emits, and the acks the engine reads."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.values import BEST_EFFORT
from hicache_contracts.errors import ContractViolation
from hicache_contracts.models._base import ContractModel, violation_from
from hicache_contracts.models._enums import PrefetchPolicy
from hicache_contracts.models._fields import NonNegativeInt, PositiveInt, ReadOnlyMapping
from hicache_contracts.models._transfers import _check_pool_hits
from hicache_contracts.prefix_keys import PageKeys, PrefixKeysField


# ==================================================================== operations and acks
class _OperationSnapshot(ContractModel):
    """What a prefetch and a backup snapshot share: the operation, its keys, its prefix and its slicing."""

    operation_id: Union[int, str]
    """Identifies the operation across its acks."""
    keys: PageKeys
    """The operation's keys, root first: a prefetch's chain after the anchor, a backup's node's pages."""
    prefix_keys: PrefixKeysField
    """The operation's prefix (tri-state, PFX-1); each batch receives it extended by the keys before it."""
    page_size: PositiveInt
    """Tokens per page."""
    batch_size: PositiveInt = STORAGE_BATCH_SIZE
    """Pages per storage call (CTL-2)."""

    _field_clauses: ClassVar[dict[str, str]] = {"keys": "KEY-2", "prefix_keys": "PFX-1", "batch_size": "CTL-2"}


class PrefetchOperationSnapshot(_OperationSnapshot):
    """A prefetch as the controller starts it: the keys it queries, its prefix and its policy. Clauses: PFX-1, CTL-2, CTL-9."""

    policy: PrefetchPolicy = BEST_EFFORT
    """The prefetch policy (CTL-9)."""

    _field_clauses: ClassVar[dict[str, str]] = {**_OperationSnapshot._field_clauses, "policy": "CTL-9"}
    _default_clause: ClassVar[str] = "CTL-2"


class BackupOperationSnapshot(_OperationSnapshot):
    """A backup as the controller starts it: the keys it writes and its prefix. Clauses: PFX-1, CTL-2, CTL-7."""

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
