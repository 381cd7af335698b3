"""SGLang's in-tree backends read against their expected failures: the divergence registry, strictly.

Scenario: each in-tree backend (file, sim, shm), built as SGLang's factory
builds it, through the vendor suite with this release's objects (smoke
profile, seed 0), read against ``in_tree_expected``: the registry's
divergences in the backend class's code that this release shows, and the
clauses the class is by design no storage backend for.
Expected: every failure is one an entry names, and no entry's clause now
passes: a divergence SGLang fixed flips this test until the registry says
so, and a new defect fails it.
Why it matters: the divergence registry is only trustworthy while the
releases still show what it records.
"""

from __future__ import annotations

import tempfile

import pytest

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_contracts.conformance.reporting.expected import compare_with_baseline, in_tree_expected
from hicache_contracts.conformance.running.sglang_in_tree import IN_TREE_BACKENDS, in_tree_factory


@pytest.mark.clause("BE-9", "BE-13", "BE-21", "NS-8")
@pytest.mark.parametrize("name", list(IN_TREE_BACKENDS))
def test_in_tree_failures_are_the_expected_ones_and_none_now_passes(name, release) -> None:
    with tempfile.TemporaryDirectory(prefix="hicache-in-tree-") as directory:
        factory = in_tree_factory(name, directory=directory)
        report = run_suite(factory, SuiteOptions(profile="smoke", seed=0, sglang_version=release, timeout_s=30))
    entry = IN_TREE_BACKENDS[name]
    expected = in_tree_expected(entry.module, entry.class_name, release)
    baseline = compare_with_baseline(report, expected, release=release)
    assert baseline.now_passing == (), "\n".join(baseline.lines())
    assert baseline.unexpected == (), "\n".join(baseline.lines()) + "\n" + report.render_text(color=False)
