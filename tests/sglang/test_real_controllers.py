"""SGLang's own controllers, judged by the trace checker: 0.5.20's prefix bugs named, later releases clean but for their recorded divergences.

Scenario: on the pinned release this process holds, the release's real
``HiCacheController`` and ``HybridCacheController`` (real storage threads,
real MHA host pools on CPU; the hybrid one with a TRAILING_PAGES SWA pool of
4 pages and a KV-derived indexer pool) run over ``RecordingBackend``
wrapping the release's ``HiCacheFile`` (with v1 page methods, so that the
controller hands every KV read and write its ``extra_info``) — see
``tests/sglang/real_engine.py`` for the stand-ins. Each controller backs up
200 pages and then prefetches 300 (a partial hit of 200 pages, 2 slices),
once with the prefix ``["p0"]`` and once with ``[]``.
Expected: the 200 pages land in the host rows byte for byte; judged with ``sglang_version`` = the release, every trace passes
and every plain finding is reported as a divergence the registry records
for that release; 0.5.20's prefix bugs are violations on their clauses
(PFX-4, PFX-5, PFX-7, PFX-8) without it; from 0.5.21 on the only finding is
the hybrid hit query's ``[]`` collapsed to None (PFX-4, DIV-1; also
DIV-2's pipeline-parallel ticket path, which the trace cannot tell apart); and the chain cut at
the hit (``operation.hash_value``) gets the verdict of the whole chain
(``operation.all_hash_values``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

import pytest
import torch

from hicache_contracts.engine import check_trace
from hicache_spec.divergences import divergences_for_release
from tests.sglang.real_engine import RealEngine

STORED, ASKED, WINDOW = 200, 300, 4
PREFIXES = {"anchor": ["p0"], "empty": []}
CONTROLLERS = ("HiCacheController", "HybridCacheController")
CASES = [
    (controller, prefix, kind) for controller in CONTROLLERS for prefix in PREFIXES for kind in ("backup", "prefetch")
]


@dataclass
class Run:
    """One recorded operation of a real controller, with what check_trace needs."""

    calls: list
    chain: list
    prefix_keys: Optional[list]
    options: dict
    cut_chain: Optional[list] = None
    """For a prefetch: ``operation.hash_value``, cut at the hit."""

    def check(self, *, version: Optional[str] = None, cut: bool = False) -> Any:
        chain = self.cut_chain if cut else self.chain
        assert chain is not None, "a cut chain is only recorded for a prefetch"
        return check_trace(
            self.calls, chain=chain, prefix_keys=self.prefix_keys, page_size=1, sglang_version=version, **self.options
        )


def _run_controller(engine: RealEngine, hybrid: bool) -> dict:
    runs = {}
    for base, (prefix_name, prefix) in zip((0, 10_000), PREFIXES.items()):
        tokens = list(range(base, base + STORED))
        keys = engine.keys(tokens)
        extra = [engine.trailing(keys, WINDOW), engine.derived()] if hybrid else None
        backup_prefix = list(prefix)
        backup = engine.backup(tokens, prefix_keys=backup_prefix, extra_pools=extra)
        assert backup.completed_tokens == STORED and len(os.listdir(engine.folder)) >= STORED  # the test's own store
        runs["backup", prefix_name] = Run(
            list(engine.rec.calls), keys, backup_prefix, {"backup_completed_tokens": backup.completed_tokens}
        )
        engine.rec.clear_calls()
        tokens = list(range(base, base + ASKED))
        keys = engine.keys(tokens)
        extra = [engine.trailing(keys, WINDOW), engine.derived()] if hybrid else None
        prefetch_prefix = list(prefix)
        operation, acks = engine.prefetch(tokens, prefix_keys=prefetch_prefix, extra_pools=extra)
        assert operation.storage_hit_count == STORED  # a partial hit: 200 of the 300 pages asked
        assert list(operation.all_hash_values) == keys
        loaded = engine.loaded_pages(operation, acks[-1].tokens)
        assert len(loaded) == STORED and all(torch.equal(written, now) for written, now in loaded)
        runs["prefetch", prefix_name] = Run(
            list(engine.rec.calls),
            list(operation.all_hash_values),
            prefetch_prefix,
            {"acks": acks},
            cut_chain=list(operation.hash_value),
        )
        engine.rec.clear_calls()
    return runs


@pytest.fixture(scope="module")
def runs(release, tmp_path_factory) -> dict:
    """Every case's recorded operation, both controllers built once for the module."""
    found = {}
    for controller in CONTROLLERS:
        hybrid = controller == "HybridCacheController"
        engine = RealEngine(str(tmp_path_factory.mktemp(controller)), hybrid=hybrid)
        try:
            engine.rec.clear_calls()  # registration calls are no part of an operation
            for (kind, prefix), run in _run_controller(engine, hybrid).items():
                found[controller, prefix, kind] = run
        finally:
            engine.close()
    return found


def _findings(report: Any) -> list:
    return [(finding.clause, finding.call_index, finding.message) for finding in report.violations]


# What each release's controllers break, per case, when judged without its divergences (plain clauses).
_LATER = {("HybridCacheController", "empty", "prefetch"): {"PFX-4"}}
PLAIN = {
    "0.5.20": {
        ("HiCacheController", "anchor", "backup"): {"PFX-5"},
        ("HiCacheController", "anchor", "prefetch"): {"PFX-5"},
        ("HiCacheController", "empty", "backup"): {"PFX-4"},
        ("HiCacheController", "empty", "prefetch"): {"PFX-4"},
        ("HybridCacheController", "anchor", "backup"): {"PFX-5", "PFX-7"},
        ("HybridCacheController", "anchor", "prefetch"): {"PFX-5", "PFX-7", "PFX-8"},
        ("HybridCacheController", "empty", "backup"): {"PFX-4", "PFX-7"},
        ("HybridCacheController", "empty", "prefetch"): {"PFX-4", "PFX-7", "PFX-8"},
    },
    "0.5.21": _LATER,
    "0.5.22": _LATER,
    "0.5.23": _LATER,
}
# The registry entries that record them (0.5.20: per case; later: the hybrid hit query).
ENTRIES = {
    "0.5.20": {
        ("HiCacheController", "anchor", "backup"): {"DIV-4"},
        ("HiCacheController", "anchor", "prefetch"): {"DIV-3", "DIV-12"},
        ("HiCacheController", "empty", "backup"): {"DIV-15"},
        ("HiCacheController", "empty", "prefetch"): {"DIV-1", "DIV-13", "DIV-14"},
        # DIV-28 too: a trace cannot tell the tree's backup from the PD-decode offload's, which passes no prefix.
        ("HybridCacheController", "anchor", "backup"): {"DIV-4", "DIV-19", "DIV-28"},
        # DIV-12 too: the operation's own prefix grew, which the query's += could have done as well as the reads'.
        ("HybridCacheController", "anchor", "prefetch"): {"DIV-3", "DIV-12", "DIV-16", "DIV-17", "DIV-18"},
        ("HybridCacheController", "empty", "backup"): {"DIV-15", "DIV-19", "DIV-28"},
        ("HybridCacheController", "empty", "prefetch"): {"DIV-1", "DIV-13", "DIV-14", "DIV-16", "DIV-17", "DIV-18"},
    },
    "0.5.21": {("HybridCacheController", "empty", "prefetch"): {"DIV-1", "DIV-2"}},
    "0.5.22": {("HybridCacheController", "empty", "prefetch"): {"DIV-1", "DIV-2"}},
    "0.5.23": {("HybridCacheController", "empty", "prefetch"): {"DIV-1", "DIV-2"}},
}


@pytest.mark.clause(
    "PFX-2",
    "PFX-4",
    "PFX-5",
    "PFX-7",
    "PFX-8",
    "PFX-9",
    "CTL-1",
    "CTL-2",
    "CTL-4",
    "CTL-5",
    "CTL-6",
    "CTL-7",
    "CTL-11",
    "CTL-13",
    "HYB-1",
    "HYB-2",
    "HYB-3",
    "HYB-5",
)
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_real_controller_is_clean_but_for_its_recorded_divergences(runs, release, case):
    run = runs[case]
    judged = run.check(version=release)
    assert judged.ok, judged.format_table(statements=True)
    recorded = {item.id for item in divergences_for_release(release)}
    named = {entry for finding in judged.divergences for entry in finding.divergence}
    assert named <= recorded
    assert named == ENTRIES[release].get(case, set()), judged.format_table()
    plain = run.check()
    assert set(plain.violated) == PLAIN[release].get(case, set()), plain.format_table()
    # Each plain finding is one of the divergences shown, unchanged.
    assert sorted(_findings(plain), key=str) == sorted(
        ((d.clause, d.call_index, d.message) for d in judged.divergences), key=str
    )
    controller, _, kind = case
    expected = {"PFX-1", "CTL-2"} | (
        {"CTL-1", "CTL-4", "CTL-5", "CTL-6", "CTL-11"} if kind == "prefetch" else {"CTL-7", "CTL-13"}
    )
    if controller == "HybridCacheController":
        expected |= {"HYB-1", "HYB-2", "HYB-3"} if kind == "prefetch" else {"HYB-5"}
    assert expected <= set(judged.checked), judged.checked


@pytest.mark.clause("CTL-1", "CTL-2")
@pytest.mark.parametrize("case", [case for case in CASES if case[2] == "prefetch"], ids="-".join)
def test_chain_cut_at_the_hit_gets_the_whole_chains_verdict(runs, release, case):
    run = runs[case]
    assert len(run.cut_chain) == STORED < len(run.chain)
    whole, cut = run.check(), run.check(cut=True)
    assert _findings(cut) == _findings(whole), cut.format_table()
    assert not {"CTL-1", "CTL-2"} & set(cut.violated)
