"""The standard scenarios for any engine: the reference controller and the guide's small controller run them.

Scenario: ``check_engine`` drives an engine adapter (``ScenarioEngine``)
through ``STANDARD_SCENARIOS``: the reference ``CacheController`` behind an
adapter, the small controller of docs/engines.md (not a ``CacheController``
subclass), and planted controllers that break one rule each.
Expected: both controllers pass every clause exercised; each planted bug is
caught on its clause; the scripted store's faults happen as scripted.
Why it matters: an engine developer gets the reference's scenarios without
building on the reference.
"""

from __future__ import annotations


import re
from pathlib import Path
from typing import Any

import pytest

from hicache_contracts.engine.scenarios import (
    STANDARD_SCENARIOS,
    EngineScenario,
    ScenarioBackend,
    ScenarioEngine,
    check_engine,
    run_engine_scenario,
)
from hicache_contracts.host_pool import HostPagePool
from hicache_contracts.verdicts import PASS
from hicache_reference.engine_check import ReferenceEngine

DOCS = Path(__file__).resolve().parents[2] / "docs"


def host_pool(page_size: int, pages: int = 800) -> HostPagePool:
    return HostPagePool(pages, page_size, 2, 1, 4, kind="mha", pin_memory=False)


def guide_controller() -> dict:
    """The names the small-controller block of docs/engines.md defines, run as written."""
    (block,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", (DOCS / "engines.md").read_text(), re.S)
        if block.startswith("# A small controller")
    ]
    names: dict = {}
    exec(compile(block, "docs/engines.md: a small controller", "exec"), names)
    return names


def failed(verdicts) -> dict:
    """Each failed clause, with its failures as ``scenario: violation`` lines."""
    return {
        verdict.clause_id: "\n".join(f"{item.check}: {item.message}" for item in verdict.failures)
        for verdict in verdicts
        if verdict.status != PASS
    }


@pytest.mark.clause(
    "PFX-2",
    "PFX-3",
    "PFX-4",
    "PFX-5",
    "PFX-7",
    "PFX-8",
    "PFX-9",
    "CTL-1",
    "CTL-2",
    "CTL-4",
    "CTL-5",
    "CTL-6",
    "CTL-7",
    "HYB-1",
    "HYB-2",
    "HYB-3",
    "HYB-5",
)
def test_the_reference_controller_passes_every_standard_scenario() -> None:
    results = check_engine(ReferenceEngine)
    assert failed(results) == {}
    assert {"PFX-2", "PFX-4", "PFX-9", "CTL-1", "CTL-4", "CTL-5", "CTL-6", "CTL-7", "HYB-2", "HYB-3"} <= {
        result.clause_id for result in results
    }


@pytest.mark.clause("PFX-2", "PFX-3", "PFX-4", "PFX-7", "CTL-1", "CTL-4", "CTL-5", "CTL-6", "CTL-7")
def test_the_small_controller_of_the_engine_guide_passes_the_base_scenarios() -> None:
    names = guide_controller()
    assert not issubclass(names["SmallController"], __import__("hicache_reference").CacheController)
    assert isinstance(names["SmallEngine"](), ScenarioEngine)
    results = check_engine(names["SmallEngine"])
    assert failed(results) == {}
    assert {"PFX-2", "PFX-4", "CTL-1", "CTL-4", "CTL-5", "CTL-6", "CTL-7"} <= {result.clause_id for result in results}


def planted(method: str, replacement):
    """The guide's small engine with one method of its controller replaced."""
    names = guide_controller()
    controller_class = type("Planted", (names["SmallController"],), {method: replacement})

    engine_class: Any = names["SmallEngine"]

    class PlantedEngine(engine_class):
        controller_class_used = controller_class

    return PlantedEngine


def reads_past_a_short_slice(self, operation):
    """Planted: the prefetch goes on reading after a slice came back short (CTL-4)."""
    loaded = 0
    for offset in range(0, operation.agreed, self.batch_size):
        keys = operation.keys[offset : offset + self.batch_size]
        try:
            results = self.backend.batch_get_v1(list(keys), self.slots(len(keys)), self.info(operation, offset))
        except RuntimeError:
            results = []
        loaded += sum(bool(flag) for flag in results)
        self.ack_progress(operation, offset // self.batch_size, loaded)
    return loaded


def prefix_never_grows(self, operation, offset):
    """Planted: every call gets the operation's prefix, not the prefix followed by the pages before it (PFX-2)."""
    from hicache_contracts import HiCacheStorageExtraInfo

    return HiCacheStorageExtraInfo(prefix_keys=operation.prefix)


@pytest.mark.clause("CTL-4", "PFX-2")
@pytest.mark.parametrize(
    "method, replacement, clause_id",
    [
        ("read_slices", reads_past_a_short_slice, "CTL-4"),
        ("info", prefix_never_grows, "PFX-2"),
    ],
)
def test_a_planted_bug_in_the_small_controller_is_caught_on_its_clause(method, replacement, clause_id) -> None:
    scenarios = [scenario for scenario in STANDARD_SCENARIOS if not scenario.hybrid and scenario.kind == "prefetch"]
    results = check_engine(planted(method, replacement), scenarios=scenarios)
    assert clause_id in failed(results), results


@pytest.mark.clause("CTL-4")
def test_a_hanging_read_holds_until_the_operation_is_terminated() -> None:
    run = run_engine_scenario(ReferenceEngine(), EngineScenario("prefetch", 300, "anchor", hang_on_read=1))
    reads = [call for call in run.recorder.calls if call.method == "batch_get_v1"]
    assert len(reads) == 2 and run.report.ok, run.report.format_table()
    assert run.operation.terminated


def test_the_scripted_store_answers_as_scripted() -> None:
    backend = ScenarioBackend()
    backend.plant("kv", ["a", "b", "c"])
    backend.unreadable = frozenset({"b"})
    backend.raise_on_read = 1
    assert backend.batch_exists(["a", "b", "x", "c"]) == 2
    assert backend.batch_get_v1(["a", "b", "x"], None) == [True, False, False]
    with pytest.raises(RuntimeError, match="storage node unreachable"):
        backend.batch_get_v1(["a"], None)
    assert len(STANDARD_SCENARIOS) == 54 and sum(scenario.hybrid for scenario in STANDARD_SCENARIOS) == 26
