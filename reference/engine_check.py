"""The reference controller through the engine scenarios, every trace checked, clause by clause.

``ReferenceEngine`` is the scenario adapter (``ScenarioEngine``) of
``CacheController``: the engine suite's one runner
(``hicache_contracts.engine.scenarios``) drives it as it drives any
engine's controller. ``check_reference_controller()`` runs it over
``STANDARD_SCENARIOS`` and returns one ``ClauseVerdict`` per clause
exercised; ``run_scenario`` runs one scenario and returns the run (recorder,
operation, report). Pass a subclass of ``CacheController`` as
``controller_class`` to check an engine controller built on the reference
one the same way.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from hicache_contracts import HiCacheStorageConfig, PageKeys, PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.engine.scenarios import (
    STANDARD_SCENARIOS,
    EngineScenario,
    EngineSetup,
    ScenarioRun,
    check_engine,
    run_engine_scenario,
)
from hicache_contracts.host_pool import HostPagePool
from hicache_contracts.models import pool_value
from hicache_contracts.verdicts import ClauseVerdict
from hicache_reference.controller import CacheController, SidecarPool
from hicache_reference.settings import ControllerSettings

__all__ = ["ReferenceEngine", "check_reference_controller", "run_scenario"]


def _host_pool(page_size: int, pages: int = 800) -> HostPagePool:
    return HostPagePool(pages, page_size, 2, 1, 4, kind="mha", pin_memory=False)


class ReferenceEngine:
    """``CacheController`` (or ``controller_class``, a subclass) behind the scenario adapter."""

    supports_hybrid = True

    def __init__(self, controller_class: Optional[type] = None) -> None:
        self.controller_class = controller_class or CacheController

    def start(self, backend: Any, setup: EngineSetup) -> None:
        self.pool = _host_pool(setup.page_size)
        self.sidecars = {
            spec.name: SidecarPool(
                PoolName(spec.name),
                _host_pool(setup.page_size),
                kv_derived=spec.kv_derived,
                hit_policy=PoolHitPolicy(spec.hit_policy),
                window_pages=spec.window_pages,
            )
            for spec in setup.pools
        }
        self.controller = self.controller_class(
            backend,
            self.pool,
            storage_config=HiCacheStorageConfig.single_rank(),
            sidecar_pools=tuple(self.sidecars.values()),
            settings=ControllerSettings(pass_prefix_keys=setup.pass_prefix_keys, prefetch_threshold=0),
        )

    def prefetch(self, keys: list[str], prefix_keys: Optional[list[str]]) -> Any:
        return self.controller.prefetch(keys=keys, prefix_keys=prefix_keys)

    def backup(self, keys: list[str], prefix_keys: Optional[list[str]], sidecar_keys: Any) -> Any:
        transfers = []
        for name, pool_keys in sidecar_keys.items():
            sidecar = self.sidecars[pool_value(name)]
            transfers.append(
                PoolTransfer(
                    name=name,
                    keys=PageKeys(tuple(pool_keys)),
                    host_indices=sidecar.host_pool.alloc(len(pool_keys)),
                    hit_policy=sidecar.hit_policy,
                )
            )
        return self.controller.backup(
            keys, self.pool.alloc(len(keys)), prefix_keys=prefix_keys, sidecar_transfers=transfers
        )

    def wait(self, operation: Any, timeout_s: float) -> None:
        operation.wait(timeout_s)

    def acks(self, operation: Any) -> Any:
        return operation.acks

    def completed_tokens(self, operation: Any) -> int:
        return operation.completed_tokens

    def prefix_of(self, operation: Any) -> Any:
        return operation.base_info.prefix_keys

    def operation_id(self, operation: Any) -> Any:
        return operation.operation_id

    def terminate(self, operation: Any) -> None:
        operation.terminate()

    def stop(self) -> None:
        self.controller.close()


def run_scenario(scenario: EngineScenario, controller_class: Optional[type] = None) -> ScenarioRun:
    """Run one scenario (a prefetch or a backup) on the reference controller (or ``controller_class``)."""
    return run_engine_scenario(ReferenceEngine(controller_class), scenario)


def check_reference_controller(
    controller_class: Optional[type] = None, *, scenarios: Optional[Sequence[EngineScenario]] = None
) -> list[ClauseVerdict]:
    """Run the reference controller (or ``controller_class``) over every scenario; return one result per clause.

    Each ``ClauseVerdict`` covers a clause that at least one of ``STANDARD_SCENARIOS`` (or ``scenarios``) exercised, in
    registry order (see ``check_engine``).
    """
    return check_engine(
        lambda: ReferenceEngine(controller_class),
        scenarios=STANDARD_SCENARIOS if scenarios is None else scenarios,
    )
