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

from hicache_contracts import ContractViolation, FinalAck, ProgressAck
from hicache_contracts.engine import TraceCall, TraceOperation, TraceTransfer, check_acks, check_operation
from tests.engine.traces import (
    CHAIN,
    PAGE_SIZE,
    PREFIX,
    backup_trace,
    drop_call,
    duplicate_call,
    find,
    prefetch_trace,
    renumber,
    replace_call,
)


def _named(report, clause_id: str) -> list:
    return [violation.call_index for violation in report.violations if violation.clause == clause_id]


def _clauses(report) -> set[str]:
    return {violation.clause for violation in report.violations}


def _messages(report, clause_id: str) -> list[str]:
    return [violation.message for violation in report.for_clause(clause_id)]


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


@pytest.mark.clause("CTL-7")
@pytest.mark.parametrize(
    "empty",
    [
        dict(method="batch_set_v1", raised="RuntimeError: store down"),
        dict(method="batch_set_v1", result=[]),
        dict(method="batch_set", result=False),
    ],
    ids=["raised", "v1-confirms-none", "legacy-false"],
)
def test_writes_of_no_keys_past_the_last_slice_are_no_failed_slice(empty):
    """CTL-7 counts slices of the chain; a write of no keys after the last one is none of them. It fails no page
    (a write that raised or said False over no pages included), so a later write is not one after a failed slice."""
    operation = _short_backup(last="ok")
    extra = [TraceCall(index=2, keys=(), **empty), TraceCall(index=3, method="batch_set_v1", keys=(), result=[])]
    report = check_operation(renumber(operation, [*operation.calls, *extra]))
    assert "CTL-7" not in _clauses(report), report.format_table()


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


TWICE = [
    pytest.param(
        prefetch_trace, "batch_get_v2", 0, False, "had a page read twice", marks=pytest.mark.clause("HYB-2"), id="read"
    ),
    pytest.param(backup_trace, "batch_set_v2", 1, None, "written twice", marks=pytest.mark.clause("HYB-5"), id="write"),
]
"""A hybrid trace, its sidecar call to duplicate (method, number, KV-derived or not) and what the finding says."""


@pytest.mark.parametrize("trace,method,number,derived,finding", TWICE)
def test_a_sidecar_page_moved_twice_over_two_calls_is_named_at_the_last(trace, method, number, derived, finding):
    operation = trace(hybrid=True)
    operation = duplicate_call(operation, find(operation, method, number, derived=derived))
    last = find(operation, method, number + 1, derived=derived)
    twice = [v.call_index for v in check_operation(operation).violations if finding in v.message]
    assert twice == [last]


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


# ------------------------------------------------------------------ every call is looked at, not only the first
@pytest.mark.clause("CTL-7")
def test_every_write_after_a_failed_slice_is_named():
    operation = backup_trace()
    operation = replace_call(operation, find(operation, "batch_set_v1", 0), result=[True, False, True, True])
    later = [find(operation, "batch_set_v1", number) for number in (1, 2)]
    assert _named(check_operation(operation), "CTL-7")[:2] == later


@pytest.mark.clause("CTL-1")
def test_every_hit_query_after_a_short_slice_is_named():
    operation = prefetch_trace()
    operation = replace_call(operation, find(operation, "batch_exists", 0), result=2)
    later = [find(operation, "batch_exists", number) for number in (1, 2)]
    continued = [v.call_index for v in check_operation(operation).violations if "continued" in v.message]
    assert continued == later


@pytest.mark.clause("PFX-1", "PFX-4", "PFX-7")
@pytest.mark.parametrize(
    "first, clause_id",
    [
        ({"prefix_keys": None, "prefix_keys_problem": "prefix_keys is a str, not a sequence of keys"}, "PFX-1"),
        ({"prefix_keys": None, "extra_info_state": "absent"}, "PFX-7"),
    ],
    ids=["bad-prefix", "no-extra-info"],
)
def test_a_call_after_a_prefix_finding_is_still_checked(first, clause_id):
    operation = prefetch_trace()
    operation = replace_call(operation, 0, **first)
    operation = replace_call(operation, 1, **first)
    operation = replace_call(operation, 2, prefix_keys=None)
    report = check_operation(operation)
    assert _named(report, clause_id) == [0, 1] and _named(report, "PFX-4") == [2], report.format_table()


@pytest.mark.clause("PFX-2", "CTL-2")
@pytest.mark.parametrize("keys", [(), ("f" * 64,)], ids=["no-keys", "off-the-chain"])
def test_a_read_after_an_unlocated_call_is_still_located(keys):
    """A hit query of no keys, or of a key outside the chain, comes first: the later reads keep their offsets."""
    operation = prefetch_trace()
    operation = renumber(operation, [TraceCall(index=0, method="batch_exists", keys=keys, result=0), *operation.calls])
    position = find(operation, "batch_get_v1", 1)
    report = check_operation(replace_call(operation, position, prefix_keys=PREFIX))
    assert _named(report, "PFX-2") == [position], report.format_table()


@pytest.mark.clause("CTL-4")
def test_io_stopped_after_two_reads_is_named_at_the_second():
    operation = prefetch_trace()
    operation = drop_call(operation, find(operation, "batch_get_v1", 2))
    assert _named(check_operation(operation), "CTL-4") == [find(operation, "batch_get_v1", 1)]


# ------------------------------------------------------------------ sidecars
def _sidecar_read(operation: TraceOperation, *transfers: TraceTransfer, prefix=None) -> TraceOperation:
    position = find(operation, "batch_get_v2", 0, derived=False)
    changes = {"transfers": transfers, "result": {t.name: [True] * len(t.keys or ()) for t in transfers}}
    return replace_call(operation, position, **changes, **({} if prefix is None else {"prefix_keys": prefix}))


@pytest.mark.clause("HYB-3")
def test_a_window_read_over_two_calls_is_named_at_the_first():
    operation = prefetch_trace(hybrid=True)
    first = find(operation, "batch_get_v2", 0, derived=False)
    operation = duplicate_call(operation, first)
    assert _named(check_operation(operation), "HYB-3") == [first]


@pytest.mark.clause("HYB-3")
def test_a_trailing_pool_after_an_all_pages_pool_is_held_to_its_window():
    every = TraceTransfer(name="mamba", keys=CHAIN[8:10], hit_policy="all_pages")
    early = TraceTransfer(name="swa", keys=CHAIN[6:8], hit_policy="trailing_pages")
    report = check_operation(_sidecar_read(prefetch_trace(hybrid=True), every, early))
    assert "HYB-3" in report.violated, report.format_table()


@pytest.mark.clause("PFX-9")
@pytest.mark.parametrize(
    "first",
    [TraceTransfer(name="empty", keys=()), TraceTransfer(name="other", keys=("f" * 64,))],
    ids=["no-keys", "off-the-chain"],
)
def test_a_sidecar_prefix_is_judged_by_its_transfers_on_the_chain(first):
    swa = TraceTransfer(name="swa", keys=CHAIN[8:10], hit_policy="trailing_pages")
    report = check_operation(_sidecar_read(prefetch_trace(hybrid=True), first, swa, prefix=PREFIX))
    (message,) = [violation.message for violation in report.for_clause("PFX-9")]
    assert "transfer 'swa' starts at page 8" in message, message


@pytest.mark.clause("HYB-2")
def test_a_sidecar_read_of_no_transfers_is_one_read():
    operation = prefetch_trace(hybrid=True)
    position = find(operation, "batch_get_v2", 0, derived=False)
    report = check_operation(replace_call(operation, position, transfers=(), result={}))
    assert not [message for message in _messages(report, "HYB-2") if "number" in message], report.format_table()


@pytest.mark.clause("HYB-1")
def test_a_kv_derived_transfer_with_other_keys_is_named_beside_the_first():
    operation = prefetch_trace(hybrid=True)
    transfers = (
        TraceTransfer(name="indexer", keys=CHAIN[0:4], indices_from_pool="kv"),
        TraceTransfer(name="nsa", keys=CHAIN[1:5], indices_from_pool="kv"),
    )
    position = find(operation, "batch_get_v2", 0, derived=True)
    report = check_operation(replace_call(operation, position, transfers=transfers))
    assert any("transfer 'nsa' has other keys than transfer 'indexer'" in m for m in _messages(report, "HYB-1"))


# ------------------------------------------------------------------ pages, counts and the chain
@pytest.mark.clause("CTL-2", "PFX-2")
@pytest.mark.parametrize("start", [1, 2, 3])
def test_a_read_off_the_grid_with_the_right_prefix_is_no_prefix_finding(start):
    operation = prefetch_trace()
    position = find(operation, "batch_get_v1", 0)
    report = check_operation(
        replace_call(operation, position, keys=CHAIN[start : start + 4], prefix_keys=PREFIX + CHAIN[:start])
    )
    assert "CTL-2" in report.violated and "PFX-2" not in report.violated, report.format_table()


@pytest.mark.clause("CTL-2")
def test_a_call_of_one_key_is_named_as_one_key():
    operation = prefetch_trace()
    report = check_operation(
        replace_call(operation, find(operation, "batch_get_v1", 2), keys=("f" * 64,), result=[True])
    )
    assert any(m.startswith("KV read batch_get_v1 with 1 key: ") for m in _messages(report, "CTL-2")), (
        report.format_table()
    )


def _cut_at_the_hit(chain_pages: int = 4) -> TraceOperation:
    """Slice 0 fully hit, the query of slice 1 raised: the hit is 4 pages, slice 0 read, ``chain`` cut to it."""
    operation = prefetch_trace()
    operation = drop_call(operation, find(operation, "batch_exists", 2))
    operation = replace_call(operation, find(operation, "batch_exists", 1), result=None, raised="OSError: down")
    for number in (2, 1):
        operation = drop_call(operation, find(operation, "batch_get_v1", number))
    acks = (
        ProgressAck(operation_id="op", slice_index=0, tokens=4 * PAGE_SIZE),
        FinalAck(operation_id="op", tokens=4 * PAGE_SIZE),
    )
    return operation.model_copy(update={"chain": CHAIN[:chain_pages], "acks": acks})


@pytest.mark.clause("CTL-1", "CTL-11")
def test_a_raising_hit_query_finds_nothing_and_the_cut_chain_is_completed():
    report = check_operation(_cut_at_the_hit())
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-1")
def test_an_unchecked_call_before_the_hit_query_does_not_stop_the_chain_from_being_completed():
    operation = _cut_at_the_hit()
    operation = renumber(operation, [TraceCall(index=0, method="get_stats"), *operation.calls])
    report = check_operation(operation)
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-2")
def test_a_chain_longer_than_the_hit_is_not_completed():
    operation = _cut_at_the_hit(chain_pages=5)
    report = check_operation(operation)
    assert _named(report, "CTL-2") == [find(operation, "batch_exists", 1)], report.format_table()


@pytest.mark.clause("CTL-1", "CTL-2")
def test_a_chain_is_completed_only_up_to_the_first_short_slice():
    """Slice 0 hit 2 of 4, and the query went on: the chain cut at 2 pages is completed to slice 0's keys only."""
    operation = prefetch_trace()
    operation = replace_call(operation, find(operation, "batch_exists", 0), result=2)
    operation = operation.model_copy(update={"chain": CHAIN[:2]})
    report = check_operation(operation)
    assert find(operation, "batch_exists", 1) in _named(report, "CTL-2"), report.format_table()


@pytest.mark.clause("CTL-7")
def test_a_legacy_write_of_a_one_page_slice_that_returns_false_completes_nothing():
    operation = _short_backup(last="ok")
    calls = [
        TraceCall(index=0, method="batch_set", keys=CHAIN[:4], result=True),
        TraceCall(index=1, method="batch_set", keys=CHAIN[4:5], result=False),
    ]
    report = check_operation(
        operation.model_copy(update={"calls": tuple(calls), "backup_completed_tokens": 4 * PAGE_SIZE})
    )
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-5")
def test_check_acks_refuses_a_negative_loaded_count():
    with pytest.raises(ContractViolation, match=r"check_acks\.loaded_pages\[0\]: must be an int >= 0"):
        check_acks([], slice_pages=(4,), loaded_pages=(-1,), page_size=PAGE_SIZE)


@pytest.mark.clause("CTL-1")
def test_a_hit_query_one_page_short_of_the_chain_stopped_early():
    """A chain of 5 pages, slice 0 (4 pages) queried and fully hit, slice 1 (1 page) never queried."""
    query = TraceCall(index=0, method="batch_exists", keys=CHAIN[:4], result=4)
    operation = TraceOperation(chain=CHAIN[:5], prefix_keys=None, batch_size=4, calls=(query,))
    assert _messages(check_operation(operation), "CTL-1") == [
        "hit query stopped after 4 of 5 pages although every slice was fully hit"
    ]


@pytest.mark.clause("HYB-3")
def test_an_all_pages_pool_of_a_few_pages_is_not_held_to_a_window():
    swa = TraceTransfer(name="swa", keys=CHAIN[8:10], hit_policy="trailing_pages")
    few = TraceTransfer(name="mamba", keys=CHAIN[0:2], hit_policy="all_pages")
    report = check_operation(_sidecar_read(prefetch_trace(hybrid=True), swa, few))
    assert "HYB-3" in report.checked and "HYB-3" not in report.violated, report.format_table()
