"""Declaring eviction never makes the vendor suite stricter: SGLang's in-tree backends run with and without it.

Scenario: HiCacheFile, sim and shm, built as SGLang's factory builds them, go through the vendor suite
twice, once as they are and once with ``may_evict`` declared.
Expected: with eviction declared no clause fails that did not fail without it.
Why it matters: for a backend that may evict, the suite only drops demands ("it is still there"); a
check that turned a declaration into a new failure would be stricter than SGLang is.
"""

from __future__ import annotations

import tempfile

import pytest

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_contracts.conformance.running.sglang_in_tree import IN_TREE_BACKENDS, in_tree_factory


def failing(name: str, release: str, *, may_evict: bool) -> set[str]:
    with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
        options = SuiteOptions(profile="smoke", seed=0, sglang_version=release, timeout_s=30, may_evict=may_evict)
        report = run_suite(in_tree_factory(name, directory=directory), options)
    return {verdict.clause_id for verdict in report.sections[0].clauses if verdict.status == "fail"}


@pytest.mark.clause("BE-17")
@pytest.mark.parametrize("name", list(IN_TREE_BACKENDS))
def test_declaring_eviction_adds_no_failure(name: str, release: str) -> None:
    plain = failing(name, release, may_evict=False)
    assert failing(name, release, may_evict=True) <= plain
