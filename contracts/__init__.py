"""hicache_contracts: the contract as types, and the suites that check it."""

from hicache_contracts.capabilities import Capabilities, declared_levels, detect_capabilities
from hicache_contracts.errors import ContractViolation, format_violation
from hicache_contracts.host_pool import HostPagePool
from hicache_contracts.interop import from_sglang, is_sglang_available, to_sglang
from hicache_contracts.models import (
    Ack,
    BackupOperationSnapshot,
    ContractModel,
    FinalAck,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    IndexTensor,
    PoolHitPolicy,
    PoolHitsAck,
    PoolName,
    PoolTransfer,
    PoolTransferResult,
    PrefetchOperationSnapshot,
    PrefetchPolicy,
    ProgressAck,
    ReadOnlyMapping,
    validate_ack,
    validate_ack_json,
    validate_host_indices,
    validate_page_keys,
)
from hicache_contracts.prefix_keys import PageKeys, PageKeysField, PrefixKeys, PrefixKeysField
from hicache_contracts.protocols import LegacyBackend, PoolAwareV2Backend, ZeroCopyV1Backend

__all__ = [
    "Capabilities",
    "HostPagePool",
    "LegacyBackend",
    "PoolAwareV2Backend",
    "ZeroCopyV1Backend",
    "declared_levels",
    "detect_capabilities",
    "Ack",
    "BackupOperationSnapshot",
    "ContractModel",
    "ContractViolation",
    "FinalAck",
    "HiCacheStorageConfig",
    "HiCacheStorageExtraInfo",
    "IndexTensor",
    "PageKeys",
    "PageKeysField",
    "PoolHitPolicy",
    "PoolHitsAck",
    "PoolName",
    "PoolTransfer",
    "PoolTransferResult",
    "PrefetchOperationSnapshot",
    "PrefetchPolicy",
    "PrefixKeys",
    "PrefixKeysField",
    "ProgressAck",
    "ReadOnlyMapping",
    "format_violation",
    "from_sglang",
    "is_sglang_available",
    "to_sglang",
    "validate_ack",
    "validate_ack_json",
    "validate_host_indices",
    "validate_page_keys",
]
