"""Messages of the run itself, pinned whole: an unbuildable backend is told once; an empty counterexample shows
no block; an exception a backend call raised names the backend's own frame.

Scenario: a backend whose constructor raises, run through the whole suite; a report whose failure carries a
counterexample of blank lines; a backend whose batch_exists raises from a helper of its own.
Expected: one check outcome fails (the first), every later one is "not run: the backend could not be built (see
BE-1)"; no "counterexample:" header over nothing; the failure's counterexample names the backend's file, line
and function where the exception was raised.
Why it matters: a vendor reads one failure for one cause, and is sent to the line of its code that raised.
"""

from __future__ import annotations

import pytest

from hicache_contracts.conformance import ReportSection, SuiteReport
from hicache_contracts.conformance.reporting.report import ClauseVerdict, Failure
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.check_messages import stable
from tests.conformance.helpers import run
from tests.conformance.planted_backends import GlobalClear


class CannotBeBuilt(CorrectBackend):
    def __init__(self, storage_config, kwargs=None) -> None:
        raise RuntimeError("no store reachable")


class LookupHelperRaises(CorrectBackend):
    def batch_exists(self, keys, extra_info=None):
        return self.lookup(keys)

    def lookup(self, keys):
        raise KeyError("index missing")


@pytest.mark.clause("BE-1")
def test_an_unbuildable_backend_fails_one_check_and_the_others_are_not_run() -> None:
    report = run(CannotBeBuilt)
    outcomes = report.sections[0].checks
    assert [outcome.status for outcome in outcomes].count("fail") == 1
    assert outcomes[0].message is not None
    assert outcomes[0].status == "fail" and outcomes[0].message.startswith("the backend could not be built: ")
    assert {outcome.message for outcome in outcomes[1:]} == {"not run: the backend could not be built (see BE-1)"}


def test_a_blank_counterexample_shows_no_block() -> None:
    verdict = ClauseVerdict("BE-2", "core", "statement", "fail", failures=(Failure("a_check", "wrong", "\n \n"),))
    report = SuiteReport((ReportSection("backend x", "x", (), (verdict,)),))
    assert "counterexample" not in report.render_text(color=False)
    assert "```" not in report.to_markdown()
    assert "counterexample" not in report.to_junit_xml()


@pytest.mark.clause("BE-2")
def test_an_exception_from_a_backend_call_names_the_backends_frame() -> None:
    report = run(LookupHelperRaises, checks=("batch_exists_counts_the_leading_run",))
    outcome = report.sections[0].checks[0]
    assert outcome.status == "fail"
    line = LookupHelperRaises.lookup.__code__.co_firstlineno + 1
    assert outcome.counterexample is not None
    assert f'raised in the backend at test_messages_pinned.py:{line} in lookup: raise KeyError("index missing")' in (
        outcome.counterexample.splitlines()
    ), outcome.counterexample


class OneOpenInstancePerModel(CorrectBackend):
    """An embedded store: one open instance per model and ranks in a process (a file lock), released on close."""

    OPEN: set = set()

    def __init__(self, storage_config, kwargs=None) -> None:
        super().__init__(storage_config, kwargs)
        if self.namespace in self.OPEN:
            raise RuntimeError("store locked by another instance")
        self.OPEN.add(self.namespace)

    def close(self) -> None:
        self.OPEN.discard(self.namespace)


@pytest.mark.clause("BE-1", "NS-8")
def test_a_backend_refusing_a_second_open_instance_is_told_the_suite_keeps_instances_open() -> None:
    report = run(OneOpenInstancePerModel, checks=("clear_removes_only_its_own_namespace",))
    (failure,) = next(item for item in report.sections[0].clauses if item.clause_id == "BE-1").failures
    assert failure.message == (
        "found while setting up clear_removes_only_its_own_namespace: building the backend raised RuntimeError: "
        "store locked by another instance; 5 other instances of "
        "the backend were open then (the suite keeps every instance it builds open until the run ends: a backend "
        "allowing one open instance per configuration or store fails here)"
    )


class TakesTheConfigOnly(CorrectBackend):
    """A constructor of one argument: SGLang's call ``cls(storage_config, {})`` cannot bind."""

    def __init__(self, storage_config) -> None:
        super().__init__(storage_config, {})


class RaisesATypeErrorOfItsOwn(CorrectBackend):
    """A constructor taking SGLang's two arguments that raises a TypeError of its own."""

    def __init__(self, storage_config, kwargs=None) -> None:
        raise TypeError("page_size must be an int")


def construction_failure(backend) -> str:
    report = run(backend, checks=("clear_removes_only_its_own_namespace",))
    (failure,) = next(item for item in report.sections[0].clauses if item.clause_id == "BE-1").failures
    return failure.message


@pytest.mark.clause("BE-1")
def test_a_constructor_that_cannot_take_sglangs_two_arguments_is_told_how_sglang_calls_it() -> None:
    assert construction_failure(TakesTheConfigOnly) == (
        "building the backend raised TypeError: TakesTheConfigOnly.__init__() takes 2 positional arguments but 3 "
        "were given (SGLang builds a dynamic backend as cls(storage_config, {}), two positional arguments, and the "
        "constructor's signature (storage_config) does not take them: the extra config arrives in "
        "storage_config.extra_config, the second argument is an empty dict)"
    )


@pytest.mark.clause("BE-1")
def test_a_constructor_taking_sglangs_arguments_gets_no_hint_on_its_own_error() -> None:
    assert construction_failure(RaisesATypeErrorOfItsOwn) == (
        "building the backend raised TypeError: page_size must be an int"
    )


@pytest.mark.clause("NS-8")
def test_ns8_names_the_instance_that_made_each_call() -> None:
    report = run(GlobalClear, checks=("clear_removes_only_its_own_namespace",))
    outcome = report.sections[0].checks[0]
    assert outcome.message == (
        "clear() on one instance removed the pages of another model (written and read back): a new instance of it "
        "finds 0 of 2"
    )
    backend = "tests.conformance.planted_backends:GlobalClear"
    assert outcome.counterexample is not None
    assert [stable(line) for line in outcome.counterexample.splitlines()] == [
        "instance A is cleared; B is another model; C is a model whose name extends the cleared one's; D is another "
        "tp_rank; A-D each write [k0, k1] (read back), all but A also [k2, k3] (not read); clear() on A; E, a new "
        "instance of another model, looks up and reads [k0, k1] (models: m1 = 'hicache-conform-run-<run>-scoped1', "
        "m2 = 'hicache-conform-run-<run>-neighbour2', m1-nested = 'hicache-conform-run-<run>-scoped1-nested')",
        "why it matters: A shared store serves many engines; one operator's clear must not flush the others.",
        "last backend calls (12, oldest first):",
        "  instance D (model m1, tp_rank 1): batch_exists([k16, k17, k18, k19], None) -> 4",
        "  instance D (model m1, tp_rank 1): batch_set_v1([k0, k1], <128 host slots>, None) -> [True, True]",
        "  instance D (model m1, tp_rank 1): batch_get_v1([k0, k1], <128 host slots>, None) -> [True, True]",
        "  instance B (model m2, tp_rank 0): batch_set_v1([k2, k3], <128 host slots>, None) -> [True, True]",
        "  instance C (model m1-nested, tp_rank 0): batch_set_v1([k2, k3], <128 host slots>, None) -> [True, True]",
        "  instance D (model m1, tp_rank 1): batch_set_v1([k2, k3], <128 host slots>, None) -> [True, True]",
        "  instance A (model m1, tp_rank 0): clear() -> None",
        f"  instance E (model m2, tp_rank 0): {backend}(HiCacheStorageConfig(tp_rank=0, tp_size=2, pp_rank=0, "
        "pp_size=2, attn_cp_rank=0, attn_cp_size=2, is_mla_model=False, ...) -> <tests.conformance.planted_backends."
        "GlobalClear object>",
        "  instance E (model m2, tp_rank 0): register_mem_pool_host(<host pool of <n> pages>) -> None",
        "  instance E (model m2, tp_rank 0): on_host_pools_registered() -> None",
        "  instance E (model m2, tp_rank 0): batch_exists([k0, k1], None) -> 0",
        "  instance E (model m2, tp_rank 0): batch_get_v1([k0, k1], <128 host slots>, None) -> [False, False]",
        f'replay: hicache-conform run --backend {backend} --extra-config \'{{"store": "<store>"}}\' --levels '
        "core,legacy,v1,v2,prefix,namespacing,concurrency,durability,robustness --profile smoke --check "
        "clear_removes_only_its_own_namespace --seed 0",
    ]
