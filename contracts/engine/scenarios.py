"""Standard scenarios for any engine's controller: a small adapter, a scripted store, every trace checked.

An engine whose controller is not a ``CacheController`` subclass implements
``ScenarioEngine`` — build your controller on a backend, submit a prefetch
or a backup, wait, read its acks — and ``check_engine`` runs it through the
standard scenarios (``STANDARD_SCENARIOS``): prefetch and backup with prefix
None / ``[]`` / a list, 1 to 5 slices, a partial hit, a short slice, a
raising read, a read that hangs while the operation is terminated,
termination, and hybrid pools (a KV-derived indexer and a trailing-window
SWA pool) for engines that say they support them. Each scenario runs on a
fresh ``ScenarioBackend`` (an in-memory store with scripted faults) behind a
``RecordingBackend``, and its trace and acks are checked with
``check_trace``::

    from hicache_contracts.engine.scenarios import check_engine

    for verdict in check_engine(MyEngineAdapter):
        print(verdict.clause_id, verdict.status, *verdict.failures)

Nothing here imports ``hicache_reference``.
"""

from __future__ import annotations

import os
import threading
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, Sequence, runtime_checkable

from hicache_spec import ALL_PAGES, KV, TRAILING_PAGES, fold_pool_hits
from hicache_contracts.engine._checker import check_trace
from hicache_contracts.engine._handed_lists import HandedList
from hicache_contracts.engine._recorder import RecordingBackend
from hicache_contracts.engine._scenario import (
    PAGE_SIZE,
    STANDARD_SCENARIOS,
    SWA_WINDOW,
    EngineScenario,
    clause_results,
)
from hicache_contracts.engine._report import TraceReport, TraceViolation
from hicache_contracts.models import ReadOnlyMapping
from hicache_contracts.models import pool_value as _pool_name
from hicache_contracts.verdicts import ClauseVerdict

__all__ = [
    "HYBRID_POOLS",
    "STANDARD_SCENARIOS",
    "EngineRaised",
    "EngineScenario",
    "EngineSetup",
    "HandedList",
    "PoolSpec",
    "ScenarioBackend",
    "ScenarioEngine",
    "ScenarioRun",
    "check_engine",
    "run_engine_scenario",
]

WAIT_S = 10.0
"""How long a scenario waits for an operation, for the hit-query gate and for a hanging read."""


@dataclass(frozen=True)
class PoolSpec:
    """A sidecar pool the engine must set up beside KV for a hybrid scenario."""

    name: str
    """The pool's name (a ``PoolName`` value): ``indexer``, ``swa``."""
    kv_derived: bool = False
    """Whether it reuses KV's slots and travels with every KV read and write."""
    hit_policy: str = ALL_PAGES
    """``all_pages`` or ``trailing_pages``."""
    window_pages: int = 1
    """N of a ``trailing_pages`` pool: the pages ending at the hit that it needs."""


HYBRID_POOLS: tuple[PoolSpec, ...] = (
    PoolSpec("indexer", kv_derived=True),
    PoolSpec("swa", hit_policy=TRAILING_PAGES, window_pages=SWA_WINDOW),
)
"""The sidecar pools of every hybrid scenario."""


@dataclass(frozen=True)
class EngineSetup:
    """What the engine's controller is built with for one scenario."""

    page_size: int
    """Tokens per page."""
    pools: tuple[PoolSpec, ...] = ()
    """Sidecar pools beside KV; empty for a base scenario."""
    pass_prefix_keys: bool = True
    """Whether the controller hands prefix metadata to the backend (False when the operation's prefix is None)."""


@runtime_checkable
class ScenarioEngine(Protocol):
    """What a scenario needs from an engine; ``check_engine`` builds one per scenario from a factory.

    Set a class attribute ``supports_hybrid = True`` to run the hybrid
    scenarios too, and define ``operation_id(operation)`` (optional) to have
    every ack checked against the operation's own ID. Operations must run on a thread of their own (``prefetch``
    returns before its storage calls finish), so that a scenario can
    terminate one while it reads.
    """

    def start(self, backend: Any, setup: EngineSetup) -> None:
        """Build the controller with ``backend`` as its storage backend (call its register methods as usual)."""

    def prefetch(self, keys: list[str], prefix_keys: Optional[list[str]]) -> Any:
        """Start a prefetch of the page keys ``keys`` (after the prefix ``prefix_keys``); return a handle.

        Both are new lists (``HandedList``), as SGLang hands them over; ``prefix_keys`` is None when the
        feature is off. Changing either in place is PFX-5.
        """

    def backup(self, keys: list[str], prefix_keys: Optional[list[str]], sidecar_keys: Mapping[str, list[str]]) -> Any:
        """Start a backup of ``keys`` (and of ``sidecar_keys[pool]`` for the non-derived pools); return a handle.

        Every key sequence is a new list, as for ``prefetch``; ``sidecar_keys`` is a dict.
        """

    def wait(self, operation: Any, timeout_s: float) -> None:
        """Return once the operation has finished (or after ``timeout_s``)."""

    def acks(self, operation: Any) -> Sequence[Any]:
        """The prefetch's acks in emission order: ProgressAck / PoolHitsAck / FinalAck, or dicts with a ``kind``."""

    def completed_tokens(self, operation: Any) -> int:
        """The tokens a backup reports completed."""

    def prefix_of(self, operation: Any) -> Any:
        """The live prefix object the operation used (PFX-5), or a copy taken when it started."""

    def terminate(self, operation: Any) -> None:
        """Terminate the prefetch: no slice read may start afterwards."""

    def stop(self) -> None:
        """Shut the controller down."""


# ==================================================================== the scripted store
class ScenarioBackend:
    """An in-memory v1/v2 backend with scripted faults, for scenarios; pages hold bytes when a host pool is known.

    ``plant(pool, keys)`` makes pages present without data. Faults: keys in
    ``unreadable`` read as False; the ``raise_on_read``-th ``batch_get_v1``
    raises; the ``hang_on_read``-th blocks until ``release`` is set; ``gate``
    (when set) holds every hit query until it opens; ``after_read(number)``
    runs after each ``batch_get_v1``.
    """

    def __init__(self, storage_config: Any = None, kwargs: Optional[dict[str, Any]] = None) -> None:
        self.pages: dict[tuple[str, str], Optional[bytes]] = {}
        self.pools: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.unreadable: frozenset[str] = frozenset()
        self.raise_on_read: Optional[int] = None
        self.hang_on_read: Optional[int] = None
        self.hanging = threading.Event()
        self.release = threading.Event()
        self.gate: Optional[threading.Event] = None
        self.after_read: Optional[Callable[[int], None]] = None
        self.reads = 0
        self.faults_raised: list[BaseException] = []
        """The exceptions ``raise_on_read`` raised: storage errors, which the engine must handle."""

    # ---------------------------------------------------------------- setup
    def plant(self, pool: str, keys: Sequence[str]) -> None:
        """Make ``keys`` present in ``pool``, without data."""
        with self.lock:
            for key in keys:
                self.pages.setdefault((pool, key), None)

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.pools[KV] = mem_pool_host

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        self.pools[_pool_name(host_pool_name)] = host_pool

    # ---------------------------------------------------------------- pages
    def _has(self, pool: str, key: str) -> bool:
        with self.lock:
            return (pool, key) in self.pages

    def _read(self, pool: str, keys: Sequence[str], host_indices: Any) -> list[bool]:
        results = []
        host_pool = self.pools.get(pool)
        for position, key in enumerate(keys):
            with self.lock:
                present, data = (pool, key) in self.pages, self.pages.get((pool, key))
            if not present or key in self.unreadable:
                results.append(False)
                continue
            if data is not None and host_pool is not None and host_indices is not None:
                import torch

                slot = int(host_indices[position * host_pool.page_size])
                dtype = host_pool.get_dummy_flat_data_page().dtype
                host_pool.set_from_flat_data_page(slot, torch.frombuffer(bytearray(data), dtype=dtype))
            results.append(True)
        return results

    def _write(self, pool: str, keys: Sequence[str], host_indices: Any) -> list[bool]:
        host_pool = self.pools.get(pool)
        for position, key in enumerate(keys):
            data = None
            if host_pool is not None and host_indices is not None:
                import torch

                slot = int(host_indices[position * host_pool.page_size])
                page = host_pool.get_data_page(slot, flat=True)
                data = page.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            with self.lock:
                self.pages[(pool, key)] = data
        return [True] * len(keys)

    # ---------------------------------------------------------------- the interface
    def exists(self, key: str) -> bool:
        return self._has(KV, key)

    def batch_exists(self, keys: list[Any], extra_info: Any = None) -> int:
        if self.gate is not None:
            self.gate.wait(WAIT_S)
        for position, key in enumerate(keys):
            if not self._has(KV, key):
                return position
        return len(keys)

    def batch_get_v1(self, keys: list[Any], host_indices: Any, extra_info: Any = None) -> list[bool]:
        with self.lock:
            number, self.reads = self.reads, self.reads + 1
        if number == self.raise_on_read:
            fault = RuntimeError("storage node unreachable")
            self.faults_raised.append(fault)
            raise fault
        if number == self.hang_on_read:
            self.hanging.set()
            self.release.wait(WAIT_S)
        results = self._read(KV, list(keys), host_indices)
        if self.after_read is not None:
            self.after_read(number)
        return results

    def batch_set_v1(self, keys: list[Any], host_indices: Any, extra_info: Any = None) -> list[bool]:
        return self._write(KV, list(keys), host_indices)

    def batch_exists_v2(self, keys: list[Any], pool_transfers: Any = None, extra_info: Any = None) -> Any:
        from hicache_contracts.models import PoolTransferResult

        if self.gate is not None:
            self.gate.wait(WAIT_S)
        keys = list(keys)
        queries = tuple(
            (
                _pool_name(item.name),
                _pool_name(item.hit_policy),
                len(item.keys or ()),
                tuple(self._has(_pool_name(item.name), key) for key in keys),
            )
            for item in pool_transfers or ()
        )
        hit, entries = fold_pool_hits(tuple(self._has(KV, key) for key in keys), queries)
        return PoolTransferResult(kv_hit_pages=hit, extra_pool_hit_pages=ReadOnlyMapping(entries))

    def batch_get_v2(self, transfers: list[Any], extra_info: Any = None) -> dict[str, list[bool]]:
        return {
            _pool_name(item.name): self._read(_pool_name(item.name), list(item.keys or ()), item.host_indices)
            for item in transfers
        }

    def batch_set_v2(self, transfers: list[Any], extra_info: Any = None) -> dict[str, list[bool]]:
        return {
            _pool_name(item.name): self._write(_pool_name(item.name), list(item.keys or ()), item.host_indices)
            for item in transfers
        }

    def clear(self) -> None:
        with self.lock:
            self.pages.clear()

    def get_stats(self) -> Any:
        return None


# ==================================================================== running a scenario
@dataclass
class ScenarioRun:
    """What one scenario left: the recorder, the engine's operation handle, and the verdict on its trace."""

    scenario: EngineScenario
    recorder: RecordingBackend
    operation: Any
    report: TraceReport

    def check(self) -> TraceReport:
        """The verdict on the scenario's trace and acks (checked once, when it ran)."""
        return self.report


class EngineRaised(RuntimeError):
    """An exception raised inside the engine during a scenario (its ``__cause__``), reported as itself.

    The scenario's clauses are not judged: what the exception kept from
    running would only show as their failures. ``scenario`` is the scenario,
    ``where`` the engine's frame (``file:line in function``) and ``thread``
    the thread it was raised in (None: in the adapter call itself).
    """

    def __init__(self, error: BaseException, scenario: Any, where: str, thread: Optional[str]) -> None:
        self.error, self.scenario, self.where, self.thread = error, scenario, where, thread
        place = f"in thread {thread!r}" if thread is not None else "in the adapter call"
        super().__init__(
            f"the engine raised {type(error).__name__}: {error} at {where} ({place}) during scenario "
            f"'{scenario}'; its clauses were not judged (the traceback above is the engine's)"
        )


_HERE = os.path.dirname(os.path.abspath(__file__))


def _engine_frame(error: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``error`` outside this package's engine suite."""
    frames = traceback.extract_tb(error.__traceback__)
    outside = [frame for frame in frames if not os.path.abspath(frame.filename).startswith(_HERE + os.sep)]
    if not frames:
        return "an unknown place"
    frame = (outside or frames)[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}"


class _ThreadErrors:
    """While active, the exceptions that end threads (``threading.excepthook``), kept instead of printed."""

    def __init__(self) -> None:
        self.errors: list[tuple[BaseException, Optional[str]]] = []
        self._previous: Any = None

    def __enter__(self) -> _ThreadErrors:
        self._previous = threading.excepthook

        def keep(args: Any) -> None:
            if args.exc_value is None or not isinstance(args.exc_value, Exception):
                self._previous(args)  # SystemExit and the like: as before
                return
            self.errors.append((args.exc_value, None if args.thread is None else args.thread.name))

        threading.excepthook = keep
        return self

    def __exit__(self, kind: Optional[type], value: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        threading.excepthook = self._previous


def _call_engine(scenario: EngineScenario, method: Callable[..., Any], *args: Any) -> Any:
    """``method(*args)`` on the engine; an exception it raises becomes ``EngineRaised``."""
    try:
        return method(*args)
    except Exception as error:
        raise EngineRaised(error, scenario, _engine_frame(error), None) from error


def _setup(scenario: EngineScenario) -> EngineSetup:
    return EngineSetup(
        page_size=PAGE_SIZE,
        pools=HYBRID_POOLS if scenario.hybrid else (),
        pass_prefix_keys=scenario.prefix_keys is not None,
    )


def _filled_backend(scenario: EngineScenario) -> ScenarioBackend:
    backend = ScenarioBackend()
    if scenario.kind != "prefetch":
        return backend
    stored = scenario.chain[: scenario.pages if scenario.stored is None else scenario.stored]
    backend.plant(KV, stored)
    if scenario.hybrid:
        backend.plant("indexer", stored)
        backend.plant("swa", stored[-SWA_WINDOW:])
    if scenario.unreadable_from is not None:
        backend.unreadable = frozenset(scenario.chain[scenario.unreadable_from :])
    backend.raise_on_read = scenario.raise_on_read
    backend.hang_on_read = scenario.hang_on_read
    return backend


def _handed_lists(scenario: EngineScenario) -> tuple[HandedList, Optional[HandedList], dict[str, HandedList]]:
    """The keys, prefix and sidecar keys the engine receives: new lists, as SGLang hands them over."""
    call = "prefetch()" if scenario.kind == "prefetch" else "backup()"
    keys = HandedList(scenario.chain, f"the keys list handed to {call}")
    prefix = scenario.prefix_keys
    handed_prefix = None if prefix is None else HandedList(prefix, f"the prefix_keys list handed to {call}")
    sidecars = (
        {"swa": HandedList(scenario.chain[-SWA_WINDOW:], "the sidecar_keys['swa'] list handed to backup()")}
        if scenario.kind == "backup" and scenario.hybrid
        else {}
    )
    return keys, handed_prefix, sidecars


def _with_list_changes(report: TraceReport, handed: Iterable[Optional[HandedList]]) -> TraceReport:
    """``report`` with PFX-5 for each list handed to the engine that it changed in place.

    A list changed in place comes first: it names the line, where the findings
    on calls show its effects. PFX-5 is checked after the trace's clauses.
    """
    lists = [item for item in handed if item is not None]
    violations = tuple(
        TraceViolation(clause="PFX-5", message=message)
        for message in (item.change_message() for item in lists)
        if message is not None
    )
    checked = report.checked + (("PFX-5",) if lists else ())
    return report.model_copy(
        update={"violations": violations + report.violations, "checked": tuple(dict.fromkeys(checked))}
    )


def run_engine_scenario(engine: ScenarioEngine, scenario: EngineScenario) -> ScenarioRun:
    """Run one scenario on ``engine`` (started here, stopped at the end) and check its trace.

    The engine receives new lists (``HandedList``): an in-place change to any
    of them is PFX-5, named with the list and the line that changed it. An
    exception raised inside the engine (in an adapter call or ending one of
    its threads) is raised as ``EngineRaised`` from it, naming the engine's
    frame and the scenario; a storage error the scripted store raised and the
    engine let escape its thread stays a finding of the clauses it broke.
    """
    backend = _filled_backend(scenario)
    recorder = RecordingBackend(backend)
    holder: dict[str, Any] = {}
    terminated_before: Optional[int] = None
    if scenario.terminate_after_read is not None or scenario.hang_on_read is not None:
        backend.gate = threading.Event()  # hold the hit query until the scenario holds the operation
    if scenario.terminate_after_read is not None:
        target = scenario.terminate_after_read
        backend.after_read = lambda number: engine.terminate(holder["operation"]) if number == target else None
        terminated_before = target + 1
    if scenario.hang_on_read is not None:
        terminated_before = scenario.hang_on_read + 1
    keys, prefix, sidecars = _handed_lists(scenario)
    with _ThreadErrors() as thread_errors:
        _call_engine(scenario, engine.start, recorder, _setup(scenario))
        stopped = False
        try:
            if scenario.kind == "prefetch":
                operation = _call_engine(scenario, engine.prefetch, keys, prefix)
                holder["operation"] = operation
                if backend.gate is not None:
                    backend.gate.set()
                if scenario.hang_on_read is not None and backend.hanging.wait(WAIT_S):
                    _call_engine(scenario, engine.terminate, operation)
                    backend.release.set()
            else:
                operation = _call_engine(scenario, engine.backup, keys, prefix, sidecars)
            _call_engine(scenario, engine.wait, operation, WAIT_S)
            backend.release.set()
            stopped = True
            _call_engine(scenario, engine.stop)
        finally:
            backend.release.set()
            if backend.gate is not None:
                backend.gate.set()
            if not stopped:  # an exception is on its way out: it is the one to report
                try:
                    engine.stop()
                except Exception:
                    pass
    for error, thread in thread_errors.errors:
        if not any(error is fault for fault in backend.faults_raised):
            raise EngineRaised(error, scenario, _engine_frame(error), thread) from error
    live_prefix = _call_engine(scenario, engine.prefix_of, operation)
    if isinstance(live_prefix, HandedList) and live_prefix.changed:
        # The list handed over changed in place: its content then is the operation's prefix (the change is
        # reported below, with where it was made).
        live_prefix = live_prefix.original
    arguments: dict[str, Any] = dict(chain=scenario.chain, prefix_keys=live_prefix, page_size=PAGE_SIZE)
    operation_id = getattr(engine, "operation_id", None)
    if operation_id is not None:  # optional: the acks must then all name this operation (CTL-5)
        arguments.update(operation_id=_call_engine(scenario, operation_id, operation))
    if scenario.kind == "prefetch":
        acks = _call_engine(scenario, engine.acks, operation)
        arguments.update(acks=list(acks), terminated_before_slice=terminated_before)
    else:
        completed = _call_engine(scenario, engine.completed_tokens, operation)
        arguments.update(backup_completed_tokens=completed)
    report = _with_list_changes(check_trace(recorder.calls, **arguments), [prefix, keys, *sidecars.values()])
    return ScenarioRun(scenario, recorder, operation, report)


def check_engine(
    engine_factory: Callable[[], ScenarioEngine], *, scenarios: Optional[Sequence[EngineScenario]] = None
) -> list[ClauseVerdict]:
    """Run a fresh engine from ``engine_factory`` through every scenario; return one result per clause exercised.

    Hybrid scenarios run only when the engine's ``supports_hybrid`` is
    true. Each ``ClauseVerdict`` (``hicache_contracts.verdicts``, the verdict
    every suite reports in) covers a clause at least one scenario exercised,
    in registry order: ``pass`` or ``fail``, its ``checks`` the scenarios that
    exercised it, on failure a ``Failure`` per violation naming its scenario.
    """

    def runs() -> Iterable[tuple[EngineScenario, TraceReport]]:
        for scenario in STANDARD_SCENARIOS if scenarios is None else scenarios:
            engine = engine_factory()
            if scenario.hybrid and not getattr(engine, "supports_hybrid", False):
                continue
            yield scenario, run_engine_scenario(engine, scenario).report

    return clause_results(runs())
