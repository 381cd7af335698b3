"""Sidecar pools beside KV (HYB family): ``SidecarPool`` and the controller's check of its pools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from hicache_contracts import ContractViolation, PageKeys, PoolHitPolicy, PoolName, PoolTransfer
from hicache_spec.values import is_count

__all__ = ["SidecarPool", "check_sidecar_pools", "keys_of"]


def keys_of(transfer: PoolTransfer) -> PageKeys:
    """A sidecar transfer's keys: the controller's own always have them, a caller's are checked at submission."""
    keys = transfer.keys
    assert keys is not None
    return keys


@dataclass(frozen=True)
class SidecarPool:
    """A host pool beside KV (HYB family): its name, its host memory and how its hit is measured.

    ``kv_derived``: the pool reuses the KV pool's slots and travels with every
    KV slice (``indices_from_pool=KV``, HYB-1); otherwise it has its own slots
    and is read once after KV completed (HYB-2). ``window_pages`` is N of a
    ``TRAILING_PAGES`` pool (HYB-3, HYB-7).
    """

    name: PoolName
    """Given as a member or its value (``"swa"``); held as the member."""
    host_pool: Any
    hit_policy: PoolHitPolicy = PoolHitPolicy.ALL_PAGES
    """Given as a member or its value; held as the member."""
    window_pages: int = 1
    kv_derived: bool = False

    def __post_init__(self) -> None:
        try:
            name = PoolName(self.name)
        except ValueError:
            raise ValueError(f"SidecarPool.name: must be a PoolName value (got {self.name!r})") from None
        if name is PoolName.KV:
            raise ValueError("SidecarPool.name: must not be kv, the controller's own pool (got 'kv')")
        try:
            policy = PoolHitPolicy(self.hit_policy)
        except ValueError:
            raise ValueError(
                f"SidecarPool.hit_policy: must be a PoolHitPolicy value (got {self.hit_policy!r})"
            ) from None
        window = self.window_pages
        if not is_count(window, 1):
            raise ValueError(f"SidecarPool.window_pages: must be an int >= 1 (got {window!r})")
        if self.kv_derived and policy is not PoolHitPolicy.ALL_PAGES:
            raise ValueError(f"SidecarPool.hit_policy: a KV-derived pool has every KV page (got {policy.value!r})")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "hit_policy", policy)

    @property
    def is_trailing(self) -> bool:
        return self.hit_policy is PoolHitPolicy.TRAILING_PAGES


def check_sidecar_pools(pools: Sequence[SidecarPool], host_pool: Any) -> tuple[SidecarPool, ...]:
    """Return the pools as a tuple; raise ContractViolation (``CacheController.sidecar_pools[i]...``) on a bad one."""
    checked = tuple(pools)
    page_size = int(host_pool.page_size)
    names = set()
    for index, pool in enumerate(checked):
        field = f"CacheController.sidecar_pools[{index}]"
        if not isinstance(pool, SidecarPool):
            raise ContractViolation(field, "must be a SidecarPool", pool, "HYB-1")
        if pool.name in names:
            raise ContractViolation(f"{field}.name", "must be unique", pool.name.value, "BE-19")
        names.add(pool.name)
        if int(pool.host_pool.page_size) != page_size:
            raise ContractViolation(
                f"{field}.host_pool.page_size",
                f"must equal the KV pool's page_size {page_size}",
                pool.host_pool.page_size,
                "HYB-1",
            )
        if pool.kv_derived and int(pool.host_pool.size) < int(host_pool.size):
            raise ContractViolation(
                f"{field}.host_pool.size",
                f"must hold every KV slot ({host_pool.size}) for a KV-derived pool",
                pool.host_pool.size,
                "HYB-1",
            )
    return checked
