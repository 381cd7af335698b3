"""Exercise the reference controller end to end and check its traces, clause by clause.

``check_reference_controller()`` runs the reference ``CacheController``
(``hicache_reference``, imported only when called) over a fixed set of
scenarios — prefetch and backup, prefix None / [] / non-empty, 1 to 3
slices, base and hybrid pools, and the faults that stop IO early (a short
slice, a raising read, termination, a partial hit) — each on an in-memory
reference backend wrapped in a ``RecordingBackend``, and checks every trace
and ack schedule with ``check_trace``. It returns one ``ClauseResult`` per
clause the checker exercised.

Pass a subclass of ``CacheController`` as ``controller_class`` to check an
engine controller built on the reference one the same way.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Sequence

from hicache_spec import clauses, compute_key_chain
from hicache_contracts.engine._checker import check_trace
from hicache_contracts.engine._recorder import RecordingBackend
from hicache_contracts.engine._report import TraceReport

__all__ = [
    "ClauseResult",
    "REFERENCE_SCENARIOS",
    "RunOutcome",
    "Scenario",
    "check_reference_controller",
    "run_backup",
    "run_prefetch",
    "run_scenario",
]

PAGE_SIZE = 2
"""Tokens per page in the scenarios: small, so that 3 slices of 128 pages stay cheap."""
SWA_WINDOW = 4
"""N of the trailing-window sidecar of the hybrid scenarios."""
ANCHOR = compute_key_chain(tuple(range(1000, 1000 + 3 * PAGE_SIZE)), PAGE_SIZE)
"""The keys of three anchor pages: the non-empty prefix of the scenarios (PFX-10)."""
PREFIXES: dict[str, Optional[tuple]] = {"none": None, "empty": (), "anchor": ANCHOR}
"""The three states of an operation's prefix (PFX-1)."""


class ClauseResult(NamedTuple):
    """The verdict on one clause over every scenario: ``(clause_id, passed, detail)``."""

    clause_id: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class Scenario:
    """One operation to run and check."""

    kind: str
    """``"prefetch"`` or ``"backup"``."""
    pages: int
    prefix: str = "anchor"
    """A key of PREFIXES: ``"none"``, ``"empty"`` or ``"anchor"``."""
    hybrid: bool = False
    """With a KV-derived indexer pool and a trailing-window SWA pool."""
    stored: Optional[int] = None
    """Pages present in the store (the chain's leading run); all of them when None."""
    unreadable_from: Optional[int] = None
    """Chain index from which batch_get_v1 reports False although the pages exist (a short slice)."""
    raise_on_read: Optional[int] = None
    """The batch_get_v1 call (from 0) that raises instead of reading."""
    terminate_after_read: Optional[int] = None
    """The batch_get_v1 call during which the prefetch is terminated: no later slice may be read."""

    @property
    def chain(self) -> tuple[str, ...]:
        """The key chain of the operation's pages, after the anchor."""
        return compute_key_chain(tuple(range(self.pages * PAGE_SIZE)), PAGE_SIZE, ANCHOR[-1])

    @property
    def prefix_keys(self) -> Optional[tuple]:
        return PREFIXES[self.prefix]

    def __str__(self) -> str:
        faults = [f"{name}={getattr(self, name)}" for name in
                  ("stored", "unreadable_from", "raise_on_read", "terminate_after_read")
                  if getattr(self, name) is not None]
        return " ".join([self.kind, f"{self.pages} pages", f"prefix {self.prefix}",
                         "hybrid" if self.hybrid else "base", *faults])


def _scenarios() -> tuple[Scenario, ...]:
    found = []
    for hybrid in (False, True):
        for prefix in PREFIXES:
            for pages in (1, 128, 129, 300):  # 1, 1 full, 2 and 3 slices
                found.append(Scenario("prefetch", pages, prefix, hybrid))
            for pages in (1, 129, 300):
                found.append(Scenario("backup", pages, prefix, hybrid))
        found += [
            Scenario("prefetch", 300, "anchor", hybrid, stored=200),
            Scenario("prefetch", 300, "empty", hybrid, unreadable_from=150),
            Scenario("prefetch", 300, "anchor", hybrid, raise_on_read=1),
            Scenario("prefetch", 300, "empty", hybrid, terminate_after_read=0),
        ]
    return tuple(found)


REFERENCE_SCENARIOS: tuple[Scenario, ...] = _scenarios()
"""Every scenario ``check_reference_controller`` runs (50 operations)."""


@dataclass
class RunOutcome:
    """What one run left: the recorder and the operation, and how to check them."""

    recorder: RecordingBackend
    operation: Any
    scenario: Scenario
    terminated_before_slice: Optional[int] = None
    extra: dict = field(default_factory=dict)

    def check(self, **options: Any) -> TraceReport:
        """Check the recorded trace (and, for a prefetch, its acks) of this run."""
        operation = self.operation
        arguments: dict[str, Any] = dict(chain=self.scenario.chain, prefix_keys=operation.base_info.prefix_keys,
                                         page_size=PAGE_SIZE, operation_id=operation.operation_id)
        if self.scenario.kind == "prefetch":
            arguments.update(acks=operation.acks, terminated_before_slice=self.terminated_before_slice)
        else:
            arguments.update(backup_completed_tokens=operation.completed_tokens)
        arguments.update(options)
        return check_trace(self.recorder.calls, **arguments)


# ==================================================================== the reference side (imported lazily)
def _host_pool(pages: int = 800) -> Any:
    from hicache_contracts.host_pool import HostPagePool

    return HostPagePool(pages, PAGE_SIZE, 2, 1, 4, kind="mha", pin_memory=False)


def _sidecar_pools(hybrid: bool) -> tuple:
    if not hybrid:
        return ()
    from hicache_reference import SidecarPool

    return (
        SidecarPool("indexer", _host_pool(), kv_derived=True),
        SidecarPool("swa", _host_pool(), hit_policy="trailing_pages", window_pages=SWA_WINDOW),
    )


def _swa_transfers(pools: tuple, keys: Sequence[str]) -> list:
    if not pools:
        return []
    from hicache_contracts import PoolTransfer

    window = tuple(keys[-SWA_WINDOW:])
    return [PoolTransfer(name="swa", keys=window, host_indices=pools[1].host_pool.alloc(len(window)),
                         hit_policy="trailing_pages")]


@functools.lru_cache(maxsize=1)
def scripted_backend_class() -> type:
    """Return the in-memory reference backend with test faults (a class built once, on first use)."""
    from hicache_reference.backends import MemoryBackend

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


def _filled_store(scenario: Scenario) -> Any:
    """Return a memory store holding the scenario's stored pages (and sidecars), written by the reference."""
    import torch

    from hicache_contracts import HiCacheStorageConfig
    from hicache_reference import CacheController
    from hicache_reference.backends import MemoryBackend, MemoryStore

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
    with CacheController(MemoryBackend(config, {"store": store}), pool, storage_config=config,
                         sidecar_pools=pools) as controller:
        backup = controller.backup(keys, pool.alloc(stored), sidecar_transfers=_swa_transfers(pools, keys))
        if not backup.wait(10) or backup.completed_tokens != stored * PAGE_SIZE:
            raise RuntimeError(f"could not fill the store for {scenario}: {backup!r}")
    return store


def _controller_class(controller_class: Optional[type]) -> type:
    if controller_class is not None:
        return controller_class
    from hicache_reference import CacheController

    return CacheController


def run_prefetch(scenario: Scenario, controller_class: Optional[type] = None, **controller_options: Any) -> RunOutcome:
    """Fill a store, then prefetch the scenario's chain through a RecordingBackend."""
    from hicache_contracts import HiCacheStorageConfig

    config = HiCacheStorageConfig.single_rank()
    inner = scripted_backend_class()(config, {"store": _filled_store(scenario)})
    if scenario.unreadable_from is not None:
        inner.unreadable = frozenset(scenario.chain[scenario.unreadable_from:])
    inner.raise_on_read = scenario.raise_on_read
    recorder = RecordingBackend(inner)
    holder: dict[str, Any] = {}
    terminated_before = None
    if scenario.terminate_after_read is not None:
        inner.gate = threading.Event()  # hold the hit query until the test holds the operation
        target = scenario.terminate_after_read
        inner.after_read = lambda number: holder["operation"].terminate() if number == target else None
        terminated_before = target + 1
    options = dict(storage_config=config, sidecar_pools=_sidecar_pools(scenario.hybrid),
                   pass_prefix_keys=scenario.prefix_keys is not None, prefetch_threshold=0)
    options.update(controller_options)
    with _controller_class(controller_class)(recorder, _host_pool(), **options) as controller:
        operation = controller.prefetch(keys=scenario.chain, prefix_keys=scenario.prefix_keys)
        holder["operation"] = operation
        if inner.gate is not None:
            inner.gate.set()
        operation.wait(10)
    return RunOutcome(recorder, operation, scenario, terminated_before)


def run_backup(scenario: Scenario, controller_class: Optional[type] = None, **controller_options: Any) -> RunOutcome:
    """Back the scenario's chain up through a RecordingBackend."""
    from hicache_contracts import HiCacheStorageConfig
    from hicache_reference.backends import MemoryStore

    config = HiCacheStorageConfig.single_rank()
    recorder = RecordingBackend(scripted_backend_class()(config, {"store": MemoryStore()}))
    pool = _host_pool()
    pools = _sidecar_pools(scenario.hybrid)
    options = dict(storage_config=config, sidecar_pools=pools, pass_prefix_keys=scenario.prefix_keys is not None)
    options.update(controller_options)
    with _controller_class(controller_class)(recorder, pool, **options) as controller:
        operation = controller.backup(scenario.chain, pool.alloc(scenario.pages), prefix_keys=scenario.prefix_keys,
                                      sidecar_transfers=_swa_transfers(pools, scenario.chain))
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

    This exercises ``hicache_reference.CacheController`` end to end: it
    imports the reference package when called (the contracts package never
    imports it otherwise), runs each of ``REFERENCE_SCENARIOS`` (or
    ``scenarios``) on an in-memory reference backend wrapped in a
    ``RecordingBackend``, and checks each trace with ``check_trace``.

    Each ``ClauseResult(clause_id, passed, detail)`` covers a clause that at
    least one scenario exercised, in registry order: ``passed`` is False when
    any scenario broke it, and ``detail`` names how many scenarios checked it
    and, on failure, the first violation and its scenario.
    """
    checked: dict[str, int] = {}
    failures: dict[str, list[str]] = {}
    for scenario in REFERENCE_SCENARIOS if scenarios is None else scenarios:
        report = run_scenario(scenario, controller_class).check()
        for clause_id in report.checked:
            checked[clause_id] = checked.get(clause_id, 0) + 1
        for violation in report.violations:
            checked.setdefault(clause_id := violation.clause, 0)
            failures.setdefault(clause_id, []).append(f"{scenario}: {violation}")
    results = []
    for registered in clauses():
        if registered.id not in checked:
            continue
        found = failures.get(registered.id, [])
        count = checked[registered.id]
        if found:
            detail = f"{len(found)} violation(s); first: {found[0]}"
        else:
            detail = f"checked in {count} scenario(s), no violation"
        results.append(ClauseResult(registered.id, not found, detail))
    return results
