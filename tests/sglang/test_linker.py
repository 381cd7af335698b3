"""The linker suite inside a process holding one pinned SGLang release: through its own wrapper.

Scenario: the reference linkers, built (on 0.5.23) by the release's dynamic loader, driven through
the release's UnifiedCacheLinkerWrapper over a stand-in cache; planted linkers the same way; the
wrapper's rank agreement against the spec's oracle; SGLang's Mooncake direct linker with a fake
store through its ``storage=`` seam.
Expected: the reference linkers pass every check whose clause holds for the release and subclass
the release's UnifiedCacheLinker; each planted linker fails its own check; the wrapper agrees on
the largest length every rank reported (LNK-22); the Mooncake linker, over a DSA KV cache on CPU and a
fake store, passes every check it can be built for and sends its store no prefix (LNK-23).
Why it matters: the checks must hold through the code that drives a linker in production.
"""

from __future__ import annotations

import importlib
import itertools
import random

import pytest

from hicache_contracts.linker.checks import CHECKS
import torch

from hicache_contracts.linker.harness import LINKER_MODULE, WrapperDriver, fresh_setup, linker_arguments, make_transfer
from hicache_contracts.linker.suite import FAIL, PASS, SKIP, run_linker_suite
from hicache_spec.linker import intersect_rank_lookups
from hicache_spec.registry import clause, holds_for
from tests.linker.mooncake_fake import mooncake_factory

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
    "PageShownBeforeWrittenLinker": "lookup_during_transfers",
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


MOONCAKE_SKIPS = {
    "non_owner_rank_writes_nothing": "reads its TP rank from torch.distributed",
}
"""Checks the Mooncake factory cannot build for (one process is TP rank 0), with the reason's words."""


def test_mooncake_direct_linker_through_the_suite(release, linker_module, tmp_path) -> None:
    """SGLang's own direct linker, over a fake MooncakeStore: a verdict per clause (docs/linkers.md)."""
    report = run_linker_suite(factory=mooncake_factory(release))
    print(report.render())
    assert report.mode == "wrapper" and report.ok, report.render()
    for check in CHECKS:
        row = report.result(check.name)
        if not holds_for(clause(check.clause), release):
            assert row.status == SKIP
        elif check.name in MOONCAKE_SKIPS:
            assert row.status == SKIP and MOONCAKE_SKIPS[check.name] in row.detail, report.render()
        else:
            assert row.status == PASS, report.render()
    cancel = report.result("cancel_only_queued").detail
    assert ("declined" in cancel) == (release in ("0.5.20", "0.5.21"))  # those releases never cancel


@pytest.mark.clause("LNK-23")
def test_mooncake_direct_linker_sends_no_prefix_and_only_a_session_id(release, linker_module, tmp_path) -> None:
    build = mooncake_factory(release)
    linker = build(fresh_setup(tmp_path))
    try:
        driver = WrapperDriver(linker, release)
        driver.cache.insert_session_id = "session-7"  # type: ignore[assignment]  # the harness types it None
        keys = [f"{n:064x}" for n in range(1, 3)]
        assert driver.offload([make_transfer("kv", keys, torch.arange(0, 8))])
        assert driver.offload_results(1) == [True]
        assert driver.lookup("rid", [make_transfer("kv", keys)]) == [1, 2]
    finally:
        linker.close()
    calls = linker.storage.calls
    assert [name for name, _ in calls] == ["batch_set_v2", "batch_exists_v2"]
    assert calls[1][1] is None
    sent = calls[0][1]
    if release == "0.5.23":
        assert sent.extra_info == {"session_id": "session-7"} and not getattr(sent, "prefix_keys", None)
    else:
        assert sent is None


@pytest.mark.clause("LNK-4")
def test_certify_through_the_release_and_verify(release, linker_module, tmp_path, capsys) -> None:
    """`hicache-conform linker --certify` through the release's wrapper writes a bundle verify-submission accepts."""
    from hicache_contracts.cli import main

    bundle = tmp_path / "bundle"
    argv = ["linker", "--linker", "hicache_reference.linker:MemoryLinker", "--sglang-version", release]
    argv += ["--certify", str(bundle), "--vendor", "v", "--product-name", "p", "--product-version", "1"]
    argv += ["--repository", "https://example.com/r", "--contact", "c@example.com"]
    assert main(argv) == 0, capsys.readouterr().out
    assert "certified: every check of every claimed level ran and passed" in capsys.readouterr().out
    assert main(["verify-submission", str(bundle)]) == 0, capsys.readouterr().out
