"""hicache_contracts.engine: check an engine's controller against the engine-side clauses.

Wrap the storage backend the controller uses, run an operation, check what it did::

    from hicache_contracts.engine import RecordingBackend, check_trace

    rec = RecordingBackend(inner)            # any backend object: legacy, v1 or v2
    controller = MyController(storage_backend=rec)
    ...                                      # run one prefetch or backup
    report = check_trace(rec.calls, chain=page_keys, prefix_keys=operation.prefix_keys)
    assert report.ok, report.format_table()

A controller of any design runs the standard scenarios through a small
adapter (``ScenarioEngine``; ``check_engine``, ``run_engine_scenario``,
``STANDARD_SCENARIOS``, from ``hicache_contracts.engine.scenarios`` or here).
Traces can also be written as JSON (``rec.to_trace(...)``, ``TraceDocument``)
by engines in any language and checked with ``hicache-conform trace FILE.json``.
See docs/engines.md for the format and every rule with its clause.
"""

from hicache_contracts.engine._assertions import assert_trace_conforms, format_failure
from hicache_contracts.engine._checker import check_acks, check_operation, check_trace
from hicache_contracts.engine._recorder import RecordedCall, RecordedTransfer, RecordingBackend, snapshot_prefix
from hicache_contracts.engine._report import TraceReport, TraceViolation
from hicache_contracts.engine._trace import (
    TRACE_FORMAT,
    TraceCall,
    TraceDocument,
    TraceOperation,
    TraceTransfer,
    load_trace,
)
from hicache_contracts.engine.scenarios import (
    HYBRID_POOLS,
    STANDARD_SCENARIOS,
    EngineRaised,
    EngineScenario,
    EngineSetup,
    HandedList,
    PoolSpec,
    ScenarioBackend,
    ScenarioEngine,
    ScenarioRun,
    check_engine,
    run_engine_scenario,
)

__all__ = [
    "HYBRID_POOLS",
    "STANDARD_SCENARIOS",
    "TRACE_FORMAT",
    "EngineRaised",
    "EngineScenario",
    "EngineSetup",
    "HandedList",
    "PoolSpec",
    "RecordedCall",
    "RecordedTransfer",
    "RecordingBackend",
    "ScenarioBackend",
    "ScenarioEngine",
    "ScenarioRun",
    "TraceCall",
    "TraceDocument",
    "TraceOperation",
    "TraceReport",
    "TraceTransfer",
    "TraceViolation",
    "assert_trace_conforms",
    "check_acks",
    "check_engine",
    "check_operation",
    "check_trace",
    "format_failure",
    "load_trace",
    "run_engine_scenario",
    "snapshot_prefix",
]
