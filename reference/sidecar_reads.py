"""The prefetch's sidecar read: the pools with their own slots, once KV completed. See docs/controller.md."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hicache_contracts import PageKeys, PoolHitsAck, PoolTransfer, ReadOnlyMapping
from hicache_reference.calls import BackendCaller, CallOutcome, confirmed_pool_pages
from hicache_reference.controller_parts import Acks, PrefixInfo, Upkeep, note_failure
from hicache_reference.operations import PrefetchOperation
from hicache_reference.sidecar_pools import SidecarPool, keys_of
from hicache_spec import compute_trailing_window

__all__ = ["SidecarReader"]


@dataclass(eq=False, kw_only=True)
class SidecarReader:
    """Read every non-KV-derived pool's window of the hit, all or nothing; agree and ack. Clauses: HYB-2, HYB-3, HYB-4."""

    caller: BackendCaller
    pools: tuple[SidecarPool, ...]
    """The sidecar pools with their own slots (not KV-derived)."""
    prefixes: PrefixInfo
    acks: Acks
    upkeep: Upkeep

    def __post_init__(self) -> None:
        self._by_name = {pool.name.value: pool for pool in self.pools}

    def window(self, pool: SidecarPool, hit_pages: int) -> tuple[int, int]:
        """The pages a pool reads after a hit: all, or the trailing window ending at the hit. Clause: HYB-3."""
        if pool.is_trailing:
            return compute_trailing_window(hit_pages, pool.window_pages)
        return 0, hit_pages

    def load(self, operation: PrefetchOperation) -> None:
        """Read the sidecars once, agree per pool, ack their hits. Clauses: HYB-2, HYB-3, HYB-4, RANK-3."""
        hit_pages = operation.hit_pages
        assert hit_pages is not None  # agreed before any read
        local_hits = self.read(operation, hit_pages)
        agreed_hits = {}
        for pool in sorted(self.pools, key=lambda pool: pool.name.value):  # same order on every rank
            agreed_hits[pool.name.value] = self.acks.agree(operation, local_hits.get(pool.name.value, 0))
        for name, hits in agreed_hits.items():
            slots = operation.pool_host_indices.get(name)
            if slots is not None and hits == 0:
                del operation.pool_host_indices[name]
                self.upkeep.free_slots(operation, self._by_name[name].host_pool, slots)
        if any(hits == 0 for hits in agreed_hits.values()) and operation.error is None:
            operation.error = "sidecar read failed"
        self.acks.emit(
            operation, PoolHitsAck(operation_id=operation.operation_id, pool_hits=ReadOnlyMapping(agreed_hits))
        )

    def read(self, operation: PrefetchOperation, hit_pages: int) -> dict[str, int]:
        """Each pool's hit in pages: ``hit_pages`` on success, 0 on failure. Clauses: HYB-3, HYB-4.

        The slots of a successful read are kept in
        ``operation.pool_host_indices``, the others freed.
        """
        transfers = []
        allocated: list[tuple[SidecarPool, torch.Tensor]] = []
        for pool in self.pools:
            start, end = self.window(pool, hit_pages)  # HYB-3
            slots = pool.host_pool.alloc(end - start)
            if slots is None:
                break
            allocated.append((pool, slots))
            transfers.append(
                PoolTransfer(
                    name=pool.name,
                    host_indices=slots,
                    keys=PageKeys(operation.keys[start:end]),
                    hit_policy=pool.hit_policy,
                )
            )
        success = len(allocated) == len(self.pools) and self.read_parts(operation, transfers)
        if not success:
            for pool, slots in allocated:
                self.upkeep.free_slots(operation, pool.host_pool, slots)
            return {pool.name.value: 0 for pool in self.pools}
        for pool, slots in allocated:
            operation.pool_host_indices[pool.name.value] = slots
        return {pool.name.value: hit_pages for pool in self.pools}

    def read_parts(self, operation: PrefetchOperation, transfers: list[PoolTransfer]) -> bool:
        """One ``batch_get_v2`` per trailing-length group, unsliced. Clauses: CTL-2, HYB-2, HYB-4, PFX-9.

        The span is the agreed hit; each group's info carries the operation's
        prefix followed by the span up to its transfers' first key. All or
        nothing: the first call that does not confirm every page stops the read.
        """
        span = operation.keys[: operation.hit_pages]
        for extra_info, group in self.prefixes.sidecar_groups(operation, span, transfers):
            outcome = self.caller.call("batch_get_v2", group, extra_info, quiescence=operation.quiescence)
            note_failure(operation, outcome)
            if not self.read_succeeded(outcome, group):  # HYB-4
                return False
        return True

    def read_succeeded(self, outcome: CallOutcome, transfers: list[PoolTransfer]) -> bool:
        """Whether every pool is present in the result with every page True. Clause: HYB-4."""
        return outcome.returned and all(
            confirmed_pool_pages(outcome.result, transfer.name, len(keys_of(transfer))) == len(keys_of(transfer))
            for transfer in transfers
        )
