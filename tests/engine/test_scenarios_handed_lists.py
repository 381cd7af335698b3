"""The scenario runner hands the engine lists, names an in-place change to one, and reports an engine's exception.

Scenario: the guide's small controller (docs/engines.md) and variants of it
run through the standard prefetch scenarios: one that accumulates the
operation's prefix in place (``prefix_keys += batch``, SGLang's seed bug),
building its extra info with the project's ``HiCacheStorageExtraInfo`` (which
copies the list) or with a plain dataclass (SGLang's shape); one that joins
the handed lists with lists of its own; and ones that raise inside the engine.
Expected: the accumulating engine fails PFX-5 with a message naming the
prefix list, how it grew and the line that grew it, whatever its extra-info
class; the list-based controller passes; an exception raised inside the
engine comes out as ``EngineRaised`` naming the exception, the engine's frame
and the scenario, not as the clauses it kept from running.
Why it matters: an engine developer is told the bug by its name, at its line.
"""

from __future__ import annotations

import copy
import pickle
import threading

import pytest

from hicache_contracts import HiCacheStorageExtraInfo
from hicache_contracts.engine import EngineRaised, HandedList, run_engine_scenario
from hicache_contracts.engine.scenarios import STANDARD_SCENARIOS, EngineScenario, check_engine
from tests.engine.list_prefix import ListExtraInfo
from tests.engine.test_scenarios import failed, planted

BASE_PREFETCHES = [scenario for scenario in STANDARD_SCENARIOS if not scenario.hybrid and scenario.kind == "prefetch"]


def accumulating_engine(extra_info_class: type) -> type:
    """The guide's engine whose hit query grows the operation's own prefix list in place, batch by batch (PFX-5)."""

    def run_prefetch(self, operation):
        prefix_keys = operation.prefix  # the list the scenario handed over
        for offset in range(0, len(operation.keys), self.batch_size):
            batch = list(operation.keys[offset : offset + self.batch_size])
            found = self.backend.batch_exists(batch, extra_info_class(prefix_keys=prefix_keys))
            operation.agreed += found
            if prefix_keys is not None:
                prefix_keys += batch  # the bug: the operation's prefix grows under every later call
            if found < len(batch):
                break
        loaded = self.read_slices(operation)
        operation.acks.append(self.final_ack(operation, loaded))

    def final_ack(self, operation, loaded):
        from hicache_contracts import FinalAck

        return FinalAck(operation_id=operation.operation_id, tokens=loaded * self.page_size, error=operation.error)

    engine = planted("run_prefetch", run_prefetch)
    engine.controller_class_used.final_ack = final_ack
    return engine


@pytest.mark.clause("PFX-5")
@pytest.mark.parametrize("extra_info_class", [HiCacheStorageExtraInfo, ListExtraInfo], ids=["model", "dataclass"])
def test_a_prefix_grown_in_place_fails_pfx5_whatever_the_extra_info_class(extra_info_class: type) -> None:
    results = failed(check_engine(accumulating_engine(extra_info_class), scenarios=BASE_PREFETCHES))
    assert "PFX-5" in results, results
    detail = results["PFX-5"]
    assert "the prefix_keys list handed to prefetch()" in detail
    assert "was extended by 1 key(s) with += at " in detail or "was extended by 128 key(s) with += at " in detail
    assert f"{__file__}:" in detail and "in run_prefetch" in detail
    assert "build a new one per batch" in detail


@pytest.mark.clause("PFX-5")
def test_the_change_is_named_once_per_list_and_the_prefix_it_started_with_is_the_operations() -> None:
    engine = accumulating_engine(HiCacheStorageExtraInfo)()
    run = run_engine_scenario(engine, EngineScenario("prefetch", 300, "anchor"))
    (change,) = run.report.for_clause("PFX-5")
    assert change.message.startswith(
        "the prefix_keys list handed to prefetch() (3 key(s) when handed over) was extended by 128 key(s) with += at "
    )
    assert "(the first of 3 in-place changes); it holds 303 key(s) now" in change.message
    # The hit query's calls got the prefix as it was at each call; the first one is the operation's prefix.
    assert all(violation.call_index != 0 for violation in run.report.for_clause("PFX-2"))


def list_based_prefetch(self, operation):
    """The guide's hit query written as SGLang writes it: the prefix list plus a list of the batch's keys."""
    for offset in range(0, len(operation.keys), self.batch_size):
        batch = [key for key in operation.keys[offset : offset + self.batch_size]]
        info = None if operation.prefix is None else operation.prefix + [*operation.keys[:offset]]
        found = self.backend.batch_exists(batch, HiCacheStorageExtraInfo(prefix_keys=info))
        operation.agreed += found
        if found < len(batch):
            break
    loaded = self.read_slices(operation)
    from hicache_contracts import FinalAck

    operation.acks.append(
        FinalAck(operation_id=operation.operation_id, tokens=loaded * self.page_size, error=operation.error)
    )


@pytest.mark.clause("PFX-2", "PFX-5", "CTL-1", "CTL-4", "CTL-5", "CTL-6")
def test_a_controller_that_joins_the_handed_lists_with_lists_passes() -> None:
    results = check_engine(planted("run_prefetch", list_based_prefetch), scenarios=BASE_PREFETCHES)
    assert failed(results) == {}
    assert {"PFX-2", "PFX-5", "CTL-4", "CTL-6"} <= {result.clause_id for result in results}


class StubEngine:
    """An adapter over no controller: it notes what it is handed; ``work`` runs on a thread of its own."""

    def __init__(self, work=None) -> None:
        self.seen: list = []
        self.work = work

    def start(self, backend, setup):
        self.backend = backend

    def prefetch(self, keys, prefix_keys):
        self.seen.append((keys, prefix_keys))
        thread = threading.Thread(
            target=self.work or (lambda: None), args=() if self.work is None else (keys, prefix_keys)
        )
        thread.start()
        return thread

    def wait(self, operation, timeout_s):
        operation.join(timeout_s)

    def acks(self, operation):
        return []

    def prefix_of(self, operation):
        return self.seen[-1][1]

    def backup(self, keys, prefix_keys, sidecar_keys):
        raise AssertionError("these scenarios are prefetches")

    def completed_tokens(self, operation):
        raise AssertionError("these scenarios are prefetches")

    def terminate(self, operation):
        pass

    def stop(self):
        pass


def test_the_engine_receives_new_lists_as_sglang_hands_them_over() -> None:
    engine = StubEngine()
    for prefix in ("none", "empty", "anchor"):
        run_engine_scenario(engine, EngineScenario("prefetch", 2, prefix))
    assert [type(prefix) for _, prefix in engine.seen] == [type(None), HandedList, HandedList]
    assert all(type(keys) is HandedList and len(keys) == 2 for keys, _ in engine.seen)
    assert all(isinstance(keys, list) for keys, _ in engine.seen) and isinstance(engine.seen[2][1], list)
    keys, anchor = engine.seen[2]
    assert type(keys + ["x"]) is list and type(anchor[:1]) is list  # joined or sliced: plain lists
    assert type(copy.copy(anchor)) is list and pickle.loads(pickle.dumps(anchor)) == list(anchor)
    assert keys is not engine.seen[1][0]  # a new list per operation


def test_a_handed_list_notes_each_change_and_where() -> None:
    handed = HandedList(["a", "b"], "the keys list handed to backup()")
    assert not handed.changed and handed.change_message() is None
    joined = handed + ["c"]
    assert not handed.changed and joined == ["a", "b", "c"]
    handed.append("c")
    line = test_a_handed_list_notes_each_change_and_where.__code__.co_firstlineno + 5
    handed.extend(["d", "e"])
    del handed[0]
    assert [change.operation for change in handed.changes] == ["append()", "extend()", "del [...]"]
    assert handed.changes[0].where == f"{__file__}:{line} in test_a_handed_list_notes_each_change_and_where"
    assert handed.change_message() == (
        f"the keys list handed to backup() (2 key(s) when handed over) was extended by 1 key(s) with append() at "
        f"{__file__}:{line} in test_a_handed_list_notes_each_change_and_where (the first of 3 in-place changes); "
        "it holds 4 key(s) now. A list handed over is never changed: build a new one per batch "
        "(prefix_keys + batch_keys)"
    )


def tuple_joining_prefetch(keys, prefix_keys):
    """A controller's thread that joins a tuple of its own with the handed prefix list."""
    return tuple(keys) + prefix_keys  # TypeError: can only concatenate tuple (not "list") to tuple


def test_an_exception_in_an_engine_thread_is_reported_as_itself_with_its_frame() -> None:
    with pytest.raises(EngineRaised) as raised:
        run_engine_scenario(StubEngine(tuple_joining_prefetch), EngineScenario("prefetch", 1, "anchor"))
    message = str(raised.value)
    assert message.startswith('the engine raised TypeError: can only concatenate tuple (not "HandedList") to tuple at ')
    line = tuple_joining_prefetch.__code__.co_firstlineno + 2
    assert f"{__file__}:{line} in tuple_joining_prefetch (in thread " in message
    assert "during scenario 'prefetch 1 pages prefix anchor base'; its clauses were not judged" in message
    assert isinstance(raised.value.__cause__, TypeError) and raised.value.thread is not None


def test_an_exception_in_an_adapter_call_is_reported_as_itself() -> None:
    class BrokenAcks(StubEngine):
        def acks(self, operation):
            raise KeyError("acks")

    with pytest.raises(
        EngineRaised, match=r"the engine raised KeyError: 'acks' at .*:\d+ in acks \(in the adapter call\)"
    ):
        run_engine_scenario(BrokenAcks(), EngineScenario("prefetch", 1, "anchor"))


def test_a_storage_error_the_engine_lets_escape_its_thread_stays_a_clause_finding() -> None:
    def reads_without_catching(keys, prefix_keys):
        raise_on_read = STUB["engine"].backend
        raise_on_read.batch_get_v1(list(keys[:1]), None)

    STUB["engine"] = StubEngine(reads_without_catching)
    run = run_engine_scenario(STUB["engine"], EngineScenario("prefetch", 1, "anchor", raise_on_read=0))
    assert "CTL-6" in run.report.violated  # no final ack: the clause it broke, not an EngineRaised


STUB: dict = {}
