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

# Names outside __all__ (re-exported with `as`) stay importable from here, as they were.
from hicache_contracts.models._base import ContractModel, violation_from as violation_from
from hicache_contracts.models._boundary import host_page_starts as host_page_starts
from hicache_contracts.models._boundary import validate_host_indices, validate_page_keys
from hicache_contracts.models._config import HiCacheStorageConfig, HiCacheStorageExtraInfo
from hicache_contracts.models._enums import (
    PoolHitPolicy,
    PoolHitPolicyField as PoolHitPolicyField,
    PoolName,
    PoolNameField as PoolNameField,
    PrefetchPolicy,
    pool_value,
)
from hicache_contracts.models._fields import (
    FIELD_CLAUSE as FIELD_CLAUSE,
    IndexTensor,
    NonNegativeInt as NonNegativeInt,
    PositiveInt as PositiveInt,
    ReadOnlyMapping,
)
from hicache_contracts.models._operations import (
    Ack,
    BackupOperationSnapshot,
    FinalAck,
    PoolHitsAck,
    PrefetchOperationSnapshot,
    ProgressAck,
    validate_ack,
    validate_ack_json,
)
from hicache_contracts.models._transfers import PoolTransfer, PoolTransferResult, RestorablePages as RestorablePages

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
