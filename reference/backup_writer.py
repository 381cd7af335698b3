"""The backup path: sidecars first, then KV slice by slice; the outcome agreed across ranks. See docs/controller.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from hicache_contracts import PageKeys, PoolName, PoolTransfer
from hicache_reference.calls import BackendCaller, confirmed_pages, confirmed_pool_pages
from hicache_reference.controller_parts import PrefixInfo, Upkeep
from hicache_reference.operations import BackupOperation
from hicache_reference.rank_group import RankGroup
from hicache_reference.sidecar_pools import SidecarPool, keys_of
from hicache_spec import (
    compute_backup_progress,
    compute_non_writer_backup_tokens,
    is_storage_writer,
    plan_batches,
    writes_pool,
)

__all__ = ["BackupWriter", "StorageWriter"]


class StorageWriter:
    """Which rank writes what with replicated KV (``is_mla_model``). Clause: CTL-8."""

    def __init__(self, replicated_kv: bool, tp_rank: int, dcp_rank: int) -> None:
        self.replicated_kv = replicated_kv
        self.tp_rank = tp_rank
        self.dcp_rank = dcp_rank

    def writes_kv(self) -> bool:
        """Whether this rank is the storage writer: every rank, or tp_rank == dcp_rank when KV is replicated."""
        return is_storage_writer(self.replicated_kv, self.tp_rank, self.dcp_rank)

    def writes_sidecar(self, transfer: PoolTransfer) -> bool:
        """Whether this rank writes a sidecar: the writer all, other ranks the rank-sharded ones (MAMBA)."""
        return writes_pool(transfer.name.value, self.writes_kv())


@dataclass(eq=False, kw_only=True)
class BackupWriter:
    """Write sidecars, then KV slice by slice; agree on the outcome. Clauses: CTL-7, CTL-8, CTL-13, CTL-15, HYB-5."""

    caller: BackendCaller
    page_size: int
    batch_size: int
    derived_pools: tuple[SidecarPool, ...]
    writer: StorageWriter
    channel: RankGroup
    prefixes: PrefixInfo
    upkeep: Upkeep
    on_backup_done: Optional[Callable[[BackupOperation], None]] = None

    def process(self, operation: BackupOperation) -> None:
        """Run the backup; a failure of ours is recorded; always finish and notify (CTL-13)."""
        try:
            self.run(operation)
        except Exception as error:
            self.upkeep.record("backup", operation, error)
            operation.error = operation.error or f"internal error: {type(error).__name__}: {error}"
            if operation.completed_tokens is None:
                operation.completed_tokens = 0
        finally:
            operation._finish()
            self.notify(operation)

    def run(self, operation: BackupOperation) -> None:
        """Write sidecars, then KV slice by slice, stopping at the first failed slice; agree (CTL-7, CTL-8, HYB-5)."""
        slices = plan_batches(len(operation.keys), self.batch_size)
        total_tokens = len(operation.keys) * self.page_size
        if not self.writer.writes_kv():
            # CTL-8, CTL-15: a non-writer writes only the rank-sharded sidecars and no KV.
            outcomes: list[bool] = []
            written = self.write_sidecars(operation, outcomes)
            operation.local_completed_tokens = compute_non_writer_backup_tokens(
                tuple(outcomes), len(operation.keys), self.page_size
            )
            offered = total_tokens if written else 0  # the agreed outcome is the writer's, unless ours failed
            operation.completed_tokens = self.agree(operation, offered)
            return
        operation.wrote_kv = True
        slice_ok: list[bool] = []
        if self.write_sidecars(operation):  # HYB-5: sidecars first
            for slice_index, (start, end) in enumerate(slices):
                ok = self.write_slice(operation, slice_index, start, end)
                slice_ok.append(ok)
                if not ok:  # CTL-7: stop at the first failed slice
                    break
        local = (
            compute_backup_progress(tuple(end - start for start, end in slices), tuple(slice_ok), self.page_size)
            if slice_ok
            else 0
        )
        operation.local_completed_tokens = local
        operation.completed_tokens = self.agree(operation, local)

    def write_slice(self, operation: BackupOperation, slice_index: int, start: int, end: int) -> bool:
        """``batch_set_v1`` of one slice; True only if every page succeeded. Clauses: CTL-7, CTL-11, PFX-2, PFX-7."""
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        outcome = self.caller.call(
            "batch_set_v1", keys, slots, self.prefixes.for_slice(operation, start), quiescence=operation.quiescence
        )
        if not outcome.returned:
            operation.error = operation.error or outcome.error
            return False
        return confirmed_pages(outcome.result, len(keys)) == len(keys)

    def sidecar_transfers(self, operation: BackupOperation) -> list[PoolTransfer]:
        """The caller's sidecar transfers, plus one per KV-derived pool over the KV keys and slots (HYB-1)."""
        derived = [
            PoolTransfer(
                name=pool.name,
                host_indices=operation.host_indices,
                keys=PageKeys(operation.keys),
                indices_from_pool=PoolName.KV,
            )
            for pool in self.derived_pools
        ]
        return derived + list(operation.sidecar_transfers)

    def write_sidecars(self, operation: BackupOperation, outcomes: Optional[list] = None) -> bool:
        """This rank's sidecars, one ``batch_set_v2`` per trailing-length group. Clauses: HYB-5, HYB-4, PFX-9, CTL-2, CTL-8.

        All or nothing: True only if every pool is present with every page
        True. ``outcomes`` receives, per transfer written, whether it fully
        succeeded (CTL-15).
        """
        transfers = [transfer for transfer in self.sidecar_transfers(operation) if self.writer.writes_sidecar(transfer)]
        if not transfers:
            return True
        for extra_info, group in self.prefixes.sidecar_groups(operation, operation.keys, transfers):
            outcome = self.caller.call("batch_set_v2", group, extra_info, quiescence=operation.quiescence)
            if not outcome.returned:
                operation.error = operation.error or outcome.error
                if outcomes is not None:
                    outcomes.extend(False for _ in group)
                return False
            oks = [
                confirmed_pool_pages(outcome.result, transfer.name, len(keys_of(transfer))) == len(keys_of(transfer))
                for transfer in group
            ]  # HYB-4
            if outcomes is not None:
                outcomes.extend(oks)
            if not all(oks):
                operation.error = operation.error or "sidecar write failed"
                return False
        return True

    def agree(self, operation: BackupOperation, local_tokens: int) -> int:
        """All-reduce the backup outcome with MIN, so every rank acks the same. Clauses: CTL-8, RANK-3."""
        return self.channel.all_reduce_min(local_tokens)

    def notify(self, operation: BackupOperation) -> None:
        if self.on_backup_done is not None:
            try:
                self.on_backup_done(operation)
            except Exception as error:
                self.upkeep.record("on_backup_done callback", operation, error)
