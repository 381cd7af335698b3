"""The prefetch's first stage: hit query, host allocation, agreement across ranks, revoke. See docs/controller.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from hicache_contracts import PageKeys, PoolName, PoolTransfer
from hicache_reference.calls import BackendCaller, confirmed_exists, confirmed_kv_hit
from hicache_reference.controller_parts import PrefixInfo, Termination, Upkeep
from hicache_reference.operations import PrefetchOperation
from hicache_reference.policies import compute_deadline
from hicache_reference.rank_group import RankGroup, all_reduce_min_vector
from hicache_reference.settings import ControllerSettings
from hicache_reference.sidecar_pools import SidecarPool
from hicache_spec import (
    agree_restorable_hit_pages,
    compute_restorable_flags,
    is_prefetch_span_long_enough,
    is_prefetch_worth_it,
)

__all__ = ["HitQuery"]

_NO_POOL_VERDICT = -1
"""The packed agreement's value for a pool without a verdict on a rank (RANK-5)."""


@dataclass(eq=False, kw_only=True)
class HitQuery:
    """Query, allocate, agree, cut, and revoke if not worth it. Clauses: CTL-1, CTL-3, RANK-1, RANK-2, RANK-5, RANK-6."""

    caller: BackendCaller
    host_pool: Any
    prefetch_threshold: int
    timeouts: ControllerSettings
    sidecar_pools: tuple[SidecarPool, ...]
    channel: RankGroup
    prefixes: PrefixInfo
    termination: Termination
    upkeep: Upkeep

    def __post_init__(self) -> None:
        self.page_size = int(self.host_pool.page_size)

    def process(self, operation: PrefetchOperation) -> None:
        """Run the stage; a failure of ours revokes the operation, which still finishes (CTL-6)."""
        try:
            self.run(operation)
        except Exception as error:
            self.upkeep.record("hit query", operation, error)
            self.revoke(operation, f"internal error: {type(error).__name__}: {error}")

    def run(self, operation: PrefetchOperation) -> None:
        """Query, allocate, agree, cut, and revoke if not worth it (CTL-1, CTL-3, RANK-1, RANK-2)."""
        operation.local_restorable = None
        operation.local_pool_hits = {}
        if self.termination.should_terminate(operation):
            local_hit = 0  # RANK-1: a terminated operation still takes part in the agreement
        elif not self.span_worth_querying(operation):
            local_hit = 0  # CTL-3: declined before any query; every rank declines alike
            operation.declined = True
        else:
            local_hit = self.query(operation)
        operation.local_hit_pages = local_hit
        slots = None
        if is_prefetch_worth_it(local_hit * self.page_size, self.prefetch_threshold):
            slots = self.allocate(operation, local_hit)
            if slots is None:
                local_hit = 0  # CTL-3: host memory short counts as a miss, so every rank revokes
        # Below the threshold nothing is allocated: the agreed hit is at most this one, and is revoked.
        agreed = self.agree(operation, local_hit)  # RANK-1
        operation.hit_pages = agreed
        if slots is not None and agreed < local_hit:  # RANK-2: cut to the agreed count (CTL-12: free the rest)
            self.upkeep.free_slots(operation, self.host_pool, slots[agreed * self.page_size :])
            slots = slots[: agreed * self.page_size]
        operation.host_indices = slots
        if not self.is_worth_prefetching(operation, agreed):  # CTL-3
            self.revoke(operation, self._revoke_reason(operation, agreed))
            return
        # CTL-14: the wait budget follows the requested span, not the hit.
        operation.deadline = compute_deadline(
            operation.submitted_at, len(operation.keys) * self.page_size, self.timeouts
        )

    def _revoke_reason(self, operation: PrefetchOperation, agreed: int) -> str:
        if getattr(operation, "declined", False):
            return (
                f"span of {len(operation.keys) * self.page_size} tokens is below the threshold of "
                f"{max(self.prefetch_threshold, self.page_size)}; declined before any query"
            )
        if agreed:
            return f"agreed hit of {agreed * self.page_size} tokens is below the threshold of {self.prefetch_threshold}"
        return "miss"

    def query(self, operation: PrefetchOperation) -> int:
        """This rank's hit in pages: v2 when there are sidecar pools, else v1. Clauses: CTL-1, BE-21."""
        if self.sidecar_pools:
            return self.query_v2(operation)
        return self.query_v1(operation)

    def span_worth_querying(self, operation: PrefetchOperation) -> bool:
        """Whether the span reaches max(prefetch_threshold, page_size) tokens. Clause: CTL-3."""
        return is_prefetch_span_long_enough(
            len(operation.keys) * self.page_size, self.prefetch_threshold, self.page_size
        )

    def query_v1(self, operation: PrefetchOperation) -> int:
        """Query the whole chain in one ``batch_exists``, unsliced, as SGLang 0.5.21+ does. Clause: CTL-1."""
        if not operation.keys:
            return 0
        return self.exists_slice(operation, 0, 0, len(operation.keys))

    def exists_slice(self, operation: PrefetchOperation, slice_index: int, start: int, end: int) -> int:
        """The leading hit of one slice, as the backend confirms it. Clauses: PFX-2, PFX-7, CTL-11."""
        keys = list(operation.keys[start:end])
        outcome = self.caller.call(
            "batch_exists", keys, self.prefixes.for_slice(operation, start), quiescence=operation.quiescence
        )
        return confirmed_exists(outcome.result, len(keys)) if outcome.returned else 0

    def query_v2(self, operation: PrefetchOperation) -> int:
        """Query KV and every sidecar pool in one ``batch_exists_v2``; return the folded hit. Clauses: BE-21, PFX-7."""
        keys = list(operation.keys)
        if not keys:
            return 0
        outcome = self.caller.call(
            "batch_exists_v2",
            keys,
            self.exists_transfers(operation),
            self.prefixes.for_slice(operation, 0),
            quiescence=operation.quiescence,
        )
        if not outcome.returned:
            return 0
        hit = confirmed_kv_hit(outcome.result, len(keys))
        restorable = getattr(outcome.result, "restorable_prefix_pages", None)
        if restorable is not None:
            try:
                operation.local_restorable = tuple(int(length) for length in restorable)  # RANK-6
            except (TypeError, ValueError):
                operation.local_restorable = ()  # CTL-11: a malformed set restores nothing beyond 0
        entries: Any = getattr(outcome.result, "extra_pool_hit_pages", None)  # read by duck typing
        if callable(getattr(entries, "get", None)):  # a dict, or the models' read-only mapping
            for pool in self.sidecar_pools:
                value = entries.get(pool.name, entries.get(pool.name.value))
                if type(value) is int and 0 <= value <= len(keys):
                    operation.local_pool_hits[pool.name.value] = value  # RANK-5: the pool's own boundary
        return hit

    def exists_transfers(self, operation: PrefetchOperation) -> list[PoolTransfer]:
        """The sidecar part of the v2 query: ALL_PAGES pools name the chain, TRAILING_PAGES pools N keys (HYB-7)."""
        transfers = []
        for pool in self.sidecar_pools:
            keys = operation.keys[-pool.window_pages :] if pool.is_trailing else operation.keys
            transfers.append(
                PoolTransfer(
                    name=pool.name,
                    keys=PageKeys(keys),
                    hit_policy=pool.hit_policy,
                    indices_from_pool=PoolName.KV if pool.kv_derived else None,
                )
            )
        return transfers

    def allocate(self, operation: PrefetchOperation, pages: int) -> Optional[torch.Tensor]:
        """Host slots for ``pages`` pages; None when host memory is short (CTL-3)."""
        return self.host_pool.alloc(pages)

    def agree(self, operation: PrefetchOperation, local_hit: int) -> int:
        """Agree on the hit in one MIN all-reduce of a packed vector, once per operation. Clauses: RANK-1, RANK-2, RANK-5, RANK-6.

        The vector holds the hit (or, when any pool is TRAILING_PAGES, one
        restorable flag per prefix length of the span), then every sidecar
        pool's own boundary (-1: no verdict). The agreed boundaries are kept
        in ``operation.agreed_pool_hits``.
        """
        trailing = any(pool.is_trailing for pool in self.sidecar_pools)
        span = len(operation.keys)
        if trailing:
            flags = compute_restorable_flags(local_hit, getattr(operation, "local_restorable", None), span)
            head = tuple(int(flag) for flag in flags)  # RANK-6
        else:
            head = (local_hit,)
        local_pools = getattr(operation, "local_pool_hits", {})
        names = [pool.name.value for pool in self.sidecar_pools]
        packed = head + tuple(local_pools.get(name, _NO_POOL_VERDICT) for name in names)
        reduced = all_reduce_min_vector(self.channel, packed)  # RANK-5: one collective
        operation.agreed_pool_hits = {
            name: value for name, value in zip(names, reduced[len(head) :]) if value != _NO_POOL_VERDICT
        }
        if not trailing:
            return int(reduced[0])
        return agree_restorable_hit_pages((tuple(bool(flag) for flag in reduced[: len(head)]),))

    def is_worth_prefetching(self, operation: PrefetchOperation, agreed_pages: int) -> bool:
        """Whether the agreed hit reaches the threshold. Clause: CTL-3."""
        return is_prefetch_worth_it(agreed_pages * self.page_size, self.prefetch_threshold)

    def revoke(self, operation: PrefetchOperation, reason: str) -> None:
        """Revoke before IO: free every slot allocated for it (CTL-3, CTL-12)."""
        operation.revoked = True
        operation.revoke_reason = reason
        slots, operation.host_indices = operation.host_indices, None
        if slots is not None and slots.numel():
            self.upkeep.free_slots(operation, self.host_pool, slots)
