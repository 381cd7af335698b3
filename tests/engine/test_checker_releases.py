"""The checker judging a pinned SGLang release: recorded divergences apart, a chain cut at the hit, SGLang's KV-derived reads.

Scenario: hand-written traces (batch size 4, 10 pages) — a prefetch whose hit
query found 6 pages, checked with the whole chain and with the chain cut at
the hit (SGLang's ``operation.hash_value`` after the query); a prefetch whose
KV-derived reads carry no ``indices_from_pool`` (as SGLang builds them); a
trace with a prefix grown in place, judged with and without
``sglang_version``.
Expected: the cut chain gets the whole chain's verdict, and a chain that is
not the start of what the query asked stays a CTL-2 finding; SGLang's
KV-derived reads are recognised, one with other keys is not; a finding the
registry records for the release moves to ``divergences`` naming its entry,
does not fail the verdict and is shown by ``format_table``; any other
release keeps it a violation; an unknown release is refused naming the
argument.
"""

from __future__ import annotations

import pytest

from hicache_contracts.engine import TraceTransfer, check_operation, check_trace
from hicache_contracts.errors import ContractViolation
from hicache_contracts.models import FinalAck, ProgressAck
from hicache_spec.divergences import divergences_for_release
from tests.engine.traces import (
    BATCH,
    CHAIN,
    PAGE_SIZE,
    PREFIX,
    _Calls,
    find,
    backup_trace,
    prefetch_trace,
    replace_call,
    with_fields,
)

HIT = 6


def partial_hit_trace(chain=CHAIN):
    """A conforming prefetch of CHAIN with 6 pages stored: the query stops at slice 1, IO reads [0, 4) and [4, 6)."""
    calls = _Calls(PREFIX)
    calls.add("batch_exists", keys=CHAIN[0:4], result=4, **calls.info(0))
    calls.add("batch_exists", keys=CHAIN[4:8], result=2, **calls.info(4))
    calls.add("batch_get_v1", keys=CHAIN[0:4], result=[True] * 4, **calls.info(0))
    calls.add("batch_get_v1", keys=CHAIN[4:6], result=[True] * 2, **calls.info(4))
    acks = (
        ProgressAck(operation_id="op", slice_index=0, tokens=4 * PAGE_SIZE),
        ProgressAck(operation_id="op", slice_index=1, tokens=HIT * PAGE_SIZE),
        FinalAck(operation_id="op", tokens=HIT * PAGE_SIZE),
    )
    return dict(
        calls=calls.calls,
        chain=chain,
        prefix_keys=PREFIX,
        batch_size=BATCH,
        page_size=PAGE_SIZE,
        acks=acks,
        operation_id="op",
    )


@pytest.mark.clause("CTL-1", "CTL-2")
@pytest.mark.parametrize("pages", [len(CHAIN), HIT, 4, 1])
def test_chain_cut_at_or_before_the_hit_gets_the_whole_chains_verdict(pages):
    report = check_trace(**partial_hit_trace(CHAIN[:pages]))
    assert report.ok, report.format_table()
    assert {"CTL-1", "CTL-2", "CTL-4", "CTL-5"} <= set(report.checked)


@pytest.mark.clause("CTL-2")
def test_chain_that_is_not_the_start_of_the_query_is_still_a_finding():
    report = check_trace(**partial_hit_trace(CHAIN[1:HIT]))
    assert "CTL-2" in report.violated, report.format_table()
    # A chain longer than the hit the query found is not completed either: the query's slice 1 is then short.
    wrong = partial_hit_trace(CHAIN[: HIT + 1])
    wrong["calls"][1] = wrong["calls"][1].model_copy(update={"keys": CHAIN[4:6] + (CHAIN[9], CHAIN[8])})
    assert "CTL-2" in check_trace(**wrong).violated


def _sglang_derived(trace):
    """Drop indices_from_pool from the KV-derived reads, as SGLang's _page_transfer_kv_batch builds them."""
    for _ in range(3):
        position = find(trace, "batch_get_v2", 0, derived=True)
        call = trace.calls[position]
        transfers = tuple(TraceTransfer(name=t.name, keys=t.keys) for t in call.transfers)
        trace = replace_call(trace, position, transfers=transfers)
    return trace


@pytest.mark.clause("HYB-1", "HYB-2", "PFX-8")
def test_sglang_kv_derived_reads_without_indices_from_pool_are_recognised():
    trace = _sglang_derived(prefetch_trace("anchor", hybrid=True))
    report = check_operation(trace)
    assert report.ok, report.format_table()
    assert {"HYB-1", "PFX-8"} <= set(report.checked)
    # Other keys than the KV read of the slice: not a KV-derived read, so a second sidecar read before KV ended.
    position = find(trace, "batch_get_v2", 0)
    other = replace_call(trace, position, transfers=(TraceTransfer(name="indexer", keys=CHAIN[1:4]),))
    assert "HYB-2" in check_operation(other).violated


def _in_place_prefix_trace():
    """A backup whose second write saw the prefix the first one received grown in place (0.5.20's +=)."""
    trace = prefetch_trace("anchor")
    position = find(trace, "batch_get_v1", 0)
    return replace_call(trace, position, prefix_keys_after=PREFIX + CHAIN[:4])


@pytest.mark.clause("PFX-5")
def test_recorded_divergence_is_reported_apart_and_does_not_fail():
    trace = _in_place_prefix_trace()
    plain = check_operation(trace)
    assert plain.violated == ("PFX-5",) and not plain.divergences
    judged = check_operation(trace, sglang_version="0.5.20")
    assert judged.ok and not judged.violations
    (finding,) = judged.divergences
    assert finding.clause == "PFX-5" and finding.release == "0.5.20"
    assert finding.divergence == ("DIV-3",)  # _page_transfer reads; DIV-4 (_page_backup) and DIV-12 (the query) do not
    assert finding.call_index == plain.violations[0].call_index and finding.message == plain.violations[0].message
    assert {item.id for item in divergences_for_release("0.5.20")} >= set(finding.divergence)
    table = judged.format_table()
    assert table.startswith("trace conforms (checked: ")
    assert "1 recorded divergence(s) of SGLang 0.5.20 (not failing the verdict):" in table
    assert "DIV-3  PFX-5  call #" in table
    assert "(recorded divergence DIV-3 of SGLang 0.5.20)" in str(finding)


@pytest.mark.clause("PFX-5")
@pytest.mark.parametrize("release", ["0.5.21", "0.5.22", "0.5.23"])
def test_a_release_that_does_not_record_it_keeps_the_violation(release):
    judged = check_operation(_in_place_prefix_trace(), sglang_version=release)
    assert judged.violated == ("PFX-5",) and not judged.divergences


@pytest.mark.clause("PFX-4")
def test_collapsed_empty_prefix_on_the_hybrid_hit_query_is_the_recorded_0_5_23_divergence():
    trace = prefetch_trace("empty", hybrid=True)
    trace = replace_call(trace, find(trace, "batch_exists_v2"), prefix_keys=None)
    judged = check_operation(trace, sglang_version="0.5.23")
    assert judged.ok, judged.format_table()
    (finding,) = judged.divergences
    # The trace cannot tell the plain hit query (DIV-1) from the pipeline-parallel ticket's (DIV-2): both are named.
    assert finding.clause == "PFX-4" and finding.divergence == ("DIV-1", "DIV-2")
    assert check_operation(trace).violated == ("PFX-4",)


@pytest.mark.clause("PFX-2")
@pytest.mark.parametrize("version", ["0.4.0", "latest", 23])
def test_unknown_release_is_refused_naming_the_argument(version):
    with pytest.raises(ContractViolation) as raised:
        check_trace(**partial_hit_trace(), sglang_version=version)
    assert "check_trace.sglang_version" in str(raised.value)
    with pytest.raises(ContractViolation):
        check_operation(with_fields(prefetch_trace()), sglang_version=version)


@pytest.mark.clause("PFX-5")
def test_trace_command_judges_a_release(tmp_path, capsys):
    from hicache_contracts.cli import main
    from hicache_contracts.engine import TraceDocument

    path = tmp_path / "trace.json"
    path.write_text(TraceDocument(operations=(_in_place_prefix_trace(),)).model_dump_json(), encoding="utf-8")
    assert main(["trace", str(path)]) == 1
    capsys.readouterr()
    assert main(["trace", str(path), "--sglang-version", "0.5.20"]) == 0
    out = capsys.readouterr().out
    assert "1 recorded divergence(s) of SGLang 0.5.20 (not failing the verdict):" in out and "DIV-3  PFX-5" in out
    assert main(["trace", str(path), "--sglang-version", "0.4"]) == 2
    assert capsys.readouterr().err.startswith("hicache-conform trace: --sglang-version: check_trace.sglang_version")


@pytest.mark.clause("PFX-7", "PFX-1")
@pytest.mark.parametrize(
    "build, method, entries",
    [
        (backup_trace, "batch_set_v1", ("DIV-28",)),  # a KV write may be the PD-decode offload's
        (prefetch_trace, "batch_exists", ()),  # the offload makes no hit query
        (prefetch_trace, "batch_get_v1", ()),  # nor a read
    ],
    ids=["kv-write", "hit-query", "kv-read"],
)
def test_the_decode_offload_divergence_covers_its_writes_only(build, method, entries):
    """DIV-28 (every release: the PD-decode offload passes no prefix) excuses a KV write's missing prefix, no other call's."""
    operation = build()
    position = find(operation, method, 0)
    judged = check_operation(
        replace_call(operation, position, extra_info_state="absent", prefix_keys=None), sglang_version="0.5.23"
    )
    assert tuple(entry for finding in judged.divergences for entry in finding.divergence) == entries
    assert judged.violated == (() if entries else ("PFX-7",)), judged.format_table()


@pytest.mark.clause("PFX-1")
def test_a_malformed_prefix_is_no_recorded_divergence():
    """DIV-20 (the anchor's pages left out of the prefix) names no kind of call: a str prefix stays a PFX-1 violation."""
    operation = prefetch_trace()
    position = find(operation, "batch_exists", 0)
    judged = check_operation(
        replace_call(operation, position, prefix_keys=None, prefix_keys_problem="a str"), sglang_version="0.5.23"
    )
    assert "PFX-1" in judged.violated and not any("DIV-20" in f.divergence for f in judged.divergences)
