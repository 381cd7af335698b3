"""The reference cache controller: prefetch from and backup to an L3 storage backend.

Public API::

    controller = CacheController(
        backend,                         # v1 (batch_exists, batch_get_v1, batch_set_v1); v2 for sidecars
        host_pool,                       # HostPagePool of KV pages; page_size comes from it
        storage_config=None,             # HiCacheStorageConfig; tp_rank and is_mla_model are read (CTL-8)
        sidecar_pools=(),                # SidecarPool(name, host_pool, hit_policy, window_pages, kv_derived)
        rank_group=None,                 # RankGroup (LocalRankGroup when None)
        batch_size=STORAGE_BATCH_SIZE,   # pages per storage call (CTL-2)
        prefetch_threshold=256,          # tokens; shorter spans are declined, shorter hits revoked (CTL-3)
        prefetch_timeout_base=1.0, prefetch_timeout_per_ki_token=0.25, prefetch_timeout_max=None,  # CTL-14
        pass_prefix_keys=False,          # the prefix metadata feature (PFX-1)
        call_deadline=30.0,              # seconds before a hung backend call is abandoned (CTL-11); None: never
        clock=time.monotonic,            # the policies' clock; inject one in tests
        on_ack=None,                     # on_ack(operation, ack), from the IO thread
        on_backup_done=None,             # on_backup_done(operation), from the backup thread
        register_host_pools=True,        # register_mem_pool_host / _v2, then on_host_pools_registered (BE-24, BE-27)
    )
    operation = controller.prefetch(token_ids, prior_key=None, prefix_keys=None,
                                    policy="best_effort", operation_id=None)
    operation = controller.prefetch(keys=[...], prefix_keys=[...])    # or the key chain itself
    operation.wait(timeout); operation.acks; operation.final_ack; operation.terminate()
    backup = controller.backup(keys, host_indices, prefix_keys=None,
                               sidecar_transfers=(), operation_id=None)
    backup.wait(timeout); backup.completed_tokens
    controller.close(timeout=10.0)       # also a context manager; start() restarts after close()

Threads: one for the hit query, one for prefetch IO, one for backup, each
with its own rank-group channel (operations are processed in submission
order, so every rank runs the same collectives in the same order).

Prefix metadata (PFX-1): every call that takes ``extra_info`` receives a
``HiCacheStorageExtraInfo`` — never None. With ``pass_prefix_keys=False`` its
``prefix_keys`` is None everywhere (PFX-3). With it on, the operation's
prefix is the caller's ``prefix_keys`` (``[]`` when not given: the anchor is
the root), and the call whose first key is ``keys[start]`` gets the prefix
followed by ``keys[:start]`` (PFX-2, PFX-4), built as a new immutable value
(PFX-5). The prefetch prefix holds the anchor's own pages (PFX-10), so its
last key is the ``prior_key`` of the key chain (KEY-3). Sidecar v2 reads and
writes are one call per trailing-length group, each carrying the prefix that
joins its keys (PFX-9, ``plan_sidecar_groups``), as SGLang 0.5.21+ does.

Prefetch, step by step (each a method a subclass may override):

1. hit query (``_hit_query``), as SGLang 0.5.23: a span shorter than
   max(prefetch_threshold, page_size) tokens is declined before any query
   (``_span_worth_querying``, CTL-3); else one unbatched call over the whole
   chain (CTL-1): ``_hit_query_v1`` (``batch_exists``) or, with sidecar
   pools, ``_hit_query_v2`` (``batch_exists_v2``, whose restorable lengths
   and per-pool boundaries are kept); a terminated operation queries nothing
   and counts 0;
2. host allocation for this rank's hit when it reaches the threshold
   (``_allocate``); when host memory is short the rank counts 0, so the
   agreement revokes the operation everywhere (CTL-3);
3. agreement (``_agree_hit``): one MIN all-reduce of a packed vector,
   exactly once (RANK-1, RANK-5): the hit, or with a TRAILING_PAGES pool one
   restorable flag per prefix length (RANK-6, the agreed hit being the
   largest length every rank restores), then every sidecar pool's own
   boundary; the keys are cut to it and the surplus slots freed (RANK-2,
   CTL-12); below the threshold the operation is revoked
   (``_is_worth_prefetching``, CTL-3);
4. IO (``_load_kv``): per slice of the agreed keys, ``_read_slice`` reads KV
   (``_read_kv_slice``, ``batch_get_v1``) and the KV-derived sidecars
   (``_read_derived_slice``, ``batch_get_v2``) with the same extra info
   object, and counts the minimum (HYB-1, PFX-8); a short slice or
   termination (``_should_terminate``) stops reading (``_stops_after``,
   CTL-4); every slice
   still gets one progress ack, all-reduced with MIN (``_agree_ack``,
   ``_emit_ack``; CTL-5, RANK-3, RANK-4);
5. when KV fully completed, the other sidecars are read once
   (``_load_sidecars`` → ``_read_sidecars``; windows re-aligned to the
   agreed hit by ``_sidecar_window``, HYB-3; one ``batch_get_v2`` per
   trailing-length group by ``_read_sidecar_parts``, CTL-2, PFX-9;
   all-or-nothing by ``_sidecar_read_succeeded``, HYB-4), agreed per pool and
   acked (HYB-2);
6. always a final ack (``_finish_prefetch``), after the unloaded slots were
   freed (``_free_host_slots``; CTL-6, CTL-12). The final ack's ``tokens`` is the last agreed
   progress; a failed sidecar read shows as pool hits of 0 and an ``error``.

Backup (``_run_backup``): sidecars first in one ``batch_set_v2`` per
trailing-length group over the whole span (``_write_sidecars``, HYB-5,
PFX-9), then KV slice by slice (``_write_slice``, ``batch_set_v1``), a slice
counting only if every page succeeded, stopping at the first failed slice
(CTL-7); never cancelled (CTL-13). With replicated KV (``is_mla_model``)
only the storage writer (tp_rank == dcp_rank, ``_writes_kv``) writes KV and
the replicated sidecars; every rank writes the rank-sharded ones (MAMBA,
``_writes_sidecar``, CTL-8). A non-writer's own outcome is the whole span
iff it wrote at least one sidecar and all succeeded (CTL-15,
``local_completed_tokens``); every rank agrees on the outcome
(``_agree_backup``: MIN, where a non-writer offers the whole operation unless
one of its sidecar writes failed).

Robustness (CTL-11): backend calls go through ``BackendCaller`` (exceptions
and missed deadlines become failures at that slice) and the ``confirmed_*``
validators (only a list of exactly len(keys) ``True`` counts). A call that
misses ``call_deadline`` is abandoned, not killed: its thread runs on until
the backend returns, and the operation's host slots are freed only then
(``PrefetchOperation.quiescence``; ``BackupOperation.wait_quiescent`` tells
a caller when its slots are no longer read). Errors of the controller
itself are kept in ``internal_errors`` and never kill a thread; the final
ack is emitted whatever happened.

Decisions the clauses leave open, documented in docs/controller.md: a rank
short of host memory offers a hit of 0; a rank below the threshold
allocates nothing but offers its true hit; termination is agreed through
the ack reduction; the prefetch timeout runs from submission (SGLang starts
it at the first blocked admission poll, which the reference has not); the
agreed backup outcome is the writer's.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import torch

from hicache_contracts import (
    ContractViolation,
    FinalAck,
    HiCacheStorageConfig,
    HiCacheStorageExtraInfo,
    PoolHitPolicy,
    PoolHitsAck,
    PageKeys,
    PoolName,
    PoolTransfer,
    PrefixKeys,
    ProgressAck,
    ReadOnlyMapping,
    validate_host_indices,
    validate_page_keys,
)
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.calls import (
    DEFAULT_CALL_DEADLINE,
    BackendCaller,
    CallOutcome,
    confirmed_exists,
    confirmed_kv_hit,
    confirmed_pages,
    confirmed_pool_pages,
)
from hicache_reference.operations import BackupOperation, PrefetchOperation
from hicache_reference.policies import (
    PREFETCH_POLICIES,
    TimeoutSettings,
    compute_deadline,
    is_prefetch_policy,
    is_terminated,
)
from hicache_reference.rank_group import LocalRankGroup, RankGroup, all_reduce_min_vector
from hicache_spec import (
    DEFAULT_PREFETCH_THRESHOLD_TOKENS,
    DEFAULT_PREFETCH_TIMEOUT_BASE,
    DEFAULT_PREFETCH_TIMEOUT_MAX,
    DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
    STORAGE_BATCH_SIZE,
    agree_restorable_hit_pages,
    compute_backup_progress,
    compute_key_chain,
    compute_non_writer_backup_tokens,
    compute_restorable_flags,
    compute_trailing_window,
    is_prefetch_span_long_enough,
    is_prefetch_worth_it,
    is_storage_writer,
    plan_batches,
    plan_sidecar_groups,
    writes_pool,
)

_NO_POOL_VERDICT = -1
"""The packed agreement's value for a pool without a verdict on a rank (RANK-5)."""

__all__ = ["CacheController", "SidecarPool"]

_STOP = object()
"""Queue sentinel: the worker that reads it exits."""

_CLASS = "CacheController"


def _keys_of(transfer: PoolTransfer) -> PageKeys:
    """A sidecar transfer's keys: the controller's own always have them, a caller's are checked at submission."""
    keys = transfer.keys
    assert keys is not None
    return keys


def _violation(field: str, rule: str, value: Any, clause_id: str) -> ContractViolation:
    return ContractViolation(f"{_CLASS}.{field}", rule, value, clause_id)


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
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"SidecarPool.window_pages: must be an int >= 1 (got {window!r})")
        if self.kv_derived and policy is not PoolHitPolicy.ALL_PAGES:
            raise ValueError(f"SidecarPool.hit_policy: a KV-derived pool has every KV page (got {policy.value!r})")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "hit_policy", policy)

    @property
    def is_trailing(self) -> bool:
        return self.hit_policy is PoolHitPolicy.TRAILING_PAGES


def _positive_int(field: str, value: Any, clause_id: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _violation(field, "must be an int >= 1", value, clause_id)
    return value


class CacheController:
    """Prefetch and backup between a host page pool and an L3 backend; see the module docstring."""

    def __init__(
        self,
        backend: Any,
        host_pool: HostPagePool,
        *,
        storage_config: Optional[HiCacheStorageConfig] = None,
        sidecar_pools: Sequence[SidecarPool] = (),
        rank_group: Optional[RankGroup] = None,
        batch_size: int = STORAGE_BATCH_SIZE,
        prefetch_threshold: int = DEFAULT_PREFETCH_THRESHOLD_TOKENS,
        prefetch_timeout_base: float = DEFAULT_PREFETCH_TIMEOUT_BASE,
        prefetch_timeout_per_ki_token: float = DEFAULT_PREFETCH_TIMEOUT_PER_KI_TOKEN,
        prefetch_timeout_max: Optional[float] = DEFAULT_PREFETCH_TIMEOUT_MAX,
        pass_prefix_keys: bool = False,
        call_deadline: Optional[float] = DEFAULT_CALL_DEADLINE,
        clock: Callable[[], float] = time.monotonic,
        on_ack: Optional[Callable[[PrefetchOperation, Any], None]] = None,
        on_backup_done: Optional[Callable[[BackupOperation], None]] = None,
        register_host_pools: bool = True,
        start: bool = True,
    ) -> None:
        self.backend = backend
        self.host_pool = host_pool
        self.page_size: int = int(host_pool.page_size)
        """Tokens per page, from the host pool."""
        self.storage_config = storage_config
        self.batch_size = _positive_int("batch_size", batch_size, "CTL-2")
        """Pages per storage call (CTL-2)."""
        if isinstance(prefetch_threshold, bool) or not isinstance(prefetch_threshold, int) or prefetch_threshold < 0:
            raise _violation("prefetch_threshold", "must be an int >= 0", prefetch_threshold, "CTL-3")
        self.prefetch_threshold = prefetch_threshold
        """Spans below max(this, page_size) tokens are declined before any query; agreed hits below it revoked (CTL-3)."""
        self.timeout_settings = TimeoutSettings(
            prefetch_timeout_base, prefetch_timeout_per_ki_token, prefetch_timeout_max
        )
        if not isinstance(pass_prefix_keys, bool):
            raise _violation("pass_prefix_keys", "must be a bool", pass_prefix_keys, "PFX-1")
        self.pass_prefix_keys = pass_prefix_keys
        """Whether backends receive prefix metadata (PFX-1, PFX-3)."""
        self.clock = clock
        self.on_ack = on_ack
        self.on_backup_done = on_backup_done
        self.sidecar_pools: tuple[SidecarPool, ...] = self._check_sidecar_pools(sidecar_pools)
        self.rank_group: RankGroup = rank_group if rank_group is not None else LocalRankGroup()
        # One channel per worker thread, opened in this order on every rank.
        self._hit_group = self.rank_group.channel("hit_query")
        self._io_group = self.rank_group.channel("prefetch_io")
        self._backup_group = self.rank_group.channel("backup")
        self.caller = BackendCaller(backend, call_deadline)
        self.internal_errors: list[str] = []
        """Failures of the controller's own code (and of callbacks), kept instead of killing a thread."""
        self._operation_ids = itertools.count()
        self._threads: list[threading.Thread] = []
        self._hit_queue: queue.Queue = queue.Queue()
        self._io_queue: queue.Queue = queue.Queue()
        self._backup_queue: queue.Queue = queue.Queue()
        self._state_lock = threading.Lock()
        self._running = False
        if register_host_pools:
            self._register_host_pools()
        if start:
            self.start()

    # ================================================================ set-up
    def _check_sidecar_pools(self, pools: Sequence[SidecarPool]) -> tuple[SidecarPool, ...]:
        checked = tuple(pools)
        names = set()
        for index, pool in enumerate(checked):
            if not isinstance(pool, SidecarPool):
                raise _violation(f"sidecar_pools[{index}]", "must be a SidecarPool", pool, "HYB-1")
            if pool.name in names:
                raise _violation(f"sidecar_pools[{index}].name", "must be unique", pool.name.value, "BE-19")
            names.add(pool.name)
            if int(pool.host_pool.page_size) != self.page_size:
                raise _violation(
                    f"sidecar_pools[{index}].host_pool.page_size",
                    f"must equal the KV pool's page_size {self.page_size}",
                    pool.host_pool.page_size,
                    "HYB-1",
                )
            if pool.kv_derived and int(pool.host_pool.size) < int(self.host_pool.size):
                raise _violation(
                    f"sidecar_pools[{index}].host_pool.size",
                    f"must hold every KV slot ({self.host_pool.size}) for a KV-derived pool",
                    pool.host_pool.size,
                    "HYB-1",
                )
        return checked

    def _register_host_pools(self) -> None:
        """Hand the host pools to the backend, once, before any IO, then end the burst. Clauses: BE-24, BE-27.

        ``on_host_pools_registered`` is called once after the burst, where the
        backend has it (SGLang 0.5.23); a backend that raises from it fails the
        construction, as it fails SGLang's attach.
        """
        register = getattr(self.backend, "register_mem_pool_host", None)
        if callable(register):
            register(self.host_pool)
        if self.sidecar_pools:
            register_v2 = getattr(self.backend, "register_mem_host_pool_v2", None)
            if callable(register_v2):
                register_v2(self.host_pool, PoolName.KV)
                for pool in self.sidecar_pools:
                    register_v2(pool.host_pool, pool.name)
        registered = getattr(self.backend, "on_host_pools_registered", None)
        if callable(registered):
            registered()  # BE-27

    @property
    def derived_pools(self) -> tuple[SidecarPool, ...]:
        """The KV-derived sidecar pools, read with every KV slice (HYB-1)."""
        return tuple(pool for pool in self.sidecar_pools if pool.kv_derived)

    @property
    def separate_pools(self) -> tuple[SidecarPool, ...]:
        """The sidecar pools with their own slots, read once after KV (HYB-2)."""
        return tuple(pool for pool in self.sidecar_pools if not pool.kv_derived)

    @property
    def tp_rank(self) -> int:
        return int(getattr(self.storage_config, "tp_rank", 0))

    @property
    def dcp_rank(self) -> int:
        return int(getattr(self.storage_config, "dcp_rank", 0) or 0)

    @property
    def is_replicated_kv(self) -> bool:
        """Whether KV is replicated across TP ranks (``is_mla_model``, CTL-8)."""
        return bool(getattr(self.storage_config, "is_mla_model", False))

    # ================================================================ lifecycle
    def start(self) -> None:
        """Start the worker threads (done by the constructor; call again to restart after ``close``)."""
        with self._state_lock:
            if self._running:
                return
            self.caller.reopen()
            self._hit_queue = queue.Queue()
            self._io_queue = queue.Queue()
            self._backup_queue = queue.Queue()
            self._threads = [
                threading.Thread(target=self._hit_query_worker, name="hicache-hit-query", daemon=True),
                threading.Thread(target=self._io_worker, name="hicache-prefetch-io", daemon=True),
                threading.Thread(target=self._backup_worker, name="hicache-backup", daemon=True),
            ]
            for thread in self._threads:
                thread.start()
            self._running = True

    def close(self, timeout: Optional[float] = 10.0) -> bool:
        """Finish every submitted operation and stop the threads; return whether they stopped within ``timeout``.

        Operations still running when ``timeout`` is nearly spent (its last
        quarter, at most 1 s) have their backend calls abandoned and call
        nothing more (CTL-11): each still ends with its final ack, carrying
        the error. A call still inside the backend keeps its own thread until
        the backend returns (``caller.abandoned_threads()``); the operation's
        ``quiescence`` counts it, and it holds nothing of the controller's.
        None waits for ever. Safe to call twice.
        """
        with self._state_lock:
            if not self._running:
                return True
            self._running = False
            self._hit_queue.put(_STOP)
            self._backup_queue.put(_STOP)
            threads = list(self._threads)
        end = None if timeout is None else time.monotonic() + timeout
        grace = 0.0 if timeout is None else min(1.0, timeout / 4)
        for thread in threads:
            thread.join(None if end is None else max(0.0, end - grace - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            self.caller.abandon_calls()  # CTL-11: a hung call no longer holds its operation, nor close()
            for thread in threads:
                thread.join(None if end is None else max(0.0, end - time.monotonic()))
        stopped = not any(thread.is_alive() for thread in threads)
        self.caller.stop_call_threads(None if end is None else max(0.0, end - time.monotonic()))
        return stopped

    @property
    def running(self) -> bool:
        return self._running

    def __enter__(self) -> "CacheController":
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
        policy: str = "best_effort",
        operation_id: Optional[Union[int, str]] = None,
    ) -> PrefetchOperation:
        """Start a prefetch of the pages after the anchor; return the operation at once.

        Give either ``token_ids`` (the key chain is computed from
        ``prior_key``, the anchor's last page key; KEY-3) or ``keys``.
        ``prefix_keys`` is the keys of every page up to and including the
        anchor (PFX-10); when both are given its last key must be
        ``prior_key``. Bad input raises ContractViolation and starts nothing.
        """
        if not is_prefetch_policy(policy):
            raise _violation("prefetch.policy", f"must be one of {', '.join(PREFETCH_POLICIES)}", policy, "CTL-9")
        prefix = self._check_prefix("prefetch.prefix_keys", prefix_keys)
        if prefix is not None:
            anchor_key = prefix[-1] if len(prefix) else None  # PFX-10: the prefix ends with the anchor's last page
            if prior_key is None:
                prior_key = anchor_key
            elif prior_key != anchor_key:
                raise _violation(
                    "prefetch.prior_key",
                    "must be the last key of prefix_keys, the anchor's last page (None when prefix_keys is empty)",
                    prior_key,
                    "PFX-10",
                )
        chain = self._key_chain(token_ids, keys, prior_key)
        operation = PrefetchOperation(
            operation_id=self._next_id(operation_id),
            keys=chain,
            base_info=self._operation_extra_info(prefix),
            policy=policy,
            page_size=self.page_size,
            batch_size=self.batch_size,
            submitted_at=self.clock(),
        )
        self._submit(self._hit_queue, operation, "prefetch")
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

        ``prefix_keys``: the keys of every page before ``keys[0]`` (used when
        ``pass_prefix_keys``). ``sidecar_transfers``: the non-KV-derived
        sidecar pages to write (their own keys and slots); KV-derived
        sidecars are added by the controller. The host slots must stay
        allocated until ``wait`` (and ``wait_quiescent`` with a call deadline).
        """
        validate_page_keys(keys, field=f"{_CLASS}.backup.keys")
        chain = tuple(keys)
        validate_host_indices(host_indices, len(chain), self.page_size, field=f"{_CLASS}.backup.host_indices")
        prefix = self._check_prefix("backup.prefix_keys", prefix_keys)
        transfers = tuple(sidecar_transfers)
        known = {pool.name for pool in self.separate_pools}
        for index, transfer in enumerate(transfers):
            if not isinstance(transfer, PoolTransfer):
                raise _violation(f"backup.sidecar_transfers[{index}]", "must be a PoolTransfer", transfer, "HYB-5")
            if transfer.name not in known:
                raise _violation(
                    f"backup.sidecar_transfers[{index}].name",
                    "must name a non-KV-derived sidecar pool of the controller",
                    transfer.name.value,
                    "HYB-5",
                )
            if transfer.keys is None or transfer.host_indices is None:
                raise _violation(
                    f"backup.sidecar_transfers[{index}]", "must have keys and host_indices", transfer, "HYB-5"
                )
        operation = BackupOperation(
            operation_id=self._next_id(operation_id),
            keys=chain,
            host_indices=host_indices,
            base_info=self._operation_extra_info(prefix),
            page_size=self.page_size,
            batch_size=self.batch_size,
            sidecar_transfers=transfers,
        )
        self._submit(self._backup_queue, operation, "backup")
        return operation

    def terminate(self, operation: PrefetchOperation) -> None:
        """Ask a prefetch to stop (the scheduler's request); the policy decides (CTL-9)."""
        operation.terminate()

    def _submit(self, target: queue.Queue, operation: Any, what: str) -> None:
        with self._state_lock:
            if not self._running:
                raise RuntimeError(f"{_CLASS}.{what}: the controller is closed; call start() first")
            target.put(operation)

    def _next_id(self, operation_id: Optional[Union[int, str]]) -> Union[int, str]:
        if operation_id is None:
            return next(self._operation_ids)
        if isinstance(operation_id, bool) or not isinstance(operation_id, (int, str)):
            raise _violation("operation_id", "must be an int or str", operation_id, "CTL-6")
        return operation_id

    def _check_prefix(self, field: str, prefix_keys: Optional[Sequence[str]]) -> Optional[PrefixKeys]:
        """Return the caller's prefix as an immutable sequence (None stays None)."""
        if prefix_keys is None:
            return None
        validate_page_keys(prefix_keys, field=f"{_CLASS}.{field}")
        return prefix_keys if isinstance(prefix_keys, PrefixKeys) else PrefixKeys(tuple(prefix_keys))

    def _key_chain(
        self, token_ids: Optional[Sequence[int]], keys: Optional[Sequence[str]], prior_key: Optional[str]
    ) -> tuple[str, ...]:
        """Return the operation's key chain, from the anchor's last page key (KEY-3)."""
        if (token_ids is None) == (keys is None):
            raise _violation("prefetch.token_ids", "give exactly one of token_ids and keys", token_ids, "KEY-3")
        if keys is not None:
            validate_page_keys(keys, field=f"{_CLASS}.prefetch.keys")
            return tuple(keys)
        assert token_ids is not None  # exactly one of the two was given
        tokens = tuple(token_ids)
        for index, token in enumerate(tokens):
            if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < 2**32:
                raise _violation(f"prefetch.token_ids[{index}]", "must be an int in [0, 2**32)", token, "KEY-1")
        if prior_key is not None:
            validate_page_keys([prior_key], strict=True, field=f"{_CLASS}.prefetch.prior_key")
        return compute_key_chain(tokens, self.page_size, prior_key)  # KEY-1, KEY-3

    # ================================================================ prefix metadata
    def _operation_extra_info(self, prefix: Optional[PrefixKeys]) -> HiCacheStorageExtraInfo:
        """Return the operation-level extra info: the prefix when the feature is on, else None (PFX-1, PFX-3)."""
        if not self.pass_prefix_keys:
            return HiCacheStorageExtraInfo(prefix_keys=None)  # PFX-3: off everywhere
        return HiCacheStorageExtraInfo(prefix_keys=prefix if prefix is not None else PrefixKeys(()))

    def _extra_info_for_slice(
        self, operation: Union[PrefetchOperation, BackupOperation], start: int
    ) -> HiCacheStorageExtraInfo:
        """Return a new extra info for the call whose first key is ``operation.keys[start]``. Clauses: PFX-2, PFX-4, PFX-5.

        O(batch) per call: the operation's calls move forward slice by slice,
        so the info handed to its previous call is extended by the keys from
        that call's start to ``start`` (one batch), sharing every earlier key.
        A call that starts before the previous one (the IO after the hit
        query) starts again from the operation's own info.
        """
        cursor = getattr(operation, "_slice_info_cursor", None)  # (start, info) of the previous call
        if cursor is not None and cursor[0] <= start:
            origin, info = cursor
        else:
            origin, info = 0, operation.base_info
        info = info.extend(operation.keys[origin:start])
        operation._slice_info_cursor = (start, info)  # one tuple: a reader on another thread sees a whole pair
        return info

    # ================================================================ workers
    def _hit_query_worker(self) -> None:
        while True:
            operation = self._hit_queue.get()
            if operation is _STOP:
                self._io_queue.put(_STOP)
                return
            try:
                self._run_hit_query_stage(operation)
            except Exception as error:  # a failure of ours: revoke, still finish (CTL-6)
                self._record_internal_error("hit query", operation, error)
                self._revoke(operation, f"internal error: {type(error).__name__}: {error}")
            self._io_queue.put(operation)

    def _io_worker(self) -> None:
        while True:
            operation = self._io_queue.get()
            if operation is _STOP:
                return
            self._run_io_stage(operation)

    def _backup_worker(self) -> None:
        while True:
            operation = self._backup_queue.get()
            if operation is _STOP:
                return
            try:
                self._run_backup(operation)
            except Exception as error:
                self._record_internal_error("backup", operation, error)
                operation.error = operation.error or f"internal error: {type(error).__name__}: {error}"
                if operation.completed_tokens is None:
                    operation.completed_tokens = 0
            finally:
                operation._finish()
                self._notify_backup(operation)

    def _record_internal_error(self, stage: str, operation: Any, error: BaseException) -> None:
        self.internal_errors.append(
            f"{stage} of operation {getattr(operation, 'operation_id', '?')!r}: {type(error).__name__}: {error}"
        )

    # ================================================================ prefetch: hit query and agreement
    def _run_hit_query_stage(self, operation: PrefetchOperation) -> None:
        """Query, allocate, agree, cut, and revoke if not worth it (CTL-1, CTL-3, RANK-1, RANK-2)."""
        operation.local_restorable = None
        operation.local_pool_hits = {}
        if self._should_terminate(operation):
            local_hit = 0  # RANK-1: a terminated operation still takes part in the agreement
        elif not self._span_worth_querying(operation):
            local_hit = 0  # CTL-3: declined before any query; every rank declines alike
            operation.declined = True
        else:
            local_hit = self._hit_query(operation)
        operation.local_hit_pages = local_hit
        slots = None
        if is_prefetch_worth_it(local_hit * self.page_size, self.prefetch_threshold):
            slots = self._allocate(operation, local_hit)
            if slots is None:
                local_hit = 0  # CTL-3: host memory short counts as a miss, so every rank revokes
        # Below the threshold nothing is allocated: the agreed hit is at most this one, and is revoked.
        agreed = self._agree_hit(operation, local_hit)  # RANK-1
        operation.hit_pages = agreed
        if slots is not None and agreed < local_hit:  # RANK-2: cut to the agreed count (CTL-12: free the rest)
            self._free_host_slots(operation, self.host_pool, slots[agreed * self.page_size :])
            slots = slots[: agreed * self.page_size]
        operation.host_indices = slots
        if not self._is_worth_prefetching(operation, agreed):  # CTL-3
            if getattr(operation, "declined", False):
                reason = (
                    f"span of {len(operation.keys) * self.page_size} tokens is below the threshold of "
                    f"{max(self.prefetch_threshold, self.page_size)}; declined before any query"
                )
            elif agreed:
                reason = f"agreed hit of {agreed * self.page_size} tokens is below the threshold of {self.prefetch_threshold}"
            else:
                reason = "miss"
            self._revoke(operation, reason)
            return
        # CTL-14: the wait budget follows the requested span, not the hit.
        operation.deadline = compute_deadline(
            operation.submitted_at, len(operation.keys) * self.page_size, self.timeout_settings
        )

    def _hit_query(self, operation: PrefetchOperation) -> int:
        """Return this rank's hit in pages: v2 when there are sidecar pools, else v1. Clauses: CTL-1, BE-21."""
        if self.sidecar_pools:
            return self._hit_query_v2(operation)
        return self._hit_query_v1(operation)

    def _span_worth_querying(self, operation: PrefetchOperation) -> bool:
        """Whether the span reaches max(prefetch_threshold, page_size) tokens; shorter ones get no query. Clause: CTL-3."""
        return is_prefetch_span_long_enough(
            len(operation.keys) * self.page_size, self.prefetch_threshold, self.page_size
        )

    def _hit_query_v1(self, operation: PrefetchOperation) -> int:
        """Query the whole chain in one ``batch_exists``, unsliced, as SGLang 0.5.21+ does. Clause: CTL-1."""
        if not operation.keys:
            return 0
        return self._exists_slice(operation, 0, 0, len(operation.keys))

    def _exists_slice(self, operation: PrefetchOperation, slice_index: int, start: int, end: int) -> int:
        """Return the leading hit of one slice, as the backend confirms it. Clauses: PFX-2, PFX-7, CTL-11."""
        keys = list(operation.keys[start:end])
        outcome = self.caller.call(
            "batch_exists", keys, self._extra_info_for_slice(operation, start), quiescence=operation.quiescence
        )
        return confirmed_exists(outcome.result, len(keys)) if outcome.returned else 0

    def _hit_query_v2(self, operation: PrefetchOperation) -> int:
        """Query KV and every sidecar pool in one ``batch_exists_v2``; return the folded hit. Clauses: BE-21, PFX-7."""
        keys = list(operation.keys)
        if not keys:
            return 0
        outcome = self.caller.call(
            "batch_exists_v2",
            keys,
            self._exists_transfers(operation),
            self._extra_info_for_slice(operation, 0),
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

    def _exists_transfers(self, operation: PrefetchOperation) -> list[PoolTransfer]:
        """The sidecar part of the v2 hit query: ALL_PAGES pools name the chain, TRAILING_PAGES pools N keys (HYB-7)."""
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

    def _allocate(self, operation: PrefetchOperation, pages: int) -> Optional[torch.Tensor]:
        """Allocate host slots for ``pages`` pages; None when host memory is short (CTL-3)."""
        return self.host_pool.alloc(pages)

    def _agree_hit(self, operation: PrefetchOperation, local_hit: int) -> int:
        """Agree on the hit in one MIN all-reduce of a packed vector, exactly once per operation. Clauses: RANK-1, RANK-2, RANK-5, RANK-6.

        The vector holds the hit (or, when any pool is TRAILING_PAGES, one
        restorable flag per prefix length of the span), then every sidecar
        pool's own boundary (-1: no verdict). The agreed boundaries are kept
        in ``operation.agreed_pool_hits``.
        """
        trailing = any(pool.is_trailing for pool in self.sidecar_pools)
        span = len(operation.keys)
        if trailing:
            head = tuple(
                int(flag)
                for flag in compute_restorable_flags(local_hit, getattr(operation, "local_restorable", None), span)
            )  # RANK-6
        else:
            head = (local_hit,)
        local_pools = getattr(operation, "local_pool_hits", {})
        names = [pool.name.value for pool in self.sidecar_pools]
        packed = head + tuple(local_pools.get(name, _NO_POOL_VERDICT) for name in names)
        reduced = all_reduce_min_vector(self._hit_group, packed)  # RANK-5: one collective
        operation.agreed_pool_hits = {
            name: value for name, value in zip(names, reduced[len(head) :]) if value != _NO_POOL_VERDICT
        }
        if not trailing:
            return int(reduced[0])
        flags = tuple(bool(flag) for flag in reduced[: len(head)])
        return agree_restorable_hit_pages((flags,))

    def _is_worth_prefetching(self, operation: PrefetchOperation, agreed_pages: int) -> bool:
        """Whether the agreed hit reaches the threshold. Clause: CTL-3."""
        return is_prefetch_worth_it(agreed_pages * self.page_size, self.prefetch_threshold)

    def _revoke(self, operation: PrefetchOperation, reason: str) -> None:
        """Revoke before IO: free every slot allocated for it (CTL-3, CTL-12)."""
        operation.revoked = True
        operation.revoke_reason = reason
        slots, operation.host_indices = operation.host_indices, None
        if slots is not None and slots.numel():
            self._free_host_slots(operation, self.host_pool, slots)

    # ================================================================ prefetch: IO
    def _run_io_stage(self, operation: PrefetchOperation) -> None:
        """Load KV and sidecars, then always finish with the final ack (CTL-6)."""
        try:
            if not operation.revoked:
                self._load_kv(operation)
                if self.separate_pools and self._kv_completed(operation):
                    self._load_sidecars(operation)  # HYB-2
        except Exception as error:  # a failure of ours: record it, still finish (CTL-6)
            self._record_internal_error("prefetch IO", operation, error)
            operation.error = operation.error or f"internal error: {type(error).__name__}: {error}"
        finally:
            try:
                self._finish_prefetch(operation)
            except Exception as error:
                self._record_internal_error("final ack", operation, error)
                if not operation.done:
                    operation._record(
                        FinalAck(operation_id=operation.operation_id, tokens=operation.loaded_tokens, error=str(error))
                    )
                    operation._finish()

    def _load_kv(self, operation: PrefetchOperation) -> None:
        """Read the agreed keys slice by slice, one progress ack per slice. Clauses: CTL-4, CTL-5, RANK-3, RANK-4."""
        agreed_tokens = 0
        stopped = False
        assert operation.hit_pages is not None  # agreed before any read
        for slice_index, (start, end) in enumerate(plan_batches(operation.hit_pages, self.batch_size)):
            if not stopped and self._should_terminate(operation):  # CTL-9
                stopped = True
                operation.terminated = True
                operation.error = operation.error or "terminated"
            local_tokens = agreed_tokens
            if not stopped:
                loaded = self._read_slice(operation, slice_index, start, end)
                local_tokens = agreed_tokens + loaded * self.page_size
                if self._stops_after(operation, loaded, end - start):  # CTL-4
                    stopped = True
            agreed = self._agree_ack(operation, local_tokens)  # RANK-3
            if agreed < local_tokens:  # RANK-4: another rank stopped; so does this one
                stopped = True
            agreed_tokens = agreed
            operation.loaded_tokens = agreed_tokens
            self._emit_ack(
                operation,
                ProgressAck(operation_id=operation.operation_id, slice_index=slice_index, tokens=agreed_tokens),
            )  # CTL-5

    def _stops_after(self, operation: PrefetchOperation, loaded: int, asked: int) -> bool:
        """Whether a slice that loaded ``loaded`` of ``asked`` pages stops further reads. Clause: CTL-4."""
        return loaded < asked

    def _read_slice(self, operation: PrefetchOperation, slice_index: int, start: int, end: int) -> int:
        """Read one slice of KV and its KV-derived sidecars with one extra info; return the pages loaded. Clauses: HYB-1, PFX-8."""
        keys = list(operation.keys[start:end])
        assert operation.host_indices is not None  # allocated before any read
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        extra_info = self._extra_info_for_slice(operation, start)  # PFX-2: one value for both reads (PFX-8)
        loaded = self._read_kv_slice(operation, keys, slots, extra_info)
        if self.derived_pools and loaded:
            loaded = min(loaded, self._read_derived_slice(operation, keys, slots, extra_info))  # HYB-1
        return loaded

    def _read_kv_slice(
        self, operation: PrefetchOperation, keys: list[str], slots: torch.Tensor, extra_info: HiCacheStorageExtraInfo
    ) -> int:
        """``batch_get_v1`` of one slice; return the leading pages confirmed. Clauses: CTL-11, PFX-7."""
        outcome = self.caller.call("batch_get_v1", keys, slots, extra_info, quiescence=operation.quiescence)
        self._note_failure(operation, outcome)
        return confirmed_pages(outcome.result, len(keys)) if outcome.returned else 0

    def _read_derived_slice(
        self, operation: PrefetchOperation, keys: list[str], slots: torch.Tensor, extra_info: HiCacheStorageExtraInfo
    ) -> int:
        """``batch_get_v2`` of the KV-derived sidecars of one slice; return the minimum confirmed. Clauses: HYB-1, HYB-4, PFX-8."""
        transfers = [
            PoolTransfer(name=pool.name, host_indices=slots, keys=PageKeys(keys), indices_from_pool=PoolName.KV)
            for pool in self.derived_pools
        ]
        outcome = self.caller.call("batch_get_v2", transfers, extra_info, quiescence=operation.quiescence)
        self._note_failure(operation, outcome)
        if not outcome.returned:
            return 0
        return min(confirmed_pool_pages(outcome.result, pool.name, len(keys)) for pool in self.derived_pools)

    def _agree_ack(self, operation: PrefetchOperation, tokens: int) -> int:
        """All-reduce one ack with MIN across ranks. Clause: RANK-3."""
        return self._io_group.all_reduce_min(tokens)

    def _should_terminate(self, operation: PrefetchOperation) -> bool:
        """Whether the policy stops the operation before its next slice. Clauses: CTL-9, CTL-10."""
        return is_terminated(operation.policy, operation.termination_requested, self.clock(), operation.deadline)

    def _kv_completed(self, operation: PrefetchOperation) -> bool:
        """Whether every agreed page loaded, on every rank (the last ack is agreed). Clause: HYB-2."""
        return operation.hit_pages is not None and operation.loaded_tokens == operation.hit_pages * self.page_size

    def _note_failure(self, operation: PrefetchOperation, outcome: CallOutcome) -> None:
        if not outcome.returned and operation.error is None:
            operation.error = outcome.error

    # ================================================================ prefetch: sidecars
    def _sidecar_window(self, pool: SidecarPool, hit_pages: int) -> tuple[int, int]:
        """The pages a pool reads after a hit: all of them, or the trailing window ending at the hit. Clause: HYB-3."""
        if pool.is_trailing:
            return compute_trailing_window(hit_pages, pool.window_pages)
        return 0, hit_pages

    def _load_sidecars(self, operation: PrefetchOperation) -> None:
        """Read the other sidecars once, agree per pool, ack their hits. Clauses: HYB-2, HYB-3, HYB-4, RANK-3."""
        hit_pages = operation.hit_pages
        assert hit_pages is not None  # agreed before any read
        local_hits = self._read_sidecars(operation, hit_pages)
        agreed_hits = {}
        for pool in sorted(self.separate_pools, key=lambda pool: pool.name.value):  # same order on every rank
            agreed_hits[pool.name.value] = self._agree_ack(operation, local_hits.get(pool.name.value, 0))
        for name, hits in agreed_hits.items():
            slots = operation.pool_host_indices.get(name)
            if slots is not None and hits == 0:
                del operation.pool_host_indices[name]
                self._free_host_slots(operation, self._pool(name).host_pool, slots)
        if any(hits == 0 for hits in agreed_hits.values()) and operation.error is None:
            operation.error = "sidecar read failed"
        self._emit_ack(
            operation, PoolHitsAck(operation_id=operation.operation_id, pool_hits=ReadOnlyMapping(agreed_hits))
        )

    def _read_sidecars(self, operation: PrefetchOperation, hit_pages: int) -> dict[str, int]:
        """Read every non-KV-derived pool's window of the hit; all or nothing. Clauses: HYB-3, HYB-4.

        Returns each pool's hit in pages (``hit_pages`` on success, 0 on
        failure); the slots of a successful read are kept in
        ``operation.pool_host_indices``, the others freed.
        """
        transfers = []
        allocated: list[tuple[SidecarPool, torch.Tensor]] = []
        for pool in self.separate_pools:
            start, end = self._sidecar_window(pool, hit_pages)  # HYB-3
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
        success = len(allocated) == len(self.separate_pools) and self._read_sidecar_parts(operation, transfers)
        if not success:
            for pool, slots in allocated:
                self._free_host_slots(operation, pool.host_pool, slots)
            return {pool.name.value: 0 for pool in self.separate_pools}
        for pool, slots in allocated:
            operation.pool_host_indices[pool.name.value] = slots
        return {pool.name.value: hit_pages for pool in self.separate_pools}

    def _read_sidecar_parts(self, operation: PrefetchOperation, transfers: list[PoolTransfer]) -> bool:
        """Read the transfers in one ``batch_get_v2`` per trailing-length group, unsliced. Clauses: CTL-2, HYB-2, HYB-4, PFX-9.

        The span is the agreed hit; each group's extra info carries the
        operation's prefix followed by the span up to its transfers' first key
        (``plan_sidecar_groups``). All or nothing: True only if every call
        returned every pool with every page True; the first call that does
        not stops the read.
        """
        for extra_info, group in self._sidecar_groups(operation, operation.keys[: operation.hit_pages], transfers):
            outcome = self.caller.call("batch_get_v2", group, extra_info, quiescence=operation.quiescence)
            self._note_failure(operation, outcome)
            if not self._sidecar_read_succeeded(outcome, group):  # HYB-4
                return False
        return True

    def _sidecar_groups(
        self, operation: Union[PrefetchOperation, BackupOperation], span: Sequence[str], transfers: list[PoolTransfer]
    ) -> list[tuple[HiCacheStorageExtraInfo, list[PoolTransfer]]]:
        """Group sidecar transfers by the span keys they cover, each with its own extra info. Clauses: PFX-9, PFX-2, PFX-5.

        A transfer covers the span up to its first key: ``len(span)`` minus its
        key count, SGLang's rule for the trailing keys it sends.
        """
        counts = tuple(min(len(_keys_of(transfer)), len(span)) for transfer in transfers)
        groups = plan_sidecar_groups(None if not self.pass_prefix_keys else (), tuple(span), counts)
        planned = []
        for prefix, members in groups:
            covered = 0 if prefix is None else len(prefix)  # prefix = () + span[:covered]
            planned.append((self._extra_info_for_slice(operation, covered), [transfers[i] for i in members]))
        return planned

    def _sidecar_read_succeeded(self, outcome: CallOutcome, transfers: list[PoolTransfer]) -> bool:
        """Whether every pool is present in the result with every page True. Clause: HYB-4."""
        return outcome.returned and all(
            confirmed_pool_pages(outcome.result, transfer.name, len(_keys_of(transfer))) == len(_keys_of(transfer))
            for transfer in transfers
        )

    def _pool(self, name: str) -> SidecarPool:
        return next(pool for pool in self.sidecar_pools if pool.name.value == name)

    # ================================================================ prefetch: the end
    def _finish_prefetch(self, operation: PrefetchOperation) -> None:
        """Free the unloaded slots, agree on the final ack and emit it. Clauses: CTL-6, CTL-12, RANK-3."""
        slots = operation.host_indices
        if slots is not None and operation.loaded_tokens < slots.numel():  # CTL-12: the unloaded tail, once
            self._free_host_slots(operation, self.host_pool, slots[operation.loaded_tokens :])
            operation.host_indices = slots[: operation.loaded_tokens]
        tokens = self._agree_ack(operation, operation.loaded_tokens)
        if operation.revoked and operation.error is None:
            operation.error = f"revoked: {operation.revoke_reason}"
        self._emit_ack(operation, FinalAck(operation_id=operation.operation_id, tokens=tokens, error=operation.error))
        operation._finish()

    def _emit_ack(self, operation: PrefetchOperation, ack: Any) -> None:
        """Record an ack on the operation and hand it to ``on_ack``. Clauses: CTL-5, CTL-6."""
        operation._record(ack)
        if self.on_ack is not None:
            try:
                self.on_ack(operation, ack)
            except Exception as error:  # a callback never kills the IO thread
                self._record_internal_error("on_ack callback", operation, error)

    def _free_host_slots(self, operation: Any, pool: Any, slots: torch.Tensor) -> None:
        """Free host slots once, after any abandoned call that may still write them has returned. Clause: CTL-12."""
        if slots is None or not slots.numel():
            return

        def free() -> None:
            try:
                pool.free(slots)
            except Exception as error:
                self._record_internal_error("host free", operation, error)

        operation.quiescence.run_or_defer(free)

    # ================================================================ backup
    def _run_backup(self, operation: BackupOperation) -> None:
        """Write sidecars, then KV slice by slice; agree on the outcome. Clauses: CTL-7, CTL-8, CTL-13, HYB-5."""
        slices = plan_batches(len(operation.keys), self.batch_size)
        total_tokens = len(operation.keys) * self.page_size
        if not self._writes_kv():
            # CTL-8, CTL-15: a non-writer writes only the rank-sharded sidecars and no KV.
            outcomes: list[bool] = []
            written = self._write_sidecars(operation, outcomes)
            operation.local_completed_tokens = compute_non_writer_backup_tokens(
                tuple(outcomes), len(operation.keys), self.page_size
            )
            offered = total_tokens if written else 0  # the agreed outcome is the writer's, unless ours failed
            operation.completed_tokens = self._agree_backup(operation, offered)
            return
        operation.wrote_kv = True
        slice_ok: list[bool] = []
        if self._write_sidecars(operation):  # HYB-5: sidecars first
            for slice_index, (start, end) in enumerate(slices):
                ok = self._write_slice(operation, slice_index, start, end)
                slice_ok.append(ok)
                if not ok:  # CTL-7: stop at the first failed slice
                    break
        local = (
            compute_backup_progress(tuple(end - start for start, end in slices), tuple(slice_ok), self.page_size)
            if slice_ok
            else 0
        )
        operation.local_completed_tokens = local
        operation.completed_tokens = self._agree_backup(operation, local)

    def _writes_kv(self) -> bool:
        """Whether this rank is the storage writer: every rank, or tp_rank == dcp_rank when KV is replicated. Clause: CTL-8."""
        return is_storage_writer(self.is_replicated_kv, self.tp_rank, self.dcp_rank)

    def _writes_sidecar(self, transfer: PoolTransfer) -> bool:
        """Whether this rank writes a sidecar: the writer all, other ranks the rank-sharded ones (MAMBA). Clause: CTL-8."""
        return writes_pool(transfer.name.value, self._writes_kv())

    def _write_slice(self, operation: BackupOperation, slice_index: int, start: int, end: int) -> bool:
        """``batch_set_v1`` of one slice; True only if every page succeeded. Clauses: CTL-7, CTL-11, PFX-2, PFX-7."""
        keys = list(operation.keys[start:end])
        slots = operation.host_indices[start * self.page_size : end * self.page_size]
        outcome = self.caller.call(
            "batch_set_v1", keys, slots, self._extra_info_for_slice(operation, start), quiescence=operation.quiescence
        )
        if not outcome.returned:
            operation.error = operation.error or outcome.error
            return False
        return confirmed_pages(outcome.result, len(keys)) == len(keys)

    def _backup_sidecar_transfers(self, operation: BackupOperation) -> list[PoolTransfer]:
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

    def _write_sidecars(self, operation: BackupOperation, outcomes: Optional[list] = None) -> bool:
        """Write this rank's sidecars before KV, one ``batch_set_v2`` per trailing-length group over the whole span. Clauses: HYB-5, HYB-4, PFX-9, CTL-2, CTL-8.

        All or nothing: True only if every pool is present with every page
        True. ``outcomes`` receives, per transfer written, whether it fully
        succeeded (CTL-15).
        """
        transfers = [
            transfer for transfer in self._backup_sidecar_transfers(operation) if self._writes_sidecar(transfer)
        ]
        if not transfers:
            return True
        for extra_info, group in self._sidecar_groups(operation, operation.keys, transfers):
            outcome = self.caller.call("batch_set_v2", group, extra_info, quiescence=operation.quiescence)
            if not outcome.returned:
                operation.error = operation.error or outcome.error
                if outcomes is not None:
                    outcomes.extend(False for _ in group)
                return False
            oks = [
                confirmed_pool_pages(outcome.result, transfer.name, len(_keys_of(transfer))) == len(_keys_of(transfer))
                for transfer in group
            ]  # HYB-4
            if outcomes is not None:
                outcomes.extend(oks)
            if not all(oks):
                operation.error = operation.error or "sidecar write failed"
                return False
        return True

    def _agree_backup(self, operation: BackupOperation, local_tokens: int) -> int:
        """All-reduce the backup outcome with MIN, so every rank acks the same. Clauses: CTL-8, RANK-3."""
        return self._backup_group.all_reduce_min(local_tokens)

    def _notify_backup(self, operation: BackupOperation) -> None:
        if self.on_backup_done is not None:
            try:
                self.on_backup_done(operation)
            except Exception as error:
                self._record_internal_error("on_backup_done callback", operation, error)
