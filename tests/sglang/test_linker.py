"""The linker suite inside a process holding one pinned SGLang release: through its own wrapper.

Scenario: the reference linkers, built (on 0.5.23) by the release's dynamic loader, driven through
the release's UnifiedCacheLinkerWrapper over a stand-in cache; planted linkers the same way; the
wrapper's rank agreement against the spec's oracle; SGLang's Mooncake direct linker with a fake
store through its ``storage=`` seam.
Expected: the reference linkers pass every check whose clause holds for the release and subclass
the release's UnifiedCacheLinker; each planted linker fails its own check; the wrapper agrees on
the largest length every rank reported (LNK-22); the Mooncake linker gets a verdict per clause or
a skip naming why it cannot be built on CPU.
Why it matters: the checks must hold through the code that drives a linker in production.
"""

from __future__ import annotations

import importlib
import itertools
import random

import pytest

from hicache_contracts.linker.checks import CHECKS
from hicache_contracts.linker.harness import LINKER_MODULE, WrapperDriver, fresh_setup, linker_arguments
from hicache_contracts.linker.suite import FAIL, PASS, SKIP, run_linker_suite
from hicache_spec.linker import intersect_rank_lookups
from hicache_spec.registry import clause, holds_for

CLAUSE_OF = {check.name: check.clause for check in CHECKS}
BEHAVIOUR = sorted(set(CLAUSE_OF.values()), key=lambda c: int(c.split("-")[1]))


@pytest.fixture(scope="module")
def linker_module(release):
    return importlib.import_module(LINKER_MODULE)


@pytest.fixture(scope="module")
def reference(linker_module):
    return importlib.import_module("hicache_reference.linker")


@pytest.mark.clause(*BEHAVIOUR, "LNK-4")
@pytest.mark.parametrize("kind", ["MemoryLinker", "FileLinker"])
def test_reference_linkers_pass_through_the_release_wrapper(release, linker_module, reference, kind) -> None:
    cls = getattr(reference, kind)
    assert issubclass(cls, linker_module.UnifiedCacheLinker)
    report = run_linker_suite(cls)
    assert report.mode == "wrapper" and report.release == release
    assert report.ok, report.render()
    for check in CHECKS:
        expected = PASS if holds_for(clause(check.clause), release) else SKIP
        assert report.result(check.name).status == expected, report.render()
    factory_row = report.result("release_factory_loads")
    assert factory_row.status == (PASS if release == "0.5.23" else SKIP), report.render()


PLANTED_THROUGH_WRAPPER = {
    "NewestFirstOffloadLinker": "offload_results_in_order",
    "KvOnlyLookupLinker": "lookup_restorable_set",
    "CancelStartedLinker": "cancel_only_queued",
    "RaisingFinishLinker": "failed_load_reported_not_raised",
    "HastyResetLinker": "reset_quiesces",
}


@pytest.mark.parametrize(
    ("name", "check"),
    [pytest.param(n, c, marks=pytest.mark.clause(CLAUSE_OF[c]), id=n) for n, c in PLANTED_THROUGH_WRAPPER.items()],
)
def test_planted_linkers_are_caught_through_the_wrapper(release, linker_module, name, check) -> None:
    planted = getattr(importlib.import_module("tests.linker.planted"), name)
    if not holds_for(clause(CLAUSE_OF[check]), release):
        pytest.skip(f"{CLAUSE_OF[check]} does not hold for {release}")
    report = run_linker_suite(planted)
    failed = sorted(row.check for row in report.results if row.status == FAIL and row.counted)
    assert failed == [check], report.render()


@pytest.mark.clause("LNK-22")
def test_wrapper_rank_agreement_is_the_spec_oracle(release, linker_module, reference, tmp_path) -> None:
    setup = fresh_setup(tmp_path)
    linker = reference.MemoryLinker(
        *linker_arguments(setup)[:2], components=set(), extra_config={"store": setup.store_id}
    )
    try:
        driver = WrapperDriver(linker, release)
        generator = random.Random(7)
        for ranks, tail in itertools.product((1, 2, 3), (0, 1, 3, 6)):
            for _ in range(20):
                per_rank = [
                    [generator.randint(-1, tail + 2) for _ in range(generator.randint(0, 5))] for _ in range(ranks)
                ]
                expected = intersect_rank_lookups(tuple(tuple(r) for r in per_rank), tail)
                assert driver.agree(per_rank, tail) == expected, (per_rank, tail)
    finally:
        linker.close()


class _FakeMooncake:
    """The MooncakeStore stand-in passed through the ``storage=`` seam (its buffers registered, nothing stored)."""

    def __init__(self):
        self.store = self
        self.mla_suffix = self.mha_suffix = ""

    def register_buffer(self, ptr, size):
        return 0

    def close(self):
        pass


def _mooncake_factory(release):
    module = importlib.import_module("sglang.srt.mem_cache.storage.mooncake_store.mooncake_direct_linker")

    def build(setup):
        server_args, params, extra = linker_arguments(setup)
        component_type = importlib.import_module("sglang.srt.mem_cache.unified_cache.component_type")
        keywords = {"components": {component_type.ComponentType.FULL}, "storage": _FakeMooncake()}
        if release == "0.5.23":
            keywords.update(extra_config=extra, forward_stream=None)
        return module.MooncakeDirectLinker(server_args, params, **keywords)

    return build


def test_mooncake_direct_linker_through_the_suite(release, linker_module, tmp_path) -> None:
    build = _mooncake_factory(release)
    try:
        linker = build(fresh_setup(tmp_path))
    except Exception as error:
        pytest.skip(
            f"SGLang {release}'s MooncakeDirectLinker cannot be built over the suite's CPU pools: "
            f"{type(error).__name__}: {error}"
        )
    linker.close()
    report = run_linker_suite(factory=build)
    print(report.render())
