"""The engine-driven tier: this release's own HiCacheController drives the backend on CPU.

Scenarios (``hicache_contracts.conformance.running.engine_tier``): write-through then a full hit
over several slices, a partial hit, prefix metadata off / ``[]`` / a list, a fresh instance reading
what another wrote, ``clear()``, an MLA model's TP rank 1 reading what rank 0 wrote, and the hybrid
sidecar scenarios (the release's HybridCacheController with an SWA window and a KV-derived indexer
pool, a full and a partial hit; with a Mamba state pool, a partial hit; the operations and transfers
built by its tree code). Backends: the
reference file backend and the memory backend on a shared store, attached as dynamic backends from
their JSON; SGLang's in-tree file backend attached by name; planted backends: v1 reads that land one
page off, a hit query that looks the window up by ``transfer.keys``, a v2 write that files the
window's pages in reverse order. Expected: the first three pass every scenario byte for byte; the
first planted one fails, each failure naming the SGLang function that called ``batch_get_v1``; the
other two fail the hybrid scenarios only (the reversed window: those with an SWA window), naming
``HybridCacheController._storage_hit_query`` and ``HybridCacheController._page_transfer_sidecar``. A release lacking a piece of the tree skips the
hybrid scenarios, naming the piece.
"""

from __future__ import annotations

import tempfile

import pytest

from hicache_contracts.conformance.running import engine_hybrid
from hicache_contracts.conformance.running.engine_hybrid import HYBRID_SCENARIOS
from hicache_contracts.conformance.running.engine_tier import SCENARIOS, run_engine_tier
from hicache_contracts.conformance.session.call_shapes import load_record, violations


def _dynamic(class_name: str, module: str = "hicache_reference.sglang_adapter", **more) -> dict:
    return {"backend_name": "tier", "module_path": module, "class_name": class_name, "interface_v1": 1, **more}


def _report(verdicts) -> str:
    return "\n".join(f"{verdict.scenario}: {verdict.failed or verdict.skipped or 'pass'}" for verdict in verdicts)


@pytest.mark.clause("BE-2", "BE-15", "BE-16", "PFX-1", "NS-5", "NS-7", "BE-11", "HYB-6", "HYB-7", "BE-21", "BE-22")
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
    assert all(verdict.passed and not verdict.skipped for verdict in verdicts), _report(verdicts)


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


@pytest.mark.clause("HYB-7", "BE-21")
@pytest.mark.parametrize(
    ("planted", "module", "caller", "caught"),
    [
        (
            "LooksUpTrailingKeys",
            "tests.sglang.planted_driven",
            "batch_exists_v2, called by HybridCacheController._storage_hit_query",
            HYBRID_SCENARIOS,
        ),
        (
            "MixesWindowPages",
            "tests.sglang.planted_hybrid",
            "HybridCacheController._page_transfer_sidecar",
            HYBRID_SCENARIOS[:2],  # a Mamba state is one page: reversing it changes nothing
        ),
    ],
)
def test_sidecar_defects_fail_only_the_hybrid_scenarios(release, planted, module, caller, caught):
    verdicts = run_engine_tier(sglang_config=_dynamic(planted, module=module, store=f"{planted}-{release}"))
    failed = {verdict.scenario for verdict in verdicts if not verdict.passed}
    assert failed == set(caught), _report(verdicts)
    assert all(caller in verdict.failed for verdict in verdicts if not verdict.passed), _report(verdicts)


def test_a_release_lacking_a_tree_piece_skips_the_hybrid_scenarios_naming_it(release, monkeypatch):
    radix = pytest.importorskip("sglang.srt.mem_cache.unified_radix_cache")
    monkeypatch.delattr(radix.UnifiedRadixCache, "_alloc_prefetch_aux_staging")
    ran, skipped = [], []
    engine_hybrid.run_hybrid_scenarios(
        ("dynamic", _dynamic("SGLangMemoryBackend", store=f"skip-{release}")),
        None,
        "skip",
        lambda name, body, recorder, setup_s: ran.append(name),
        lambda name, reason: skipped.append((name, reason)),
    )
    assert not ran
    assert [name for name, _ in skipped] == list(HYBRID_SCENARIOS)
    assert all("UnifiedRadixCache._alloc_prefetch_aux_staging" in reason for _, reason in skipped)


@pytest.mark.clause("HYB-7", "BE-22", "BE-8")
def test_every_call_the_engine_tier_makes_is_in_the_releases_recorded_shapes(release):
    """The call-shape records are read from the wheels' source; the release's own controllers, run, agree: each call
    they make hands ``extra_info`` in a recorded form and each hit query's transfers have a recorded shape."""
    from pathlib import Path

    from tests.sglang import recorded_shapes

    recorded_shapes.SHAPES.clear()
    verdicts = run_engine_tier(
        sglang_config=_dynamic("NotedMemoryBackend", module="tests.sglang.recorded_shapes", store=f"noted-{release}")
    )
    assert all(verdict.passed and not verdict.skipped for verdict in verdicts), _report(verdicts)
    shapes = list(recorded_shapes.SHAPES)
    assert any(shape.transfers for shape in shapes), "no hit query with pool transfers was made"
    record = load_record(Path(__file__).resolve().parents[2] / "docs" / "call-shapes", release)
    assert {shape.method for shape in shapes} <= {call["method"] for call in record["calls"]}
    assert violations(shapes, record) == []


def _run_command(capsys, release: str, backend: str, *more: str) -> tuple[int, str]:
    from hicache_contracts.cli import main

    status = main(
        ["run", "--no-color", "--profile", "smoke", "--isolation", "none", "--sglang-version", release]
        + ["--backend", backend, *more]
    )
    return status, capsys.readouterr().out


@pytest.mark.clause("BE-15", "BE-16")
def test_a_backend_run_with_a_release_loaded_gets_the_engine_tier_too(release, capsys):
    """``--backend module:Class`` with a release: after the probe tier, the release's controller drives the backend
    as the dynamic config a user would give SGLang for it (its extra config; interface_v1 as it claims v1)."""
    import json

    status, out = _run_command(
        capsys,
        release,
        "hicache_reference.sglang_adapter:SGLangMemoryBackend",
        "--extra-config",
        json.dumps({"store": f"command-{release}"}),
    )
    assert status == 0 and "(engine-driven tier)" in out and "PASSED overall, 2 sections" in out, out[-3000:]
    status, out = _run_command(
        capsys,
        release,
        "tests.sglang.planted_driven:ShiftsReads",
        "--extra-config",
        json.dumps({"store": f"command-shifted-{release}"}),
    )
    engine = " ".join(out[out.index("(engine-driven tier)") :].split())  # the report wraps its lines
    assert status == 1 and "batch_get_v1, called by HiCacheController._page_get_zero_copy" in engine, engine[-3000:]


def test_a_backend_sglangs_loader_refuses_is_told_why_the_engine_tier_did_not_run(release, capsys):
    status, out = _run_command(capsys, release, "tests.conformance.correct_backend:CorrectBackend")
    said = "the engine-driven tier did not run: SGLang's dynamic-backend loader refuses the class (TypeError: "
    assert said in out and "must inherit from HiCacheStorage" in out, out[-3000:]
    assert status == 0 and "(engine-driven tier)" not in out, out[-3000:]  # no section of no verdicts
