"""The suites with this release's own objects, and SGLang's in-tree backends through the vendor suite.

Scenario: the vendor suite runs against the reference backends with the
release chosen explicitly; a backend records what it is handed; the CLI's
main job runs with ``--sglang-version``; SGLang's HiCacheFile, sim and shm
backends, built as SGLang's factory builds them, go through the suite.
Expected: the reference passes and the report names the release; the
backend receives the release's classes; the CLI exits 0 and prints the
release; each in-tree backend gets a verdict per clause, never a crash.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

import pytest

from hicache_contracts.conformance import SuiteOptions, backend_clauses, run_suite
from hicache_contracts.conformance.running.sglang_in_tree import GENERIC_PATH, IN_TREE_BACKENDS, in_tree_factory
from hicache_reference.backends import MemoryBackend
from hicache_reference.main_job import run_reference_suite
from hicache_spec.releases import SGLANG_RELEASES


@pytest.mark.clause(*[item.id for item in backend_clauses()])
def test_reference_backends_pass_with_the_release_objects(release):
    report = run_reference_suite(SuiteOptions(profile="smoke", seed=0, sglang_version=release))
    assert not report.failed, report.render_text(color=False)
    for section in report.sections:
        assert section.options["sglang_release"] == release
        assert any(f"release {release}" in note for note in section.notes)


class _Recording(MemoryBackend):
    """The reference memory backend, noting the class of every object the suite hands it."""

    seen: set = set()

    def __init__(self, storage_config, kwargs=None):
        type(self).seen.add(type(storage_config))
        super().__init__(storage_config, kwargs)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        type(self).seen.add(type(extra_info))
        return super().batch_get_v1(keys, host_indices, extra_info)


@pytest.mark.clause("BE-8", "BE-1")
def test_the_backend_receives_the_release_classes(sglang_storage, release):
    _Recording.seen = set()
    run_suite(
        _Recording,
        SuiteOptions(profile="smoke", seed=0, sglang_version=release, checks=("v1_pages_round_trip_bit_for_bit",)),
    )
    assert sglang_storage.HiCacheStorageConfig in _Recording.seen
    assert not {cls for cls in _Recording.seen if cls.__module__.startswith("hicache_contracts")}


@pytest.mark.clause("BE-1")
def test_the_main_job_names_the_release(release):
    if release not in (SGLANG_RELEASES[0], SGLANG_RELEASES[-1]):
        pytest.skip("the CLI's release choice is checked on the oldest and the newest pinned release")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hicache_contracts.cli",
            "run",
            "--no-color",
            "--no-engine",
            "--profile",
            "smoke",
            "--seed",
            "0",
            "--sglang-version",
            release,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"SGLang objects: release {release}" in done.stdout


@pytest.mark.clause("BE-1")
def test_another_release_in_the_same_process_is_one_clear_line(release):
    if release != SGLANG_RELEASES[-1]:
        pytest.skip("checked once, on the newest pinned release")
    other = next(version for version in SGLANG_RELEASES if version != release)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from hicache_contracts.cli import main\n"
            f"from hicache_contracts.sglang_release import storage_module; storage_module({release!r})\n"
            f"sys.exit(main(['run', '--sglang-version', {other!r}, '--quiet']))",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"hicache-conform run: --sglang-version: sglang {release} is already imported in this process; "
        f"sglang {other} needs a process of its own"
    )


@pytest.mark.clause(*[item.id for item in backend_clauses()])
@pytest.mark.parametrize("name", list(IN_TREE_BACKENDS))
def test_in_tree_backends_get_a_verdict_not_a_crash(name, release):
    with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
        factory = in_tree_factory(name, directory=directory)
        report = run_suite(factory, SuiteOptions(profile="smoke", seed=0, sglang_version=release, timeout_s=30))
    (section,) = report.sections
    assert section.clauses, report.render_text(color=False)
    levels = {verdict.level: verdict for verdict in section.levels}
    assert (levels["v1"].claimed, levels["v1"].reason) == (False, GENERIC_PATH)  # SGLang never calls their v1
    assert levels["legacy"].claimed and levels["legacy"].source == "required"
    for verdict in section.clauses:
        assert "Traceback" not in (verdict.reason or ""), verdict
    print(f"{name}: " + " ".join(f"{verdict.clause_id}={verdict.status}" for verdict in section.clauses))
