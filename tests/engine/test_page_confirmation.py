"""CTL-11 has one page-confirmation rule, ``hicache_spec.confirmation``; the controller counts by it, the checker judges by it.

Scenario: results a backend may give for a v1 read or a hit query —
``[True]*4``, ``[1]*4``, a short list, ``None``, a bool hit — counted by the
reference controller's validators and by the checker; a hand-written trace
whose read returned ``[1, 1, 1, 1]`` with acks counting those pages; a
planted controller that, like SGLang's ``_page_get_zero_copy``, counts any
truthy entry, run over a backend that answers ``1`` for every page it read;
the reference controller over a backend answering with numpy's integers and
bools (BE-2, BE-14 allow them), live and in a trace's JSON form.
Expected: both count the same pages for every result; the checker names the
trace and the planted controller for CTL-11; the reference controller over
the ones backend counts nothing and conforms, over numpy's answers counts
every page and conforms.
"""

from __future__ import annotations

from typing import Any

import numpy
import pytest

from hicache_contracts.engine import RecordingBackend, TraceCall, check_operation, check_trace
from hicache_contracts.models import HiCacheStorageConfig
from hicache_reference import CacheController
from hicache_reference.calls import confirmed_exists, confirmed_pages
from hicache_contracts.engine import EngineScenario as Scenario
from hicache_reference.backends import MemoryBackend
from tests.engine.reference_store import filled_store as _filled_store
from tests.engine.reference_store import host_pool as _host_pool
from hicache_reference.prefetch_io import PrefetchIO
from hicache_reference.settings import ControllerSettings
from hicache_spec.confirmation import confirmed_hit
from hicache_spec.confirmation import confirmed_pages as spec_confirmed_pages
from tests.engine.traces import BATCH, PAGE_SIZE, find, prefetch_trace, replace_call

V1_RESULTS = [
    [True] * 4,
    [True, True, False, True],
    [1, 1, 1, 1],
    [True, 1, True, True],
    [True] * 3,
    [True] * 5,
    None,
    True,
    "TTTT",
    [None] * 4,
    [True, "yes", True, True],
    [numpy.True_] * 4,
    [True, True, numpy.False_, True],
]
HIT_RESULTS = [  # each with the hit it confirms: the index SGLang's slice takes an in-range count as, else 0
    (0, 0),
    (3, 3),
    (4, 4),
    (5, 0),
    (-1, 0),
    (True, 1),
    (False, 0),
    (2.0, 0),
    (None, 0),
    ("4", 0),
    (numpy.int64(3), 3),
    (numpy.int64(5), 0),
    (numpy.int8(3), 0),  # times the page size it overflows in SGLang (BE-2)
    (numpy.True_, 0),
]


@pytest.mark.clause("CTL-11")
@pytest.mark.parametrize("result", V1_RESULTS, ids=repr)
def test_controller_and_checker_count_the_same_pages(result):
    counted = confirmed_pages(result, 4)
    assert counted == spec_confirmed_pages(result, 4)
    snapshot = tuple(result) if isinstance(result, list) else result  # what the recorder keeps
    assert spec_confirmed_pages(snapshot, 4, snapshot=True) == counted
    flags = (True, numpy.True_)
    assert (counted == 4) == (
        isinstance(result, list) and len(result) == 4 and all(any(entry is flag for flag in flags) for entry in result)
    )


@pytest.mark.clause("CTL-11")
@pytest.mark.parametrize("result,expected", HIT_RESULTS, ids=repr)
def test_controller_and_checker_take_the_same_hit(result, expected):
    assert confirmed_exists(result, 4) == confirmed_hit(result, 4)
    assert confirmed_hit(result, 4) == expected


@pytest.mark.clause("CTL-11")
def test_a_read_of_ones_confirms_nothing_the_acks_may_count():
    trace = prefetch_trace("anchor")
    ones = replace_call(trace, find(trace, "batch_get_v1", 0), result=[1] * BATCH)
    report = check_operation(ones)
    assert "CTL-11" in report.violated, report.format_table()
    confirmed = (10 - BATCH) * PAGE_SIZE  # the two slices read with [True, ...]
    assert any(
        violation.message.endswith(
            f"but the backend confirmed only {confirmed} (a raise, a False or a "
            "malformed result is a failure at that page)"
        )
        for violation in report.for_clause("CTL-11")
    ), report.format_table()
    assert check_operation(trace).ok  # the same trace with [True]*4 conforms


def _ones_backend(config: HiCacheStorageConfig, store: Any) -> Any:
    class OnesBackend(MemoryBackend):
        """Reads as the memory backend does, but answers 1 for a page read (BE-14 asks for True)."""

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            return [1 if ok is True else ok for ok in super().batch_get_v1(keys, host_indices, extra_info)]

    return OnesBackend(config, {"store": store})


class CountsTruthyEntries(PrefetchIO):
    """CTL-11: a page counts as read when its entry is truthy (as SGLang's ``_page_get_zero_copy`` counts)."""

    def read_kv_slice(self, operation, keys, slots, extra_info):
        outcome = self.caller.call("batch_get_v1", keys, slots, extra_info, quiescence=operation.quiescence)
        if not outcome.returned or not isinstance(outcome.result, list):
            return 0
        count = 0
        for entry in outcome.result:
            if not entry:
                break
            count += 1
        return count


CountsTruthyEntriesController = CacheController.with_parts(CountsTruthyEntries, name="CountsTruthyEntriesController")


def _numpy_backend(config: HiCacheStorageConfig, store: Any) -> Any:
    class NumpyAnswersBackend(MemoryBackend):
        """The memory backend with numpy's answers: its counts numpy integers and its flags numpy bools, which BE-2
        and BE-14 allow."""

        def batch_exists(self, keys, extra_info=None):
            return numpy.int64(super().batch_exists(keys, extra_info))

        def batch_get_v1(self, keys, host_indices, extra_info=None):
            return [numpy.bool_(ok) for ok in super().batch_get_v1(keys, host_indices, extra_info)]

    return NumpyAnswersBackend(config, {"store": store})


def _prefetch_over_ones(controller_class: type, backend: Any = _ones_backend) -> tuple[Any, Any, Scenario]:
    scenario = Scenario("prefetch", 4, "anchor")
    config = HiCacheStorageConfig.single_rank()
    recorder = RecordingBackend(backend(config, _filled_store(scenario)))
    with controller_class(
        recorder,
        _host_pool(),
        storage_config=config,
        settings=ControllerSettings(pass_prefix_keys=True, prefetch_threshold=0),
    ) as controller:
        operation = controller.prefetch(keys=scenario.chain, prefix_keys=scenario.prefix_keys)
        assert operation.wait(10)
    return recorder, operation, scenario


def _check(recorder: Any, operation: Any, scenario: Scenario) -> Any:
    return check_trace(
        recorder.calls,
        chain=scenario.chain,
        prefix_keys=operation.base_info.prefix_keys,
        page_size=_host_pool().page_size,
        acks=operation.acks,
    )


@pytest.mark.clause("CTL-11")
def test_reference_controller_counts_no_page_of_ones_and_conforms():
    recorder, operation, scenario = _prefetch_over_ones(CacheController)
    assert operation.loaded_tokens == 0
    report = _check(recorder, operation, scenario)
    assert report.ok, report.format_table()
    assert "CTL-11" in report.checked


@pytest.mark.clause("CTL-11")
def test_controller_counting_truthy_entries_is_caught():
    recorder, operation, scenario = _prefetch_over_ones(CountsTruthyEntriesController)
    assert operation.loaded_tokens == 4 * _host_pool().page_size  # the bug took effect
    report = _check(recorder, operation, scenario)
    assert "CTL-11" in report.violated, report.format_table()


@pytest.mark.clause("CTL-11", "BE-2", "BE-14")
def test_reference_controller_counts_numpys_answers_as_the_pages_they_confirm():
    recorder, operation, scenario = _prefetch_over_ones(CacheController, _numpy_backend)
    assert operation.loaded_tokens == len(scenario.chain) * _host_pool().page_size
    report = _check(recorder, operation, scenario)
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-11")
def test_numpys_answers_keep_their_values_in_a_traces_json_form():
    recorder, operation, scenario = _prefetch_over_ones(CacheController, _numpy_backend)
    calls = [TraceCall.from_recorded(call) for call in recorder.calls]
    results = {call.method: call.result for call in calls if call.method in ("batch_exists", "batch_get_v1")}
    assert results["batch_exists"] == len(scenario.chain) and type(results["batch_exists"]) is int
    assert list(results["batch_get_v1"]) == [True] * len(results["batch_get_v1"])
    report = check_trace(
        calls,
        chain=scenario.chain,
        prefix_keys=scenario.prefix_keys,
        page_size=_host_pool().page_size,
        acks=operation.acks,
    )
    assert report.ok, report.format_table()
