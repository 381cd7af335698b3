"""The small collaborators every stage of the reference controller shares: prefixes, upkeep, termination, acks.

Each is built complete by ``CacheController`` and handed to the stages that
use it; a planted-bug subclass of one replaces it in every stage at once
(``CacheController.with_parts``). See docs/controller.md.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import torch

from hicache_contracts import FinalAck, HiCacheStorageExtraInfo, PoolTransfer, PrefixKeys
from hicache_reference.calls import CallOutcome
from hicache_reference.operations import BackupOperation, PrefetchOperation
from hicache_reference.policies import is_terminated
from hicache_reference.rank_group import RankGroup
from hicache_reference.sidecar_pools import keys_of
from hicache_spec import plan_sidecar_groups

__all__ = ["Acks", "PrefixInfo", "Termination", "Upkeep", "note_failure"]

Operation = Union[PrefetchOperation, BackupOperation]


def note_failure(operation: Any, outcome: CallOutcome) -> None:
    """Keep the first failed call's error on the operation."""
    if not outcome.returned and operation.error is None:
        operation.error = outcome.error


class PrefixInfo:
    """The ``extra_info`` every backend call gets. Clauses: PFX-1..PFX-5, PFX-9."""

    def __init__(self, pass_prefix_keys: bool) -> None:
        self.pass_prefix_keys = pass_prefix_keys

    def for_operation(self, prefix: Optional[PrefixKeys]) -> HiCacheStorageExtraInfo:
        """The operation-level info: the prefix when the feature is on, else None (PFX-1, PFX-3)."""
        if not self.pass_prefix_keys:
            return HiCacheStorageExtraInfo(prefix_keys=None)  # PFX-3: off everywhere
        return HiCacheStorageExtraInfo(prefix_keys=prefix if prefix is not None else PrefixKeys(()))

    def for_slice(self, operation: Operation, start: int) -> HiCacheStorageExtraInfo:
        """A new info for the call whose first key is ``operation.keys[start]``. Clauses: PFX-2, PFX-4, PFX-5.

        O(batch) per call: the previous call's info is extended by the keys
        from its start to ``start``; a call starting before it (the IO after
        the hit query) starts again from the operation's own info.
        """
        cursor = getattr(operation, "_slice_info_cursor", None)  # (start, info) of the previous call
        if cursor is not None and cursor[0] <= start:
            origin, info = cursor
        else:
            origin, info = 0, operation.base_info
        info = info.extend(operation.keys[origin:start])
        operation._slice_info_cursor = (start, info)  # one tuple: a reader on another thread sees a whole pair
        return info

    def sidecar_groups(
        self, operation: Operation, span: Sequence[str], transfers: list[PoolTransfer]
    ) -> list[tuple[HiCacheStorageExtraInfo, list[PoolTransfer]]]:
        """Group sidecar transfers by the span keys they cover, each with its own info. Clauses: PFX-9, PFX-2, PFX-5.

        A transfer covers the span up to its first key: ``len(span)`` minus its
        key count, SGLang's rule for the trailing keys it sends.
        """
        counts = tuple(min(len(keys_of(transfer)), len(span)) for transfer in transfers)
        groups = plan_sidecar_groups(None if not self.pass_prefix_keys else (), tuple(span), counts)
        planned = []
        for prefix, members in groups:
            covered = 0 if prefix is None else len(prefix)  # prefix = () + span[:covered]
            planned.append((self.for_slice(operation, covered), [transfers[i] for i in members]))
        return planned


class Upkeep:
    """The controller's own failures (kept, never killing a thread) and the freeing of host slots. Clause: CTL-12."""

    def __init__(self) -> None:
        self.internal_errors: list[str] = []

    def record(self, stage: str, operation: Any, error: BaseException) -> None:
        self.internal_errors.append(
            f"{stage} of operation {getattr(operation, 'operation_id', '?')!r}: {type(error).__name__}: {error}"
        )

    def free_slots(self, operation: Any, pool: Any, slots: Optional[torch.Tensor]) -> None:
        """Free host slots once, after any abandoned call that may still write them has returned. Clause: CTL-12."""
        if slots is None or not slots.numel():
            return

        def free() -> None:
            try:
                pool.free(slots)
            except Exception as error:
                self.record("host free", operation, error)

        operation.quiescence.run_or_defer(free)


class Termination:
    """Whether the policy stops a prefetch before its next slice. Clauses: CTL-9, CTL-10, CTL-14."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def should_terminate(self, operation: PrefetchOperation) -> bool:
        return is_terminated(operation.policy, operation.termination_requested, self.clock(), operation.deadline)


class Acks:
    """A prefetch's acks: agreed across ranks, recorded, handed to ``on_ack``. Clauses: CTL-5, CTL-6, RANK-3."""

    def __init__(
        self,
        channel: RankGroup,
        host_pool: Any,
        upkeep: Upkeep,
        on_ack: Optional[Callable[[PrefetchOperation, Any], None]] = None,
    ) -> None:
        self.channel = channel
        self.host_pool = host_pool
        self.upkeep = upkeep
        self.on_ack = on_ack

    def agree(self, operation: PrefetchOperation, tokens: int) -> int:
        """All-reduce one ack with MIN across ranks. Clause: RANK-3."""
        return self.channel.all_reduce_min(tokens)

    def emit(self, operation: PrefetchOperation, ack: Any) -> None:
        """Record an ack on the operation and hand it to ``on_ack``. Clauses: CTL-5, CTL-6."""
        operation._record(ack)
        if self.on_ack is not None:
            try:
                self.on_ack(operation, ack)
            except Exception as error:  # a callback never kills the IO thread
                self.upkeep.record("on_ack callback", operation, error)

    def finish(self, operation: PrefetchOperation) -> None:
        """Free the unloaded slots, agree on the final ack and emit it. Clauses: CTL-6, CTL-12, RANK-3."""
        slots = operation.host_indices
        if slots is not None and operation.loaded_tokens < slots.numel():  # CTL-12: the unloaded tail, once
            self.upkeep.free_slots(operation, self.host_pool, slots[operation.loaded_tokens :])
            operation.host_indices = slots[: operation.loaded_tokens]
        tokens = self.agree(operation, operation.loaded_tokens)
        if operation.revoked and operation.error is None:
            operation.error = f"revoked: {operation.revoke_reason}"
        self.emit(operation, FinalAck(operation_id=operation.operation_id, tokens=tokens, error=operation.error))
        operation._finish()
