"""The trace checker on traces at the edges its rules draw: the ones a small change to the checker would misjudge.

Scenario: conforming and non-conforming prefetches and backups of 10 pages in
slices of 4 (tests/engine/traces.py) changed at one edge: a KV-derived read
that confirms fewer pages than its KV read, reads without a hit query, a
prefetch revoked before IO, an operation-level finding under a pinned
release, the pages a finding names. Expected: the verdict SGLang's controller
implies, and findings whose messages name the right pages. Why this matters:
each case is one a mutation of the checker got wrong while every other test
still passed (docs/mutation.md).

One module, though long: docs/mutation.md names it and counts its tests in order.
"""

from __future__ import annotations

from collections import deque

import pytest

from hicache_contracts import ContractViolation, FinalAck, PoolHitsAck, ProgressAck
from hicache_contracts.engine import TraceCall, TraceTransfer, check_acks, check_operation, check_trace
from tests.engine.traces import (
    CHAIN,
    PAGE_SIZE,
    PREFIX,
    backup_trace,
    drop_call,
    duplicate_call,
    find,
    key,
    prefetch_trace,
    renumber,
    replace_call,
    with_fields,
)


def _clauses(report) -> set[str]:
    return {violation.clause for violation in report.violations}


def _messages(report, clause_id: str) -> list[str]:
    return [violation.message for violation in report.violations if violation.clause == clause_id]


def _frozen_acks(loaded_pages: int, slices: int = 3) -> tuple:
    """The acks of a prefetch whose loading stopped at ``loaded_pages``: one per slice, then the final."""
    tokens = loaded_pages * PAGE_SIZE
    progress = tuple(ProgressAck(operation_id="op", slice_index=n, tokens=tokens) for n in range(slices))
    return progress + (FinalAck(operation_id="op", tokens=tokens),)


def _without_hit_query(operation):
    return renumber(operation, [call for call in operation.calls if not call.method.startswith("batch_exists")])


def _short_derived_read(*, keep_reading: bool, sidecar: bool = False):
    """A hybrid prefetch whose first KV-derived read confirms 2 of its 4 pages (its KV read confirmed all 4)."""
    operation = prefetch_trace(hybrid=True)
    position = find(operation, "batch_get_v2", 0, derived=True)
    operation = replace_call(operation, position, result={"indexer": [True, True, False, False]})
    if not keep_reading:
        read = operation.calls[find(operation, "batch_get_v2", 0, derived=False)]
        operation = renumber(operation, list(operation.calls[: position + 1]) + ([read] if sidecar else []))
    return with_fields(operation, acks=_frozen_acks(2))


@pytest.mark.clause("HYB-1", "CTL-4", "CTL-5")
def test_a_short_kv_derived_read_ends_the_slice_and_the_io():
    """The slice loads what both its KV read and its KV-derived reads confirmed: 2 pages, and IO stops there."""
    report = check_operation(_short_derived_read(keep_reading=False))
    assert report.ok, report.format_table()
    continuing = check_operation(_short_derived_read(keep_reading=True))
    assert "CTL-4" in _clauses(continuing), continuing.format_table()


@pytest.mark.clause("CTL-4")
def test_reads_without_a_hit_query_are_judged_against_the_chain():
    """With no hit query and no agreed_pages the slices are the chain's: 4, 4 and a last, shorter one of 2."""
    report = check_operation(_without_hit_query(prefetch_trace()))
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-4")
def test_reads_without_a_hit_query_in_the_wrong_order_are_refused():
    operation = _without_hit_query(prefetch_trace())
    first, second = find(operation, "batch_get_v1", 0), find(operation, "batch_get_v1", 1)
    calls = list(operation.calls)
    calls[first], calls[second] = calls[second], calls[first]
    report = check_operation(renumber(operation, calls))
    assert "CTL-4" in _clauses(report), report.format_table()
    assert any(
        "reads pages [4, 8)" in message and "is pages [0, 4)" in message for message in _messages(report, "CTL-4")
    )


@pytest.mark.clause("CTL-3", "CTL-5", "CTL-6")
def test_a_prefetch_revoked_after_its_hit_query_agrees_on_nothing():
    """No read and no termination: nothing was agreed, so the acks are a final ack of 0 tokens alone."""
    operation = prefetch_trace()
    operation = renumber(operation, [call for call in operation.calls if call.method == "batch_exists"])
    revoked = with_fields(operation, acks=(FinalAck(operation_id="op", tokens=0),))
    report = check_operation(revoked)
    assert report.ok, report.format_table()
    with_a_progress_ack = with_fields(
        operation, acks=(ProgressAck(operation_id="op", slice_index=0, tokens=0), FinalAck(operation_id="op", tokens=0))
    )
    assert "CTL-5" in _clauses(check_operation(with_a_progress_ack))


@pytest.mark.clause("PFX-5")
@pytest.mark.parametrize(
    "build, entries", [(backup_trace, ("DIV-4",)), (prefetch_trace, ("DIV-3", "DIV-12"))], ids=["backup", "prefetch"]
)
def test_an_operation_level_finding_names_the_divergences_of_its_kind_of_operation(build, entries):
    """The operation's own prefix changed: 0.5.20 records it (per SGLang function), 0.5.23 does not."""
    operation = with_fields(build(), prefix_keys_after=PREFIX + (key(7),))
    old = check_operation(operation, sglang_version="0.5.20")
    assert old.ok, old.format_table()
    assert [(finding.clause, finding.divergence) for finding in old.divergences] == [("PFX-5", entries)]
    new = check_operation(operation, sglang_version="0.5.23")
    assert _clauses(new) == {"PFX-5"} and not new.divergences


@pytest.mark.clause("CTL-2", "PFX-2")
def test_a_misaligned_read_with_the_right_prefix_breaks_only_the_slicing():
    """A KV read at page 2 carrying the operation's prefix plus chain[:2] is a CTL-2 finding, not a PFX-2 one."""
    operation = prefetch_trace()
    position = find(operation, "batch_get_v1", 0)
    report = check_operation(replace_call(operation, position, keys=CHAIN[2:6], prefix_keys=PREFIX + CHAIN[:2]))
    assert "CTL-2" in _clauses(report) and "PFX-2" not in _clauses(report), report.format_table()


OFF_THE_GRID = [
    pytest.param(
        prefetch_trace,
        "batch_exists",
        "CTL-1",
        "hit query call 1 asks for 4 key(s) at page 5; slice 1 is pages [4, 8)",
        marks=pytest.mark.clause("CTL-1"),
        id="hit query",
    ),
    pytest.param(
        backup_trace,
        "batch_set_v1",
        "CTL-7",
        "backup write 1 writes pages [5...) but slice 1 is pages [4...)",
        marks=pytest.mark.clause("CTL-7"),
        id="backup write",
    ),
]
"""Slice 1 of the hit query and of the backup moved one page on: the trace, the call, its clause and message."""


@pytest.mark.parametrize("trace,method,clause_id,message", OFF_THE_GRID)
def test_a_slice_off_the_grid_is_named_with_its_slice(trace, method, clause_id, message):
    operation = trace()
    position = find(operation, method, 1)
    report = check_operation(replace_call(operation, position, keys=CHAIN[5:9], prefix_keys=PREFIX + CHAIN[:5]))
    assert _messages(report, clause_id) == [message]


@pytest.mark.clause("RANK-2", "CTL-4")
def test_reads_past_the_agreed_hit_are_named_with_their_pages():
    """Ranks agreed on 6 pages; the controller read all 10 anyway."""
    report = check_operation(with_fields(prefetch_trace(), agreed_pages=6))
    assert _messages(report, "RANK-2") == [
        "KV read of pages [4, 8) goes beyond the agreed hit of 6 pages",
        "KV read of pages [8, 10) goes beyond the agreed hit of 6 pages",
    ]
    assert any("slice 1 of the agreed keys is pages [4, 6)" in message for message in _messages(report, "CTL-4"))


@pytest.mark.clause("HYB-2")
def test_a_second_sidecar_read_is_named_by_its_number():
    operation = prefetch_trace(hybrid=True)
    report = check_operation(duplicate_call(operation, find(operation, "batch_get_v2", 0, derived=False)))
    assert any(message.startswith("sidecar read number 2:") for message in _messages(report, "HYB-2"))


@pytest.mark.clause("HYB-5")
def test_a_fourth_sidecar_write_is_named_by_its_number():
    """Two trailing-length groups over 10 pages in slices of 4 allow three batch_set_v2 calls, not four."""
    operation = backup_trace(hybrid=True)
    position = find(operation, "batch_set_v2", 1)
    report = check_operation(duplicate_call(duplicate_call(operation, position), position))
    assert any(message.startswith("sidecar write number 4:") for message in _messages(report, "HYB-5"))
    assert not any(message.startswith("sidecar write number 3:") for message in _messages(report, "HYB-5"))


@pytest.mark.clause("CTL-2", "CTL-4")
def test_an_oversized_last_read_without_a_hit_query_is_out_of_its_slice():
    """Without a hit query only the last read may be short; one longer than its slice breaks CTL-2 and CTL-4."""
    operation = _without_hit_query(prefetch_trace())
    operation = replace_call(operation, find(operation, "batch_get_v1", 1), keys=CHAIN[4:10], result=[True] * 6)
    report = check_operation(drop_call(operation, find(operation, "batch_get_v1", 2)))
    assert "KV read 1 reads pages [4, 10) but slice 1 of the agreed keys is pages [4, 8)" in _messages(report, "CTL-4")
    assert "CTL-2" in _clauses(report)


@pytest.mark.clause("PFX-2")
@pytest.mark.parametrize("extra, wrong", [((), False), ((key(9),), True)], ids=["right", "one-key-too-many"])
def test_an_empty_hit_query_carries_the_prefix_of_the_operations_start(extra, wrong):
    """A hit query for no keys asks about page 0: its prefix is the operation's own."""
    operation = prefetch_trace()
    operation = renumber(operation, [call for call in operation.calls if call.method == "batch_exists"][:1])
    operation = replace_call(operation, 0, keys=(), result=0, prefix_keys=PREFIX + extra)
    report = check_operation(with_fields(operation, acks=(FinalAck(operation_id="op", tokens=0),)))
    assert ("PFX-2" in _clauses(report)) == wrong, report.format_table()


@pytest.mark.clause("PFX-7")
@pytest.mark.parametrize(
    "state, how", [("absent", "no extra_info argument"), ("none", "extra_info=None")], ids=["absent", "none"]
)
def test_a_call_without_extra_info_is_named_by_how_it_left_it_out(state, how):
    operation = prefetch_trace()
    position = find(operation, "batch_get_v1", 0)
    report = check_operation(replace_call(operation, position, extra_info_state=state, prefix_keys=None))
    assert [message.endswith(f"but the call passed {how}") for message in _messages(report, "PFX-7")] == [True]


@pytest.mark.clause("HYB-1")
@pytest.mark.parametrize("start, ok", [(0, True), (1, False)], ids=["same-keys", "shifted-keys"])
def test_every_transfer_of_a_kv_derived_read_reads_the_slices_kv_keys(start, ok):
    """Two KV-derived pools read in one batch_get_v2: both carry the slice's keys."""
    operation = prefetch_trace(hybrid=True)
    transfers = (
        TraceTransfer(name="indexer", keys=CHAIN[0:4], indices_from_pool="kv"),
        TraceTransfer(name="nsa", keys=CHAIN[start : start + 4], indices_from_pool="kv"),
    )
    position = find(operation, "batch_get_v2", 0, derived=True)
    report = check_operation(
        replace_call(operation, position, transfers=transfers, result={"indexer": [True] * 4, "nsa": [True] * 4})
    )
    assert report.ok == ok and _clauses(report) <= {"HYB-1"}, report.format_table()


@pytest.mark.clause("HYB-1")
def test_a_kv_derived_read_whose_first_transfer_has_no_keys_breaks_hyb_1():
    """The call's keys are those of its first transfer that has keys; a first transfer of none (null) still differs
    from the second, which has the slice's."""
    operation = prefetch_trace(hybrid=True)
    transfers = (
        TraceTransfer(name="indexer", keys=None, indices_from_pool="kv"),
        TraceTransfer(name="nsa", keys=CHAIN[0:4], indices_from_pool="kv"),
    )
    position = find(operation, "batch_get_v2", 0, derived=True)
    report = check_operation(
        replace_call(operation, position, transfers=transfers, result={"indexer": [True] * 4, "nsa": [True] * 4})
    )
    named = [
        violation.call_index for violation in report.for_clause("HYB-1") if "'nsa' has other keys" in violation.message
    ]
    assert named == [position], report.format_table()


@pytest.mark.clause("RANK-2", "CTL-4")
def test_a_read_past_the_agreed_hit_is_a_rank_2_finding_not_an_ordering_one():
    """Ranks agreed on one slice; the reads of slices 1 and 2 break RANK-2 (there is no slice 1 to misorder)."""
    report = check_operation(with_fields(prefetch_trace(), agreed_pages=4))
    assert len(_messages(report, "RANK-2")) == 2 and "CTL-4" not in _clauses(report), report.format_table()


@pytest.mark.clause("CTL-4")
def test_the_read_of_the_slice_termination_named_is_refused():
    report = check_operation(with_fields(prefetch_trace(), terminated_before_slice=1))
    assert _messages(report, "CTL-4") == [
        "KV read of pages [4...) after the operation was terminated before slice 1",
        "KV read of pages [8...) after the operation was terminated before slice 1",
    ]


@pytest.mark.clause("CTL-2")
@pytest.mark.parametrize(
    "keys, where",
    [
        ((key(999),) + CHAIN[5:8], "its first key is not in the operation's chain"),
        (CHAIN[4:6] + CHAIN[7:9], "its keys are not the run of the chain that starts at page 4"),
    ],
    ids=["foreign-key", "gap"],
)
def test_keys_that_are_not_a_run_of_the_chain_are_named_by_what_is_wrong(keys, where):
    operation = prefetch_trace()
    report = check_operation(replace_call(operation, find(operation, "batch_get_v1", 1), keys=keys))
    assert _messages(report, "CTL-2") == [f"KV read batch_get_v1 with 4 key(s): {where}"]
    assert "PFX-2" not in _clauses(report)  # a call with no place in the chain is held to no prefix


@pytest.mark.clause("PFX-2")
def test_an_empty_hit_query_of_an_empty_chain_conforms():
    """An operation with no pages: the one hit query asks for nothing and carries the operation's prefix."""
    query = TraceCall(index=0, method="batch_exists", keys=(), result=0, extra_info_state="present", prefix_keys=PREFIX)
    report = check_trace([query], chain=[], prefix_keys=PREFIX, batch_size=4)
    assert report.ok, report.format_table()


@pytest.mark.clause("HYB-2", "HYB-3")
def test_a_hybrid_prefetch_without_a_hit_query_reads_its_sidecars_after_complete_kv():
    """No hit query and no agreed_pages: KV completes when every slice of the chain loaded, then sidecars follow."""
    report = check_operation(_without_hit_query(prefetch_trace(hybrid=True)))
    assert report.ok and "HYB-3" in report.checked, report.format_table()


@pytest.mark.clause("PFX-7")
@pytest.mark.parametrize("method, entries", [("batch_exists", ()), ("batch_get_v1", ("DIV-16",))])
def test_a_call_level_finding_is_a_divergence_only_where_that_kind_of_call_diverged(method, entries):
    """0.5.20 records PFX-7 for the KV read (_page_transfer_kv_batch) and for sidecar calls, not for the hit query."""
    operation = prefetch_trace()
    position = find(operation, method, 0)
    report = check_operation(
        replace_call(operation, position, extra_info_state="absent", prefix_keys=None), sglang_version="0.5.20"
    )
    assert tuple(entry for finding in report.divergences for entry in finding.divergence) == entries
    assert _clauses(report) == (set() if entries else {"PFX-7"}), report.format_table()


@pytest.mark.clause("CTL-2")
def test_an_oversized_kv_derived_read_is_counted_by_its_transfers_keys():
    """A batch_get_v2 has no keys of its own: its size is its transfers'."""
    operation = prefetch_trace(hybrid=True)
    position = find(operation, "batch_get_v2", 0, derived=True)
    transfers = (TraceTransfer(name="indexer", keys=CHAIN[0:5], indices_from_pool="kv"),)
    report = check_operation(replace_call(operation, position, transfers=transfers, result={"indexer": [True] * 5}))
    assert _messages(report, "CTL-2") == ["KV-derived read batch_get_v2 carries 5 keys, more than batch_size 4"]


def _named(report, clause_id: str) -> list:
    return [violation.call_index for violation in report.violations if violation.clause == clause_id]


STOPPED_EARLY = [
    pytest.param(prefetch_trace, "batch_exists", "CTL-1", marks=pytest.mark.clause("CTL-1"), id="hit query"),
    pytest.param(prefetch_trace, "batch_get_v1", "CTL-4", marks=pytest.mark.clause("CTL-4"), id="io"),
    pytest.param(backup_trace, "batch_set_v1", "CTL-13", marks=pytest.mark.clause("CTL-13"), id="backup"),
]
"""A trace whose calls of one method stop after the first of three fully done slices, and the clause that names it."""


@pytest.mark.parametrize("trace,method,clause_id", STOPPED_EARLY)
def test_a_stage_stopped_early_is_named_at_its_last_call(trace, method, clause_id):
    operation = trace()
    operation = drop_call(operation, find(operation, method, 2))
    operation = drop_call(operation, find(operation, method, 1))
    report = check_operation(operation)
    assert _named(report, clause_id) == [find(operation, method, 0)], report.format_table()


@pytest.mark.clause("HYB-2")
def test_a_sidecar_read_without_any_kv_io_is_named_once():
    """No KV read at all: the sidecar read breaks HYB-2 because KV did not complete, not because KV came later."""
    hybrid = prefetch_trace(hybrid=True)
    operation = renumber(hybrid, [hybrid.calls[find(hybrid, "batch_get_v2", 0, derived=False)]])
    messages = _messages(check_operation(operation), "HYB-2")
    assert len(messages) == 1 and messages[0].startswith("sidecar read although KV IO did not complete")


@pytest.mark.clause("HYB-2", "HYB-5")
@pytest.mark.parametrize("kind", ["read", "write"])
def test_a_sidecar_page_twice_in_the_only_sidecar_call_is_named_there(kind):
    twice = (TraceTransfer(name="swa", keys=(CHAIN[9], CHAIN[9]), hit_policy="trailing_pages"),)
    if kind == "read":
        operation, clause_id = prefetch_trace(hybrid=True), "HYB-2"
        position = find(operation, "batch_get_v2", 0, derived=False)
    else:
        operation, clause_id = backup_trace(hybrid=True), "HYB-5"
        operation = drop_call(operation, find(operation, "batch_set_v2", 0))
        position = find(operation, "batch_set_v2", 0)
    report = check_operation(replace_call(operation, position, transfers=twice, result={"swa": [True, True]}))
    assert _named(report, clause_id) == [position], report.format_table()


@pytest.mark.clause("HYB-2", "CTL-6")
def test_a_pool_hits_ack_with_no_progress_acks_is_in_order():
    """No slice was agreed: a pool-hits ack of zeros and a final ack of 0 tokens are the whole schedule."""
    acks = [PoolHitsAck(operation_id="op", pool_hits={"swa": 0}), FinalAck(operation_id="op", tokens=0)]
    report = check_acks(acks, slice_pages=[], loaded_pages=[], page_size=PAGE_SIZE)
    assert report.ok, report.format_table()


@pytest.mark.clause("PFX-4")
@pytest.mark.parametrize(
    "prefix, collapsed", [("empty", "[] collapsed to None"), ("anchor", "a list turned into None")], ids=str
)
def test_a_prefix_turned_into_none_is_named_by_what_it_was(prefix, collapsed):
    operation = prefetch_trace(prefix)
    report = check_operation(replace_call(operation, find(operation, "batch_get_v1", 0), prefix_keys=None))
    assert [message.endswith(f"({collapsed})") for message in _messages(report, "PFX-4")] == [True]


@pytest.mark.clause("CTL-11")
def test_acks_given_as_dicts_are_held_to_the_confirmed_pages():
    """The first read confirms 2 of 4 pages and IO stops; dict acks counting 4 pages overstate it (CTL-11)."""
    operation = prefetch_trace()
    operation = replace_call(operation, find(operation, "batch_get_v1", 0), result=[True, True, False, False])
    calls = [call for call in operation.calls if call.method != "batch_get_v1" or call.keys[0] == CHAIN[0]]

    def acks(pages: int) -> list[dict]:
        progress = [
            {"kind": "progress", "operation_id": "op", "slice_index": n, "tokens": pages * PAGE_SIZE} for n in range(3)
        ]
        return progress + [{"kind": "final", "operation_id": "op", "tokens": pages * PAGE_SIZE}]

    settings = dict(chain=CHAIN, prefix_keys=PREFIX, batch_size=4, page_size=PAGE_SIZE)
    assert check_trace(calls, acks=acks(2), **settings).ok
    overstated = check_trace(calls, acks=acks(4), **settings)
    assert [v.ack_index for v in overstated.violations if v.clause == "CTL-11"] == [0, 1, 2, 3]


@pytest.mark.clause("PFX-2")
def test_an_operation_prefix_given_as_any_sequence_of_keys_is_accepted():
    """check_trace takes the operation's prefix as any sequence of page keys, not only a list or tuple."""
    report = check_trace(prefetch_trace().calls, chain=CHAIN, prefix_keys=deque(PREFIX), batch_size=4)
    assert report.ok, report.format_table()


@pytest.mark.clause("HYB-2")
@pytest.mark.parametrize("hybrid", [False, True], ids=["plain", "hybrid"])
def test_the_acks_report_checks_hyb_2_only_with_a_pool_hits_ack(hybrid):
    operation = prefetch_trace(hybrid=hybrid)
    report = check_acks(operation.acks, slice_pages=[4, 4, 2], loaded_pages=[4, 4, 2], page_size=PAGE_SIZE)
    assert report.ok and ("HYB-2" in report.checked) == hybrid, report.format_table()


@pytest.mark.clause("CTL-2", "CTL-5", "RANK-2", "CTL-4", "CTL-7")
@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(batch_size=None), "check_trace.batch_size: must be an int >= 1 (got None) [CTL-2]"),
        (dict(page_size=0), "check_trace.page_size: must be an int >= 1 (got 0) [CTL-5]"),
        (dict(agreed_pages=-1), "check_trace.agreed_pages: must be an int >= 0 (got -1) [RANK-2]"),
        (
            dict(terminated_before_slice=True),
            "check_trace.terminated_before_slice: must be an int >= 0 (got True) [CTL-4]",
        ),
        (
            dict(page_size=16, backup_completed_tokens=-16),
            "check_trace.backup_completed_tokens: must be an int >= 0 (got -16) [CTL-7]",
        ),
    ],
    ids=["batch-size-none", "page-size-0", "agreed-negative", "terminated-bool", "backup-tokens-negative"],
)
def test_a_bad_optional_setting_is_named_not_skipped(arguments, message):
    """An optional setting may be left out (None); given, it must be an int in range."""
    with pytest.raises(ContractViolation) as error:
        check_trace([], chain=CHAIN, prefix_keys=None, **arguments)
    assert str(error.value) == message


@pytest.mark.clause("CTL-5")
def test_check_acks_needs_a_page_size():
    with pytest.raises(ContractViolation) as error:
        check_acks([], slice_pages=[4], loaded_pages=[4], page_size=None)
    assert str(error.value) == "check_acks.page_size: must be an int >= 1 (got None) [CTL-5]"


@pytest.mark.clause("PFX-2")
def test_a_kv_read_of_no_keys_is_held_to_no_prefix():
    """A read of no pages has no place in the chain, so no prefix is expected of it (its other findings stand)."""
    operation = prefetch_trace()
    position = find(operation, "batch_get_v1", 2)
    report = check_operation(replace_call(operation, position, keys=(), result=[], prefix_keys=PREFIX + CHAIN[:8]))
    assert not {"PFX-2", "PFX-4"} & _clauses(report), report.format_table()


@pytest.mark.clause("PFX-2", "PFX-4")
@pytest.mark.parametrize(
    "prefix, received, clause_id",
    [("empty", (), "PFX-4"), ("empty", CHAIN[:3], "PFX-2"), ("anchor", (), "PFX-2")],
    ids=["empty-stays-empty", "empty-grows-wrong", "anchor-emptied"],
)
def test_only_an_empty_prefix_that_never_grew_is_a_pfx_4_finding(prefix, received, clause_id):
    """The operation's prefix [] must grow like a list: a call at page 4 that still gets [] breaks PFX-4."""
    operation = prefetch_trace(prefix)
    report = check_operation(replace_call(operation, find(operation, "batch_get_v1", 1), prefix_keys=received))
    assert _clauses(report) == {clause_id}, report.format_table()


@pytest.mark.clause("CTL-1")
def test_a_first_hit_query_off_the_grid_is_refused():
    """Only the first hit query may cover the whole chain; a first one for pages [1, 5) is neither form."""
    operation = prefetch_trace()
    position = find(operation, "batch_exists", 0)
    report = check_operation(replace_call(operation, position, keys=CHAIN[1:5], prefix_keys=PREFIX + CHAIN[:1]))
    assert _messages(report, "CTL-1")[:1] == ["hit query call 0 asks for 4 key(s) at page 1; slice 0 is pages [0, 4)"]


@pytest.mark.clause("HYB-2")
@pytest.mark.parametrize("query", [True, False], ids=["after-a-hit-query", "without-one"])
def test_sidecars_read_after_a_short_slice_are_refused(query):
    """KV stopped at 2 pages: the sidecars are not read then."""
    operation = _short_derived_read(keep_reading=False, sidecar=True)
    report = check_operation(operation if query else _without_hit_query(operation))
    assert any(m.startswith("sidecar read although KV IO did not complete") for m in _messages(report, "HYB-2"))


@pytest.mark.clause("HYB-2")
def test_pool_hits_after_io_stopped_early_are_refused():
    """One slice of three read: KV did not complete, so the pool-hits ack must report no hits."""
    acks = [
        ProgressAck(operation_id="op", slice_index=0, tokens=4 * PAGE_SIZE),
        PoolHitsAck(operation_id="op", pool_hits={"swa": 10}),
        FinalAck(operation_id="op", tokens=4 * PAGE_SIZE),
    ]
    report = check_acks(acks, slice_pages=[4, 4, 2], loaded_pages=[4], page_size=PAGE_SIZE)
    assert any("although KV did not complete" in message for message in _messages(report, "HYB-2"))


@pytest.mark.clause("HYB-3")
def test_a_trailing_sidecar_off_the_chain_is_a_window_finding():
    operation = prefetch_trace(hybrid=True)
    position = find(operation, "batch_get_v2", 0, derived=False)
    off_chain = (TraceTransfer(name="swa", keys=(key(500), key(501)), hit_policy="trailing_pages"),)
    report = check_operation(replace_call(operation, position, transfers=off_chain))
    assert _clauses(report) == {"HYB-3"}, report.format_table()


@pytest.mark.clause("PFX-5")
def test_with_the_feature_off_no_prefix_is_held_unchanged():
    assert "PFX-5" not in check_operation(prefetch_trace("none")).checked


@pytest.mark.clause("HYB-3")
def test_an_all_pages_sidecar_is_not_held_to_a_trailing_window():
    """A second sidecar call reads a pool of every page (hit_policy all_pages): no window applies to it."""
    operation = prefetch_trace(hybrid=True)
    read = operation.calls[find(operation, "batch_get_v2", 0, derived=False)]
    every = (TraceTransfer(name="mamba", keys=CHAIN, hit_policy="all_pages"),)
    extra = TraceCall(
        **{
            **read.model_dump(exclude_unset=True),
            "transfers": every,
            "result": {"mamba": [True] * 10},
            "prefix_keys": PREFIX,
        }
    )
    report = check_operation(renumber(operation, [*operation.calls, extra]))
    assert report.ok, report.format_table()


class _MethodOnly:
    method = "batch_exists"


@pytest.mark.clause("PFX-1", "PFX-2", "CTL-5")
@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: check_trace([], chain=CHAIN, prefix_keys=b"ab"),  # type: ignore[arg-type]
            "check_trace.prefix_keys: must be None or a sequence of page keys (got b'ab') [PFX-1]",
        ),
        (
            lambda: check_trace("ab", chain=CHAIN, prefix_keys=None),
            "check_trace.calls: must be a list of recorded calls (rec.calls) (got 'ab') [PFX-2]",
        ),
        (
            lambda: check_trace([_MethodOnly()], chain=CHAIN, prefix_keys=None),
            "must be a RecordedCall or TraceCall",
        ),
        (
            lambda: check_acks("ab", slice_pages=[4], loaded_pages=[4], page_size=PAGE_SIZE),
            "check_acks.acks: must be a sequence of acks (got 'ab') [CTL-5]",
        ),
    ],
    ids=["prefix-bytes", "calls-str", "call-without-extra-info-state", "acks-str"],
)
def test_a_string_or_a_half_call_is_refused_by_name(call, message):
    with pytest.raises(ContractViolation) as error:
        call()
    assert message in str(error.value)
