"""The trace checker's findings name the right call, ack and page, and its counters start where they must.

Scenario: the hand-written traces of tests/engine/traces.py (10 pages in
slices of 4) and a backup of 5 pages (a last slice of one page), changed at
one edge: a query or a backup that stops one slice early, a sidecar page read
twice over two calls, a write that raises on a one-page slice, an ack of
another operation last. Expected: the finding names the last call or the
offending ack, the page a window starts at, and a raise confirms nothing.
Why it matters: each is a change to the checker (docs/mutation.md) that every
other test let through.
"""

from __future__ import annotations

import pytest

from hicache_contracts import FinalAck, ProgressAck
from hicache_contracts.engine import TraceCall, TraceOperation, TraceTransfer, check_acks, check_operation
from tests.engine.traces import (
    CHAIN,
    PAGE_SIZE,
    backup_trace,
    drop_call,
    duplicate_call,
    find,
    prefetch_trace,
    replace_call,
)


def _named(report, clause_id: str) -> list:
    return [violation.call_index for violation in report.violations if violation.clause == clause_id]


def _short_backup(*, last: str) -> TraceOperation:
    """A backup of 5 pages in slices of 4: the first write confirms its 4 pages; the last one-page slice is
    ``"raised"`` (its write raised), ``"missing"`` (never written) or ``"ok"``."""
    calls = [TraceCall(index=0, method="batch_set_v1", keys=CHAIN[:4], result=[True] * 4)]
    if last == "raised":
        calls.append(TraceCall(index=1, method="batch_set_v1", keys=CHAIN[4:5], raised="RuntimeError: store down"))
    elif last == "ok":
        calls.append(TraceCall(index=1, method="batch_set_v1", keys=CHAIN[4:5], result=[True]))
    return TraceOperation(
        operation_id="backup",
        chain=CHAIN[:5],
        prefix_keys=None,
        batch_size=4,
        page_size=PAGE_SIZE,
        calls=tuple(calls),
        backup_completed_tokens=(5 if last == "ok" else 4) * PAGE_SIZE,
    )


@pytest.mark.clause("CTL-7")
@pytest.mark.parametrize("last", ["raised", "ok"])
def test_a_raising_write_of_a_one_page_slice_completes_nothing(last):
    report = check_operation(_short_backup(last=last))
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-13")
def test_a_backup_one_page_short_is_stopped_early():
    report = check_operation(_short_backup(last="missing"))
    assert [violation.message for violation in report.for_clause("CTL-13")] == [
        "backup stopped after 4 of 5 pages without a failed slice"
    ]


@pytest.mark.clause("CTL-13")
def test_a_backup_stopped_after_two_writes_is_named_at_the_second():
    operation = backup_trace()
    operation = drop_call(operation, find(operation, "batch_set_v1", 2))
    assert _named(check_operation(operation), "CTL-13") == [find(operation, "batch_set_v1", 1)]


@pytest.mark.clause("CTL-1")
def test_a_hit_query_stopped_after_two_slices_is_named_at_the_second():
    operation = prefetch_trace()
    operation = drop_call(operation, find(operation, "batch_exists", 2))
    assert _named(check_operation(operation), "CTL-1") == [find(operation, "batch_exists", 1)]


@pytest.mark.clause("HYB-2")
def test_a_sidecar_page_read_twice_over_two_calls_is_named_at_the_last():
    operation = prefetch_trace(hybrid=True)
    operation = duplicate_call(operation, find(operation, "batch_get_v2", 0, derived=False))
    second = find(operation, "batch_get_v2", 1, derived=False)
    twice = [v.call_index for v in check_operation(operation).violations if "had a page read twice" in v.message]
    assert twice == [second]


@pytest.mark.clause("HYB-3")
def test_a_trailing_window_off_the_hit_names_the_page_it_starts_at():
    operation = prefetch_trace(hybrid=True)
    position = find(operation, "batch_get_v2", 0, derived=False)
    early = (TraceTransfer(name="swa", keys=CHAIN[6:8], hit_policy="trailing_pages"),)
    report = check_operation(replace_call(operation, position, transfers=early))
    (message,) = [violation.message for violation in report.for_clause("HYB-3")]
    assert "reads 2 key(s) from page 6;" in message, message


@pytest.mark.clause("CTL-5", "HYB-1")
def test_a_raising_kv_derived_read_loads_nothing_of_its_slice():
    """The last slice's KV-derived read raises: that slice loads 0 pages, so the acks freeze at 8 pages."""
    operation = prefetch_trace(hybrid=True)
    operation = drop_call(operation, find(operation, "batch_get_v2", 0, derived=False))  # KV did not complete
    position = find(operation, "batch_get_v2", 2, derived=True)
    operation = replace_call(operation, position, result=None, raised="RuntimeError: indexer down")
    frozen = 8 * PAGE_SIZE
    acks = tuple(
        ProgressAck(operation_id="op", slice_index=n, tokens=min(4 * (n + 1), 8) * PAGE_SIZE) for n in range(3)
    )
    report = check_operation(
        operation.model_copy(update={"acks": acks + (FinalAck(operation_id="op", tokens=frozen),)})
    )
    assert report.ok, report.format_table()


@pytest.mark.clause("PFX-4")
def test_every_prefix_turned_into_none_is_named():
    operation = prefetch_trace()
    for number in (0, 1):
        operation = replace_call(operation, find(operation, "batch_exists", number), prefix_keys=None)
    assert _named(check_operation(operation), "PFX-4") == [0, 1]


@pytest.mark.clause("CTL-5")
def test_the_acks_belong_to_the_operation_of_the_first_ack():
    """No operation_id given: the acks are the first ack's operation's, so a last ack of another is the finding."""
    acks = [
        ProgressAck(operation_id="op", slice_index=0, tokens=4 * PAGE_SIZE),
        ProgressAck(operation_id="op", slice_index=1, tokens=6 * PAGE_SIZE),
        FinalAck(operation_id="other", tokens=6 * PAGE_SIZE),
    ]
    report = check_acks(acks, slice_pages=(4, 2), loaded_pages=(4, 2), page_size=PAGE_SIZE)
    assert report.operation_id == "op"
    assert [violation.ack_index for violation in report.for_clause("CTL-5")] == [2]
