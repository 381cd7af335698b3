"""The prefetch's IO stage: KV slice by slice with its KV-derived sidecars, then the other sidecars, then the final ack.

See docs/controller.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from hicache_contracts import FinalAck, HiCacheStorageExtraInfo, PageKeys, PoolName, PoolTransfer, ProgressAck
from hicache_reference.calls import BackendCaller, confirmed_pages, confirmed_pool_pages
from hicache_reference.controller_parts import Acks, PrefixInfo, Termination, Upkeep, note_failure
from hicache_reference.operations import PrefetchOperation
from hicache_reference.sidecar_pools import SidecarPool
from hicache_reference.sidecar_reads import SidecarReader
from hicache_spec import plan_batches

__all__ = ["PrefetchIO"]


@dataclass(eq=False, kw_only=True)
class PrefetchIO:
    """Load the agreed keys, one progress ack per slice, and always end with the final ack. Clauses: CTL-4..CTL-6, HYB-1."""

    caller: BackendCaller
    page_size: int
    batch_size: int
    derived_pools: tuple[SidecarPool, ...]
    sidecars: Optional[SidecarReader]
    """The reader of the pools with their own slots; None when there are none."""
    prefixes: PrefixInfo
    acks: Acks
    termination: Termination
    upkeep: Upkeep

    def process(self, operation: PrefetchOperation) -> None:
        """Load KV and sidecars, then always finish with the final ack (CTL-6)."""
        try:
            if not operation.revoked:
                self.load_kv(operation)
                if self.sidecars is not None and self.kv_completed(operation):
                    self.sidecars.load(operation)  # HYB-2
        except Exception as error:  # a failure of ours: record it, still finish (CTL-6)
            self.upkeep.record("prefetch IO", operation, error)
            operation.error = operation.error or f"internal error: {type(error).__name__}: {error}"
        finally:
            try:
                self.acks.finish(operation)
            except Exception as error:
                self.upkeep.record("final ack", operation, error)
                if not operation.done:
                    operation._record(
                        FinalAck(operation_id=operation.operation_id, tokens=operation.loaded_tokens, error=str(error))
                    )
                    operation._finish()

    def load_kv(self, operation: PrefetchOperation) -> None:
        """Read the agreed keys slice by slice, one agreed progress ack each. Clauses: CTL-4, CTL-5, RANK-3, RANK-4."""
        agreed_tokens = 0
        stopped = False
        assert operation.hit_pages is not None  # agreed before any read
        for slice_index, (start, end) in enumerate(plan_batches(operation.hit_pages, self.batch_size)):
            if not stopped and self.termination.should_terminate(operation):  # CTL-9
                stopped = True
                operation.terminated = True
                operation.error = operation.error or "terminated"
            local_tokens = agreed_tokens
            if not stopped:
                loaded = self.read_slice(operation, slice_index, start, end)
                local_tokens = agreed_tokens + loaded * self.page_size
                if self.stops_after(operation, loaded, end - start):  # CTL-4
                    stopped = True
            agreed = self.acks.agree(operation, local_tokens)  # RANK-3
            if agreed < local_tokens:  # RANK-4: another rank stopped; so does this one
                stopped = True
            agreed_tokens = agreed
            operation.loaded_tokens = agreed_tokens
            self.acks.emit(
                operation,
                ProgressAck(operation_id=operation.operation_id, slice_index=slice_index, tokens=agreed_tokens),
            )  # CTL-5

    def stops_after(self, operation: PrefetchOperation, loaded: int, asked: int) -> bool:
        """Whether a slice that loaded ``loaded`` of ``asked`` pages stops further reads. Clause: CTL-4."""
        return loaded < asked

    def read_slice(self, operation: PrefetchOperation, slice_index: int, start: int, end: int) -> int:
        """Read one slice of KV and its KV-derived sidecars with one info; return the pages loaded. Clauses: HYB-1, PFX-8."""
        keys = list(operation.keys[start:end])
        assert operation.host_indices is not None  # allocated before any read
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        extra_info = self.prefixes.for_slice(operation, start)  # PFX-2: one value for both reads (PFX-8)
        loaded = self.read_kv_slice(operation, keys, slots, extra_info)
        if self.derived_pools and loaded:
            loaded = min(loaded, self.read_derived_slice(operation, keys, slots, extra_info))  # HYB-1
        return loaded

    def read_kv_slice(
        self, operation: PrefetchOperation, keys: list[str], slots: torch.Tensor, extra_info: HiCacheStorageExtraInfo
    ) -> int:
        """``batch_get_v1`` of one slice; return the leading pages confirmed. Clauses: CTL-11, PFX-7."""
        outcome = self.caller.call("batch_get_v1", keys, slots, extra_info, quiescence=operation.quiescence)
        note_failure(operation, outcome)
        return confirmed_pages(outcome.result, len(keys)) if outcome.returned else 0

    def read_derived_slice(
        self, operation: PrefetchOperation, keys: list[str], slots: torch.Tensor, extra_info: HiCacheStorageExtraInfo
    ) -> int:
        """``batch_get_v2`` of the KV-derived sidecars of one slice; the minimum confirmed. Clauses: HYB-1, HYB-4, PFX-8."""
        transfers = [
            PoolTransfer(name=pool.name, host_indices=slots, keys=PageKeys(keys), indices_from_pool=PoolName.KV)
            for pool in self.derived_pools
        ]
        outcome = self.caller.call("batch_get_v2", transfers, extra_info, quiescence=operation.quiescence)
        note_failure(operation, outcome)
        if not outcome.returned:
            return 0
        return min(confirmed_pool_pages(outcome.result, pool.name, len(keys)) for pool in self.derived_pools)

    def kv_completed(self, operation: PrefetchOperation) -> bool:
        """Whether every agreed page loaded, on every rank (the last ack is agreed). Clause: HYB-2."""
        return operation.hit_pages is not None and operation.loaded_tokens == operation.hit_pages * self.page_size
