"""Repeated in-process runs of the suite hold memory flat and leave no directory behind.

Scenario: the suite run 10 times in one process against the file backend
on a folder of the test's own (the stateful check included: hypothesis keeps
its machine class for good, so the class must not hold the run's context).
Expected: after each run no suite context is alive, the folder is empty, and
the resident memory of the last run is within a few MB of the second's. The
planted stateful check that keeps each run's context is caught.
"""

from __future__ import annotations

import gc
import os
import warnings
from typing import Any

import pytest

from contextlib import contextmanager
from typing import Iterator

from hicache_contracts.conformance.checks import stateful as checks_stateful
from hicache_contracts.conformance.session.context import SuiteContext
from hicache_contracts.conformance.session.loading import BackendFactory
from hicache_contracts.conformance.session.options import SuiteOptions
from hicache_contracts.conformance.running.runner import run_suite
from hicache_reference.backends import FileBackend

RUNS = 10
CHECKS = (
    "stateful_model_of_a_lossy_write_once_store",
    "v1_pages_round_trip_bit_for_bit",
    "clear_removes_only_its_own_namespace",
)
MAX_GROWTH_MIB = 8.0
"""Allowed growth of resident memory from the second run to the last (one leaked run holds far more)."""


def resident_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def live_contexts() -> int:
    gc.collect()
    with warnings.catch_warnings():  # isinstance on torch's deprecated objects warns
        warnings.simplefilter("ignore", FutureWarning)
        return sum(isinstance(item, SuiteContext) for item in gc.get_objects())


@pytest.mark.clause("BE-11")
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc")
def test_ten_runs_hold_memory_flat_and_leave_no_directory(tmp_path: Any) -> None:
    root = tmp_path / "store"
    factory = BackendFactory(FileBackend, {"path": str(root)})
    sizes = []
    first = None
    for number in range(RUNS):
        report = run_suite(factory, SuiteOptions(profile="smoke", seed=number, checks=CHECKS))
        assert not report.failed, report.render_text(color=False)
        del report
        alive = live_contexts()
        first = alive if first is None else first  # hypothesis may keep the very first strategy it ever drew
        assert alive <= min(first, 1), f"run {number + 1} left its context alive ({alive} contexts alive)"
        assert os.listdir(root) == [], f"run {number + 1} left {os.listdir(root)} in the store"
        sizes.append(resident_mib())
    growth = sizes[-1] - sizes[1]
    assert growth < MAX_GROWTH_MIB, f"resident memory grew {growth:.1f} MiB over {RUNS - 2} runs: {sizes}"


def test_planted_stateful_check_keeping_its_runs_is_caught(tmp_path: Any, monkeypatch: Any) -> None:
    kept: list[SuiteContext] = []  # as a machine class per run, held by hypothesis' tables, kept its run

    @contextmanager
    def bound_for_good(suite: SuiteContext, seen: list[str]) -> Iterator[None]:
        kept.append(suite)
        checks_stateful._RUN.suite, checks_stateful._RUN.seen = suite, seen
        yield

    monkeypatch.setattr(checks_stateful, "bound_run", bound_for_good)
    with pytest.raises(AssertionError) as raised:
        test_ten_runs_hold_memory_flat_and_leave_no_directory(tmp_path)
    assert "left its context alive" in str(raised.value)
