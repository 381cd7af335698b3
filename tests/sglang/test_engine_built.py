"""The vendor suite with the release building, feeding and calling the backend as SGLang does.

Scenarios: ``hicache-conform run --sglang-version V`` over a backend module that imports SGLang at
its top; a backend whose constructor installs a signal handler; a backend that refuses a host pool
not shaped as SGLang's MHA host pool. Expected: the release is put on the path before the module is
imported (the run starts, not exit 2) and the report names the release and the tier; the backend is
built on the main thread and passes; the host pools registered are the release's own classes (an
MHA model's SWA pool an MHA pool) and the shape-checking backend passes.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import pytest

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_reference.sglang_adapter import SGLangMemoryBackend
from hicache_spec.releases import SGLANG_RELEASES


def _cli(*arguments: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hicache_contracts.cli", "run", "--no-color", "--quiet", *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.clause("BE-1")
def test_a_backend_that_imports_sglang_loads_with_sglang_version(release):
    if release not in (SGLANG_RELEASES[0], SGLANG_RELEASES[-1]):
        pytest.skip("the release's place on the path is checked on the oldest and the newest pinned release")
    done = _cli(
        "--backend",
        "tests.sglang.planted_driven:ImportsSGLang",
        "--extra-config",
        json.dumps({"store": f"imports-sglang-{release}"}),  # one store for every instance, as the engine tier needs
        "--sglang-version",
        release,
        "--profile",
        "smoke",
        "--seed",
        "0",
        "--check",
        "v1_pages_round_trip_bit_for_bit",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"release {release}" in done.stdout
    assert f"engine: SGLang {release}, probe tier" in done.stdout


@pytest.mark.clause("BE-1", "BE-24")
def test_a_constructor_that_installs_a_signal_handler_builds_and_passes(release):
    from tests.sglang.planted_driven import InstallsSignalHandler

    InstallsSignalHandler.built_on = []
    options = SuiteOptions(profile="smoke", seed=0, sglang_version=release)
    report = run_suite(InstallsSignalHandler, options)
    assert _failing(report) <= _failing(run_suite(SGLangMemoryBackend, options)), report.render_text(color=False)
    assert InstallsSignalHandler.built_on and set(InstallsSignalHandler.built_on) == {"MainThread"}


@pytest.mark.clause("BE-24")
@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
def test_a_backend_that_requires_sglangs_mha_host_pool_passes(release, layout):
    from tests.sglang.planted_driven import WantsSGLangMHAPool

    options = SuiteOptions(profile="smoke", seed=0, sglang_version=release, layout=layout)
    baseline = _failing(run_suite(SGLangMemoryBackend, options))
    report = run_suite(WantsSGLangMHAPool, options)
    assert _failing(report) <= baseline, report.render_text(color=False)
    mha = importlib.import_module("sglang.srt.mem_cache.pool_host.mha").MHATokenToKVPoolHost
    _PoolKinds.seen = {}
    run_suite(_PoolKinds, options)
    assert _PoolKinds.seen["kv", False] and all(issubclass(cls, mha) for cls in _PoolKinds.seen["kv", False])
    assert all(issubclass(cls, mha) for cls in _PoolKinds.seen.get(("swa", False), ())), _PoolKinds.seen


def _failing(report) -> set:
    """The clauses a report fails (a planted backend must fail no clause the correct one passes)."""
    return {verdict.clause_id for section in report.sections for verdict in section.clauses if verdict.status == "fail"}


class _PoolKinds(SGLangMemoryBackend):
    """Notes the class of every host pool it is given, by pool name and whether the model is MLA."""

    seen: dict = {}

    def register_mem_pool_host(self, mem_pool_host):
        type(self).seen.setdefault(("kv", bool(self.storage_config.is_mla_model)), set()).add(type(mem_pool_host))
        super().register_mem_pool_host(mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        name = getattr(host_pool_name, "value", host_pool_name)
        type(self).seen.setdefault((name, bool(self.storage_config.is_mla_model)), set()).add(type(host_pool))
        super().register_mem_host_pool_v2(host_pool, host_pool_name)


def _dynamic(class_name: str, **more) -> str:
    return json.dumps(
        {"backend_name": "planted", "module_path": "tests.sglang.planted_driven", "class_name": class_name, **more}
    )


@pytest.mark.clause("NS-1")
def test_a_dynamic_backend_without_interface_v1_is_judged_on_the_legacy_path(release):
    done = _cli("--sglang-config", _dynamic("LegacyIgnoresRank"), "--sglang-version", release, "--seed", "0")
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "drives it through batch_get/batch_set (legacy: no interface_v1)" in done.stdout
    assert "StorageBackendFactory built the backend" in done.stdout
    assert re.search(r"NS-1\s+FAIL", done.stdout), done.stdout[-6000:]
    assert re.search(r"v1\s+.*not asked: SGLang drives a dynamic backend configured without interface_v1", done.stdout)


@pytest.mark.clause("BE-1")
def test_the_release_factory_builds_a_signal_installing_backend_on_the_main_thread(release):
    if release not in (SGLANG_RELEASES[0], SGLANG_RELEASES[-1]):
        pytest.skip("checked through the command on the oldest and the newest pinned release")
    done = _cli(
        "--sglang-config",
        _dynamic("InstallsSignalHandler", interface_v1=1, store=f"signal-{release}"),
        "--sglang-version",
        release,
        "--profile",
        "smoke",
        "--seed",
        "0",
        "--check",
        "v1_pages_round_trip_bit_for_bit",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "drives it through batch_get_v1/batch_set_v1 (interface_v1)" in done.stdout
    assert f"SGLang {release}'s HiCacheController drives the backend (engine-driven tier)" in done.stdout


@pytest.mark.clause("BE-1")
def test_a_bad_sglang_config_is_a_usage_error_naming_the_field(release):
    done = _cli("--sglang-config", json.dumps({"module_path": "x", "class_name": "Y"}), "--sglang-version", release)
    assert done.returncode == 2
    assert "--sglang-config.backend_name" in done.stderr


@pytest.mark.clause("BE-21", "HYB-7")
def test_a_backend_that_looks_up_trailing_keys_in_the_hit_query_fails(release):
    from tests.sglang.planted_driven import LooksUpTrailingKeys

    options = SuiteOptions(profile="smoke", seed=0, sglang_version=release)
    caught = _failing(run_suite(LooksUpTrailingKeys, options)) - _failing(run_suite(SGLangMemoryBackend, options))
    assert caught & {"BE-21", "HYB-7", "BE-22", "HYB-6"}, caught
