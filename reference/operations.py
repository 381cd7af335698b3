"""The operations the controller runs: what a caller holds while a prefetch or backup is in flight.

``PrefetchOperation``: its acks in order (``acks``), the final ack
(``final_ack``), ``wait(timeout)``, ``terminate()`` (the scheduler asks to
stop, CTL-9), and after the final ack the host slots it loaded
(``loaded_host_indices``) and the sidecar slots of each non-KV-derived pool
(``pool_host_indices``). The caller owns those slots from the final ack on;
the controller has freed every other slot it allocated (CTL-12).

``BackupOperation``: ``completed_tokens`` once done (CTL-7), ``wait(timeout)``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Union

import torch

from hicache_contracts import (
    BackupOperationSnapshot,
    FinalAck,
    HiCacheStorageExtraInfo,
    PageKeys,
    PoolHitsAck,
    PrefetchOperationSnapshot,
    PrefetchPolicy,
    PrefixKeys,
    ProgressAck,
)

__all__ = ["BackupOperation", "PrefetchOperation"]

AnyAck = Union[ProgressAck, PoolHitsAck, FinalAck]
OperationId = Union[int, str]


class _Quiescence:
    """Counts backend calls run under a deadline, and holds host frees until every one has returned (CTL-12).

    A call abandoned at its deadline stays counted until it really returns, so
    slots it may still write are never freed (and reused) before then.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = 0
        self._deferred: list[Callable[[], None]] = []
        self._idle = threading.Event()
        self._idle.set()

    def begin_call(self) -> None:
        """Count a backend call that may outlive its deadline; ``returned`` uncounts it."""
        with self._lock:
            self._abandoned += 1
            self._idle.clear()

    def returned(self) -> None:
        """Record that a counted call returned; if it was the last, run the deferred frees, then signal idle."""
        with self._lock:
            self._abandoned -= 1
            if self._abandoned:
                return
            deferred, self._deferred = self._deferred, []
        for free in deferred:
            free()
        with self._lock:
            if not self._abandoned and not self._deferred:
                self._idle.set()

    def run_or_defer(self, free: Callable[[], None]) -> bool:
        """Run ``free`` now when no abandoned call may still touch the pages; else keep it. Return whether it ran."""
        with self._lock:
            if self._abandoned:
                self._deferred.append(free)
                return False
        free()
        return True

    def wait(self, timeout: Optional[float]) -> bool:
        """Wait until every abandoned call has returned; return whether that happened in time."""
        return self._idle.wait(timeout)


class _Operation:
    """What a prefetch and a backup share: the chain, its prefix and geometry, the first error and the end."""

    _slice_info_cursor: tuple[int, HiCacheStorageExtraInfo]
    """Set by the controller: the extra info of the latest slice and where it starts (PFX-2)."""

    def __init__(
        self,
        operation_id: OperationId,
        keys: tuple[str, ...],
        base_info: HiCacheStorageExtraInfo,
        page_size: int,
        batch_size: int,
    ) -> None:
        self.operation_id = operation_id
        """Identifies the operation in its acks and its trace."""
        self.keys = keys
        """The page keys, root first: a prefetch's chain after its anchor (KEY-3), a backup's node pages."""
        self.base_info = base_info
        """The operation-level extra info: its ``prefix_keys`` is the operation's prefix (PFX-1, PFX-10)."""
        self.page_size = page_size
        self.batch_size = batch_size
        self.error: Optional[str] = None
        """Why the operation ended early, or the first failed call's error."""
        self.quiescence = _Quiescence()
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the operation finished (a prefetch: its final ack); return whether it did within ``timeout``."""
        return self._done.wait(timeout)

    def _snapshot_fields(self) -> dict[str, Any]:
        """The fields every operation snapshot has."""
        return dict(
            operation_id=self.operation_id,
            keys=PageKeys(self.keys),
            prefix_keys=self.base_info.prefix_keys,
            page_size=self.page_size,
            batch_size=self.batch_size,
        )

    def _finish(self) -> None:
        self._done.set()


class PrefetchOperation(_Operation):
    """One prefetch: the chain it queries, its prefix and policy, and everything it emitted."""

    def __init__(
        self,
        operation_id: OperationId,
        keys: tuple[str, ...],
        base_info: HiCacheStorageExtraInfo,
        policy: PrefetchPolicy,
        page_size: int,
        batch_size: int,
        submitted_at: float,
    ) -> None:
        super().__init__(operation_id, keys, base_info, page_size, batch_size)
        self.policy = policy
        """The prefetch policy (CTL-9)."""
        self.submitted_at = submitted_at
        """The controller clock when the prefetch was submitted; the timeout counts from here."""
        self.local_hit_pages: Optional[int] = None
        """This rank's hit before agreement."""
        self.local_restorable: Optional[tuple[int, ...]] = None
        """The restorable prefix lengths this rank's backend reported (None: 1..hit; RANK-6, BE-26)."""
        self.local_pool_hits: dict[str, int] = {}
        """Each sidecar pool's own boundary as this rank's backend reported it (RANK-5)."""
        self.agreed_pool_hits: dict[str, int] = {}
        """Each pool's boundary agreed by every rank; a pool any rank left out is absent (RANK-5)."""
        self.declined = False
        """Whether the span was too short to query at all (CTL-3)."""
        self.hit_pages: Optional[int] = None
        """The hit agreed by every rank (RANK-1); the keys are cut to it (RANK-2)."""
        self.deadline: Optional[float] = None
        """When the timeout policy gives up (CTL-14: from the requested span); set once the hit is agreed."""
        self.revoked = False
        """Whether the prefetch was revoked before IO (CTL-3)."""
        self.revoke_reason: Optional[str] = None
        self.terminated = False
        """Whether IO stopped because of termination (CTL-9, RANK-4)."""
        self.host_indices: Optional[torch.Tensor] = None
        """The host slots allocated for the agreed pages (None when revoked)."""
        self.loaded_tokens = 0
        """Tokens loaded and agreed so far (the last progress ack)."""
        self.pool_host_indices: dict[str, torch.Tensor] = {}
        """Host slots of each non-KV-derived sidecar pool that loaded (HYB-2), by pool name."""
        self._termination_requested = False
        self._lock = threading.Lock()
        self._acks: list[AnyAck] = []

    # ------------------------------------------------------------ the scheduler's side
    def terminate(self) -> None:
        """Ask the operation to stop; the policy decides whether and when it does (CTL-9)."""
        self._termination_requested = True

    @property
    def termination_requested(self) -> bool:
        return self._termination_requested

    @property
    def acks(self) -> tuple[AnyAck, ...]:
        """Every ack emitted so far, in order."""
        with self._lock:
            return tuple(self._acks)

    @property
    def progress_acks(self) -> tuple[ProgressAck, ...]:
        return tuple(ack for ack in self.acks if isinstance(ack, ProgressAck))

    @property
    def final_ack(self) -> Optional[FinalAck]:
        """The final ack, once emitted (CTL-6)."""
        acks = self.acks
        return acks[-1] if acks and isinstance(acks[-1], FinalAck) else None

    @property
    def agreed_keys(self) -> tuple[str, ...]:
        """The keys cut to the agreed hit (RANK-2); empty before agreement."""
        return self.keys[: self.hit_pages or 0]

    @property
    def loaded_host_indices(self) -> torch.Tensor:
        """The host slots of the loaded pages, page by page; the caller owns them after the final ack."""
        if self.host_indices is None:
            return torch.empty(0, dtype=torch.int64)
        return self.host_indices[: self.loaded_tokens]

    def snapshot(self) -> PrefetchOperationSnapshot:
        """Return the operation as the contract model the trace checker reads."""
        return PrefetchOperationSnapshot(**self._snapshot_fields(), policy=self.policy)

    # ------------------------------------------------------------ the controller's side
    def _record(self, ack: AnyAck) -> None:
        with self._lock:
            self._acks.append(ack)

    def __repr__(self) -> str:
        return (
            f"PrefetchOperation(id={self.operation_id!r}, keys={len(self.keys)}, hit_pages={self.hit_pages}, "
            f"loaded_tokens={self.loaded_tokens}, done={self.done})"
        )


class BackupOperation(_Operation):
    """One backup: the keys and host slots it writes, and how far it got (CTL-7)."""

    def __init__(
        self,
        operation_id: OperationId,
        keys: tuple[str, ...],
        host_indices: torch.Tensor,
        base_info: HiCacheStorageExtraInfo,
        page_size: int,
        batch_size: int,
        sidecar_transfers: tuple[Any, ...],
    ) -> None:
        super().__init__(operation_id, keys, base_info, page_size, batch_size)
        self.host_indices = host_indices
        """The host slots of those pages, page by page; read only, never freed by the controller."""
        self.sidecar_transfers = sidecar_transfers
        """The caller's non-KV-derived sidecar transfers (HYB-5)."""
        self.completed_tokens: Optional[int] = None
        """Tokens backed up, agreed across ranks (CTL-7, CTL-8); None until done."""
        self.local_completed_tokens: Optional[int] = None
        """Tokens this rank completed: its KV writes, or on a non-writer the whole span iff it wrote sidecars and all succeeded (CTL-15)."""
        self.wrote_kv = False
        """Whether this rank issued KV writes (False on ranks that are not the storage writer, CTL-8)."""

    def wait_quiescent(self, timeout: Optional[float] = None) -> bool:
        """Wait until no abandoned backend call may still read the host slots (reuse them only then)."""
        return self.quiescence.wait(timeout)

    @property
    def prefix_keys(self) -> Optional[PrefixKeys]:
        return self.base_info.prefix_keys

    def snapshot(self) -> BackupOperationSnapshot:
        """Return the operation as the contract model the trace checker reads."""
        return BackupOperationSnapshot(**self._snapshot_fields())

    def __repr__(self) -> str:
        return (
            f"BackupOperation(id={self.operation_id!r}, keys={len(self.keys)}, "
            f"completed_tokens={self.completed_tokens}, done={self.done})"
        )
