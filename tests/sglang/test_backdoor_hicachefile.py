"""SGLang's own HiCacheFile through the backdoor checks, with hooks as plain as its files.

Scenario: the release's HiCacheFile, built as SGLang's factory builds it,
with hooks that write, read and delete its ``.bin`` files under the names
it gives them (``_get_suffixed_key(_log_key(pool, key))``).
Expected: both removed-page checks pass (a vanished file reads as a miss);
the short-object check fails on BE-13 only, as divergence DIV-9 records
(HiCacheFile counts any file under a key's name as present).
Why it matters: a check stricter than SGLang's own backend, beyond a
recorded divergence, would fail vendors for what SGLang does itself.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

import pytest

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_contracts.conformance.running.sglang_in_tree import in_tree_factory
from hicache_reference.backdoors import FileBackdoor


class HiCacheFileBackdoor(FileBackdoor):
    """HiCacheFile's page files, by the names HiCacheFile gives them (the reference file hooks, another path)."""

    def __init__(self, pool_name: Any) -> None:
        self.pool_name = pool_name
        """The release's ``PoolName`` enum (HiCacheFile names a sidecar file by the member)."""

    def path(self, backend: Any, key: str, pool: str) -> str:
        name = backend._get_suffixed_key(backend._log_key(self.pool_name(pool), key))
        return os.path.join(backend.file_path, f"{name}.bin")


CHECKS = (
    "planted_short_objects_are_misses",
    "a_removed_object_is_never_read_as_a_hit",
    "a_removed_kv_derived_sidecar_is_never_read_as_a_hit",
)


@pytest.mark.clause("BE-4", "BE-22", "BE-13")
def test_hicachefile_with_hooks_passes_the_removal_checks_and_diverges_on_short_files(sglang_storage, release):
    with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
        factory = dataclasses.replace(
            in_tree_factory("file", directory=directory), backdoor=HiCacheFileBackdoor(sglang_storage.PoolName)
        )
        report = run_suite(factory, SuiteOptions(profile="smoke", seed=0, sglang_version=release, checks=CHECKS))
    outcomes = {item.check: item for item in report.sections[0].checks}
    assert outcomes["a_removed_object_is_never_read_as_a_hit"].status == "pass", report.render_text(color=False)
    sidecar = outcomes["a_removed_kv_derived_sidecar_is_never_read_as_a_hit"]
    assert sidecar.status == "pass", report.render_text(color=False)
    short = outcomes["planted_short_objects_are_misses"]
    assert (short.status, short.clause_id) == ("fail", "BE-13"), report.render_text(color=False)
