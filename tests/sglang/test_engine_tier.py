"""The engine-driven tier: this release's own HiCacheController drives the backend on CPU.

Scenarios (``hicache_contracts.conformance.running.engine_tier``): write-through then a full hit
over several slices, a partial hit, prefix metadata off / ``[]`` / a list, a fresh instance reading
what another wrote, ``clear()``, an MLA model's TP rank 1 reading what rank 0 wrote. Backends: the reference file backend and the memory backend on a
shared store, attached as dynamic backends from their JSON; SGLang's in-tree file backend attached
by name; a planted backend whose v1 reads land one page off. Expected: the first three pass every
scenario byte for byte; the planted one fails, each failure naming the SGLang function that called
``batch_get_v1``.
"""

from __future__ import annotations

import tempfile

import pytest

from hicache_contracts.conformance.running.engine_tier import SCENARIOS, run_engine_tier


def _dynamic(class_name: str, module: str = "hicache_reference.sglang_adapter", **more) -> dict:
    return {"backend_name": "tier", "module_path": module, "class_name": class_name, "interface_v1": 1, **more}


def _report(verdicts) -> str:
    return "\n".join(f"{verdict.scenario}: {verdict.failed or 'pass'}" for verdict in verdicts)


@pytest.mark.clause("BE-2", "BE-15", "BE-16", "PFX-1", "NS-5", "NS-7", "BE-11")
@pytest.mark.parametrize("backend", ["reference file", "reference memory", "in-tree file"])
def test_correct_backends_pass_every_scenario(release, backend):
    with tempfile.TemporaryDirectory(prefix="hicache-engine-tier-") as folder:
        if backend == "in-tree file":
            verdicts = run_engine_tier(in_tree="file", folder=folder)
        elif backend == "reference file":
            verdicts = run_engine_tier(sglang_config=_dynamic("SGLangFileBackend", path=folder))
        else:
            verdicts = run_engine_tier(sglang_config=_dynamic("SGLangMemoryBackend", store=f"tier-{release}"))
    assert [verdict.scenario for verdict in verdicts] == list(SCENARIOS)
    assert all(verdict.passed for verdict in verdicts), _report(verdicts)


@pytest.mark.clause("BE-15", "BE-16")
def test_reads_that_land_one_page_off_fail_naming_the_sglang_caller(release):
    verdicts = run_engine_tier(
        sglang_config=_dynamic("ShiftsReads", module="tests.sglang.planted_driven", store=f"shifted-{release}")
    )
    failed = [verdict for verdict in verdicts if not verdict.passed]
    assert failed, _report(verdicts)
    assert all(
        "batch_get_v1, called by HiCacheController._page_get_zero_copy" in verdict.failed for verdict in failed
    ), _report(verdicts)
