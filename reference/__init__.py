"""hicache_reference: the canonical controller and the reference backends."""

from hicache_reference.calls import BackendCaller, CallOutcome
from hicache_reference.controller import CacheController, SidecarPool
from hicache_reference.settings import ControllerSettings
from hicache_reference.device_copy import CopyHandle, PageCopier
from hicache_reference.operations import BackupOperation, PrefetchOperation
from hicache_reference.policies import PREFETCH_POLICIES
from hicache_reference.rank_group import (
    LocalRankGroup,
    RankAgreementError,
    RankGroup,
    ThreadRankGroup,
    TorchDistributedRankGroup,
)

__all__ = [
    "BackendCaller",
    "BackupOperation",
    "CacheController",
    "CallOutcome",
    "ControllerSettings",
    "CopyHandle",
    "LocalRankGroup",
    "PREFETCH_POLICIES",
    "PageCopier",
    "PrefetchOperation",
    "RankAgreementError",
    "RankGroup",
    "SidecarPool",
    "ThreadRankGroup",
    "TorchDistributedRankGroup",
]
