"""The reference controller through the engine scenarios, every trace checked, clause by clause.

``check_reference_controller()`` runs ``CacheController`` over
``REFERENCE_SCENARIOS`` (``hicache_contracts.engine._reference``), each on
an in-memory reference backend with scripted faults behind a
``RecordingBackend``, checks every trace and ack schedule with
``check_trace`` and returns one ``ClauseResult`` per clause exercised. Pass
a subclass of ``CacheController`` as ``controller_class`` to check an
engine controller built on the reference one the same way.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Optional, Sequence

import torch

from hicache_contracts import HiCacheStorageConfig, PageKeys, PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.engine._recorder import RecordingBackend
from hicache_contracts.engine._reference import (
    PAGE_SIZE,
    REFERENCE_SCENARIOS,
    SWA_WINDOW,
    ClauseResult,
    RunOutcome,
    Scenario,
    clause_results,
)
from hicache_contracts.host_pool import HostPagePool
from hicache_reference.backends import MemoryBackend, MemoryStore
from hicache_reference.controller import CacheController, SidecarPool
from hicache_reference.settings import ControllerSettings

__all__ = ["check_reference_controller", "run_backup", "run_prefetch", "run_scenario", "scripted_backend_class"]


def _host_pool(pages: int = 800) -> HostPagePool:
    return HostPagePool(pages, PAGE_SIZE, 2, 1, 4, kind="mha", pin_memory=False)


def _sidecar_pools(hybrid: bool) -> tuple:
    if not hybrid:
        return ()
    return (
        SidecarPool(PoolName.INDEXER, _host_pool(), kv_derived=True),
        SidecarPool(PoolName.SWA, _host_pool(), hit_policy=PoolHitPolicy.TRAILING_PAGES, window_pages=SWA_WINDOW),
    )


def _swa_transfers(pools: tuple, keys: Sequence[str]) -> list:
    if not pools:
        return []
    window = PageKeys(tuple(keys[-SWA_WINDOW:]))
    return [
        PoolTransfer(
            name=PoolName.SWA,
            keys=window,
            host_indices=pools[1].host_pool.alloc(len(window)),
            hit_policy=PoolHitPolicy.TRAILING_PAGES,
        )
    ]


@functools.lru_cache(maxsize=1)
def scripted_backend_class() -> type:
    """Return the in-memory reference backend with test faults (a class built once, on first use)."""

    class ScriptedBackend(MemoryBackend):
        """The memory backend, with faults: unreadable keys, a raising read, a gate before the hit query, a read hook."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.unreadable: frozenset = frozenset()
            self.raise_on_read: Optional[int] = None
            self.gate: Optional[threading.Event] = None
            self.after_read: Any = None
            self.reads = 0

        def batch_exists(self, keys, extra_info=None):
            if self.gate is not None:
                self.gate.wait(10)
            return super().batch_exists(keys, extra_info)

        def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
            if self.gate is not None:
                self.gate.wait(10)
            return super().batch_exists_v2(keys, pool_transfers, extra_info)

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            number, self.reads = self.reads, self.reads + 1
            if number == self.raise_on_read:
                raise RuntimeError("storage node unreachable")
            result = super().batch_get_v1(keys, host_indices, extra_info)
            result = [ok and key not in self.unreadable for ok, key in zip(result, keys)]
            if self.after_read is not None:
                self.after_read(number)
            return result

    return ScriptedBackend


def _filled_store(scenario: Scenario) -> MemoryStore:
    """Return a memory store holding the scenario's stored pages (and sidecars), written by the reference."""
    store = MemoryStore()
    stored = scenario.pages if scenario.stored is None else scenario.stored
    if not stored:
        return store
    keys = scenario.chain[:stored]
    pool = _host_pool()
    generator = torch.Generator().manual_seed(7)
    pool.kv_buffer.copy_(torch.randn(pool.kv_buffer.shape, generator=generator).to(pool.dtype))
    config = HiCacheStorageConfig.single_rank()
    pools = _sidecar_pools(scenario.hybrid)
    with CacheController(
        MemoryBackend(config, {"store": store}), pool, storage_config=config, sidecar_pools=pools
    ) as controller:
        slots = pool.alloc(stored)
        if slots is None:
            raise RuntimeError(f"could not fill the store for {scenario}: no host memory for {stored} pages")
        backup = controller.backup(keys, slots, sidecar_transfers=_swa_transfers(pools, keys))
        if not backup.wait(10) or backup.completed_tokens != stored * PAGE_SIZE:
            raise RuntimeError(f"could not fill the store for {scenario}: {backup!r}")
    return store


def run_prefetch(scenario: Scenario, controller_class: Optional[type] = None, **controller_options: Any) -> RunOutcome:
    """Fill a store, then prefetch the scenario's chain through a RecordingBackend."""
    config = HiCacheStorageConfig.single_rank()
    inner = scripted_backend_class()(config, {"store": _filled_store(scenario)})
    if scenario.unreadable_from is not None:
        inner.unreadable = frozenset(scenario.chain[scenario.unreadable_from :])
    inner.raise_on_read = scenario.raise_on_read
    recorder = RecordingBackend(inner)
    holder: dict[str, Any] = {}
    terminated_before = None
    if scenario.terminate_after_read is not None:
        inner.gate = threading.Event()  # hold the hit query until the test holds the operation
        target = scenario.terminate_after_read
        inner.after_read = lambda number: holder["operation"].terminate() if number == target else None
        terminated_before = target + 1
    options = dict(
        storage_config=config,
        sidecar_pools=_sidecar_pools(scenario.hybrid),
        settings=ControllerSettings(pass_prefix_keys=scenario.prefix_keys is not None, prefetch_threshold=0),
    )
    options.update(controller_options)
    with (controller_class or CacheController)(recorder, _host_pool(), **options) as controller:
        operation = controller.prefetch(keys=scenario.chain, prefix_keys=scenario.prefix_keys)
        holder["operation"] = operation
        if inner.gate is not None:
            inner.gate.set()
        operation.wait(10)
    return RunOutcome(recorder, operation, scenario, terminated_before)


def run_backup(scenario: Scenario, controller_class: Optional[type] = None, **controller_options: Any) -> RunOutcome:
    """Back the scenario's chain up through a RecordingBackend."""
    config = HiCacheStorageConfig.single_rank()
    recorder = RecordingBackend(scripted_backend_class()(config, {"store": MemoryStore()}))
    pool = _host_pool()
    pools = _sidecar_pools(scenario.hybrid)
    options = dict(
        storage_config=config,
        sidecar_pools=pools,
        settings=ControllerSettings(pass_prefix_keys=scenario.prefix_keys is not None),
    )
    options.update(controller_options)
    with (controller_class or CacheController)(recorder, pool, **options) as controller:
        operation = controller.backup(
            scenario.chain,
            pool.alloc(scenario.pages),
            prefix_keys=scenario.prefix_keys,
            sidecar_transfers=_swa_transfers(pools, scenario.chain),
        )
        operation.wait(10)
    return RunOutcome(recorder, operation, scenario)


def run_scenario(scenario: Scenario, controller_class: Optional[type] = None) -> RunOutcome:
    """Run one scenario (a prefetch or a backup)."""
    runner = run_prefetch if scenario.kind == "prefetch" else run_backup
    return runner(scenario, controller_class)


def check_reference_controller(
    controller_class: Optional[type] = None, *, scenarios: Optional[Sequence[Scenario]] = None
) -> list[ClauseResult]:
    """Run the reference controller (or ``controller_class``) over every scenario; return one result per clause.

    Each ``ClauseResult(clause_id, passed, detail)`` covers a clause that at
    least one of ``REFERENCE_SCENARIOS`` (or ``scenarios``) exercised, in
    registry order (see ``clause_results``).
    """
    chosen = REFERENCE_SCENARIOS if scenarios is None else scenarios
    return clause_results((scenario, run_scenario(scenario, controller_class).check()) for scenario in chosen)
