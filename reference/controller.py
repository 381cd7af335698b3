"""The reference cache controller: prefetch from and backup to an L3 storage backend.

Public API (the prose, step by step, is docs/controller.md)::

    controller = CacheController(backend, host_pool, settings=ControllerSettings(...),
                                 storage_config=None, sidecar_pools=(), rank_group=None,
                                 clock=time.monotonic, on_ack=None, on_backup_done=None, start=True)
    # or the options as keywords: CacheController(backend, host_pool, batch_size=..., pass_prefix_keys=...)
    operation = controller.prefetch(token_ids, prior_key=None, prefix_keys=None,
                                    policy="best_effort", operation_id=None)   # or keys=[...]
    backup = controller.backup(keys, host_indices, prefix_keys=None, sidecar_transfers=(), operation_id=None)
    controller.close(timeout=10.0)       # also a context manager; start() restarts after close()

``CacheController`` is a facade over collaborators built in its constructor,
one per seam: ``attachment`` (Attachment), ``prefixes`` (PrefixInfo),
``upkeep`` (Upkeep), ``termination`` (Termination), ``acks`` (Acks),
``hit_query`` (HitQuery), ``sidecar_reader`` (SidecarReader), ``prefetch_io``
(PrefetchIO), ``storage_writer`` (StorageWriter), ``backup_writer``
(BackupWriter) and ``workers`` (Workers).
A variant (a planted bug, an engine's own step) subclasses one collaborator
and plugs it in with ``CacheController.with_parts(part, ...)``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

import torch

from hicache_contracts import (
    HiCacheStorageConfig,
    PoolTransfer,
    validate_host_indices,
    validate_page_keys,
)
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.attachment import Attachment
from hicache_reference.backup_writer import BackupWriter, StorageWriter
from hicache_reference.calls import BackendCaller
from hicache_reference.controller_input import (
    OperationIds,
    check_policy,
    check_prefix,
    check_sidecar_transfers,
    key_chain,
    prior_key_of,
    CONTROLLER_ERRORS,
)
from hicache_reference.controller_parts import Acks, PrefixInfo, Termination, Upkeep
from hicache_reference.controller_variants import subclass_with_parts
from hicache_reference.hit_query import HitQuery
from hicache_reference.operations import BackupOperation, PrefetchOperation
from hicache_reference.prefetch_io import PrefetchIO
from hicache_reference.rank_group import LocalRankGroup, RankGroup
from hicache_reference.settings import ControllerSettings
from hicache_reference.sidecar_pools import SidecarPool
from hicache_reference.sidecar_reads import SidecarReader
from hicache_reference.workers import Workers
from hicache_spec.values import BEST_EFFORT

__all__ = ["CacheController", "ControllerSettings", "SidecarPool"]

_CLASS = "CacheController"


def _settings_of(settings: Optional[ControllerSettings]) -> ControllerSettings:
    """The settings given, or the defaults; anything else is an error naming the parameter."""
    if settings is None:
        return ControllerSettings()
    if not isinstance(settings, ControllerSettings):
        raise CONTROLLER_ERRORS.violation("settings", "must be a ControllerSettings", settings, "CTL-2")
    return settings


class CacheController:
    """Prefetch and backup between a host page pool and an L3 backend; see the module docstring."""

    attachment_class: ClassVar[type] = Attachment
    prefix_info_class: ClassVar[type] = PrefixInfo
    upkeep_class: ClassVar[type] = Upkeep
    termination_class: ClassVar[type] = Termination
    acks_class: ClassVar[type] = Acks
    hit_query_class: ClassVar[type] = HitQuery
    sidecar_reader_class: ClassVar[type] = SidecarReader
    prefetch_io_class: ClassVar[type] = PrefetchIO
    storage_writer_class: ClassVar[type] = StorageWriter
    backup_writer_class: ClassVar[type] = BackupWriter
    workers_class: ClassVar[type] = Workers

    @classmethod
    def with_parts(cls, *parts: type, name: Optional[str] = None, doc: Optional[str] = None) -> type:
        """A subclass of this controller whose collaborators are ``parts``, each a subclass of one part class."""
        return subclass_with_parts(cls, parts, name, doc)

    def __init__(
        self,
        backend: Any,
        host_pool: HostPagePool,
        *,
        settings: Optional[ControllerSettings] = None,
        storage_config: Optional[HiCacheStorageConfig] = None,
        sidecar_pools: Sequence[SidecarPool] = (),
        rank_group: Optional[RankGroup] = None,
        clock: Callable[[], float] = time.monotonic,
        on_ack: Optional[Callable[[PrefetchOperation, Any], None]] = None,
        on_backup_done: Optional[Callable[[BackupOperation], None]] = None,
        start: bool = True,
    ) -> None:
        """Build the controller over ``backend`` and ``host_pool``, and start its worker threads unless ``start`` is False.

        Parameters:
            backend: the L3 storage backend, any object with the methods SGLang calls (legacy, v1 or v2).
            host_pool: the KV host page pool (``HostPagePool``) pages move through.
            settings: the options (``ControllerSettings``: batch size, threshold, timeouts, prefix metadata,
                call deadline, registration); None: the defaults.
            storage_config: the rank's ``HiCacheStorageConfig`` (None: a lone rank); decides who writes
                replicated KV (CTL-8).
            sidecar_pools: the hybrid model's other host pools (``SidecarPool``), KV-derived or separate.
            rank_group: how the ranks agree (RANK family); None: a lone rank (``LocalRankGroup``).
            clock: seconds, for the timeout policy (default ``time.monotonic``).
            on_ack: called as ``on_ack(operation, ack)`` with each ack of a prefetch, in order.
            on_backup_done: called as ``on_backup_done(operation)`` when a backup finishes.
            start: start the worker threads now (else call ``start()``).
        """
        self.settings: ControllerSettings = _settings_of(settings)
        """The controller's options, validated (ControllerSettings)."""
        attachment = self.attachment = self.attachment_class(backend, host_pool, storage_config, sidecar_pools)
        """The backend, the host pools and the storage config, and the facts that follow from them (Attachment)."""
        # Those facts, fixed for the controller's life, under the controller's own names (documented on Attachment).
        self.backend, self.host_pool, self.storage_config = backend, host_pool, storage_config
        self.page_size: int = attachment.page_size
        self.sidecar_pools: tuple[SidecarPool, ...] = attachment.sidecar_pools
        self.derived_pools, self.separate_pools = attachment.derived_pools, attachment.separate_pools
        self.tp_rank, self.dcp_rank = attachment.tp_rank, attachment.dcp_rank
        self.is_replicated_kv: bool = attachment.is_replicated_kv
        self.rank_group: RankGroup = rank_group if rank_group is not None else LocalRankGroup()
        # One channel per worker thread, opened in this order on every rank.
        hit_channel = self.rank_group.channel("hit_query")
        io_channel = self.rank_group.channel("prefetch_io")
        backup_channel = self.rank_group.channel("backup")
        self.caller = BackendCaller(backend, self.settings.call_deadline)
        self._operation_ids = OperationIds()
        self._build_parts(clock, hit_channel, io_channel, backup_channel, on_ack, on_backup_done)
        if self.settings.register_host_pools:
            self.attachment.register_host_pools()
        if start:
            self.start()

    def _build_parts(
        self, clock: Any, hit_channel: Any, io_channel: Any, backup_channel: Any, on_ack: Any, on_backup_done: Any
    ) -> None:
        settings = self.settings
        self.prefixes = self.prefix_info_class(settings.pass_prefix_keys)
        self.upkeep = self.upkeep_class()
        self.termination = self.termination_class(clock)
        self.acks = self.acks_class(io_channel, self.host_pool, self.upkeep, on_ack)
        shared = dict(caller=self.caller, prefixes=self.prefixes, upkeep=self.upkeep)
        self.hit_query = self.hit_query_class(
            host_pool=self.host_pool,
            prefetch_threshold=settings.prefetch_threshold,
            timeouts=settings,
            sidecar_pools=self.sidecar_pools,
            channel=hit_channel,
            termination=self.termination,
            **shared,
        )
        separate = self.separate_pools
        self.sidecar_reader = self.sidecar_reader_class(pools=separate, acks=self.acks, **shared) if separate else None
        self.prefetch_io = self.prefetch_io_class(
            page_size=self.page_size,
            batch_size=settings.batch_size,
            derived_pools=self.derived_pools,
            sidecars=self.sidecar_reader,
            acks=self.acks,
            termination=self.termination,
            **shared,
        )
        self.storage_writer = self.storage_writer_class(self.is_replicated_kv, self.tp_rank, self.dcp_rank)
        self.backup_writer = self.backup_writer_class(
            page_size=self.page_size,
            batch_size=settings.batch_size,
            derived_pools=self.derived_pools,
            writer=self.storage_writer,
            channel=backup_channel,
            on_backup_done=on_backup_done,
            **shared,
        )
        self.workers = self.workers_class(
            self.caller, self.hit_query.process, self.prefetch_io.process, self.backup_writer.process
        )

    # ================================================================ options and state
    @property
    def batch_size(self) -> int:
        """Pages per storage call (CTL-2)."""
        return self.settings.batch_size

    @property
    def prefetch_threshold(self) -> int:
        """Spans below max(this, page_size) tokens are declined; agreed hits below it revoked (CTL-3)."""
        return self.settings.prefetch_threshold

    @property
    def pass_prefix_keys(self) -> bool:
        """Whether backends receive prefix metadata (PFX-1, PFX-3)."""
        return self.settings.pass_prefix_keys

    @property
    def clock(self) -> Callable[[], float]:
        """The policies' clock, also the operations' submission time (``termination.clock``)."""
        return self.termination.clock

    @property
    def on_ack(self) -> Optional[Callable[[PrefetchOperation, Any], None]]:
        """Called as ``on_ack(operation, ack)`` from the IO thread."""
        return self.acks.on_ack

    @on_ack.setter
    def on_ack(self, callback: Optional[Callable[[PrefetchOperation, Any], None]]) -> None:
        self.acks.on_ack = callback

    @property
    def on_backup_done(self) -> Optional[Callable[[BackupOperation], None]]:
        """Called as ``on_backup_done(operation)`` from the backup thread."""
        return self.backup_writer.on_backup_done

    @on_backup_done.setter
    def on_backup_done(self, callback: Optional[Callable[[BackupOperation], None]]) -> None:
        self.backup_writer.on_backup_done = callback

    @property
    def internal_errors(self) -> list[str]:
        """Failures of the controller's own code (and of callbacks), kept instead of killing a thread."""
        return self.upkeep.internal_errors

    # ================================================================ lifecycle
    def start(self) -> None:
        """Start the worker threads (done by the constructor; call again to restart after ``close``)."""
        self.workers.start()

    def close(self, timeout: Optional[float] = 10.0) -> bool:
        """Finish every submitted operation and stop the threads; return whether they stopped within ``timeout``.

        Operations still running in the timeout's last quarter (at most 1 s)
        have their backend calls abandoned (CTL-11) and end with their final
        ack, carrying the error. None waits for ever. Safe to call twice.

        A ``KeyboardInterrupt`` or ``SystemExit`` a backend call raised failed
        that call at once (CTL-11); it is re-raised here, once, after every
        operation has its final ack and the threads have stopped
        (``stop_request`` shows it before).
        """
        stopped = self.workers.close(timeout)
        stop_request = self.caller.take_stop_request()
        if stop_request is not None:
            raise stop_request
        return stopped

    @property
    def stop_request(self) -> Optional[BaseException]:
        """A ``KeyboardInterrupt`` or ``SystemExit`` from a backend call that ``close()`` will re-raise (else None)."""
        return self.caller.stop_request

    @property
    def running(self) -> bool:
        return self.workers.running

    @property
    def _threads(self) -> list:
        return self.workers.threads

    def __enter__(self) -> CacheController:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # ================================================================ submission
    def prefetch(
        self,
        token_ids: Optional[Sequence[int]] = None,
        *,
        keys: Optional[Sequence[str]] = None,
        prior_key: Optional[str] = None,
        prefix_keys: Optional[Sequence[str]] = None,
        policy: str = BEST_EFFORT,
        operation_id: Optional[Union[int, str]] = None,
    ) -> PrefetchOperation:
        """Start a prefetch of the pages after the anchor; return the operation at once.

        Give either ``token_ids`` (the chain is computed from ``prior_key``, the
        anchor's last page key; KEY-3) or ``keys``. ``prefix_keys``: every page
        up to and including the anchor (PFX-10); its last key must be
        ``prior_key``. Bad input raises ContractViolation and starts nothing.
        """
        policy = check_policy(policy)
        prefix = check_prefix("prefetch.prefix_keys", prefix_keys)
        chain = key_chain(token_ids, keys, prior_key_of(prefix, prior_key), self.page_size)
        operation = PrefetchOperation(
            operation_id=self._operation_ids.next(operation_id),
            keys=chain,
            base_info=self.prefixes.for_operation(prefix),
            policy=policy,
            page_size=self.page_size,
            batch_size=self.batch_size,
            submitted_at=self.clock(),
        )
        self.workers.submit_prefetch(operation)
        return operation

    def backup(
        self,
        keys: Sequence[str],
        host_indices: torch.Tensor,
        *,
        prefix_keys: Optional[Sequence[str]] = None,
        sidecar_transfers: Sequence[PoolTransfer] = (),
        operation_id: Optional[Union[int, str]] = None,
    ) -> BackupOperation:
        """Start a backup of the pages ``keys`` held in ``host_indices``; return the operation at once.

        ``prefix_keys``: every page before ``keys[0]``. ``sidecar_transfers``:
        the non-KV-derived sidecar pages (own keys and slots); KV-derived ones
        are added. The slots stay allocated until ``wait`` (and ``wait_quiescent``).
        """
        validate_page_keys(keys, field=f"{_CLASS}.backup.keys")
        chain = tuple(keys)
        validate_host_indices(host_indices, len(chain), self.page_size, field=f"{_CLASS}.backup.host_indices")
        prefix = check_prefix("backup.prefix_keys", prefix_keys)
        transfers = check_sidecar_transfers(sidecar_transfers, self.separate_pools)
        operation = BackupOperation(
            operation_id=self._operation_ids.next(operation_id),
            keys=chain,
            host_indices=host_indices,
            base_info=self.prefixes.for_operation(prefix),
            page_size=self.page_size,
            batch_size=self.batch_size,
            sidecar_transfers=transfers,
        )
        self.workers.submit_backup(operation)
        return operation

    def terminate(self, operation: PrefetchOperation) -> None:
        """Ask a prefetch to stop (the scheduler's request); the policy decides (CTL-9)."""
        operation.terminate()
