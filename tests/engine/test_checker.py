"""The trace checker on hand-written traces: conforming ones pass, and each planted change is named by its clause.

Scenario: a conforming prefetch or backup of 10 pages in slices of 4, with
one thing changed. Expected: the report names exactly the clause that change
breaks (and possibly others it implies). Why this matters: the checker is
only useful if every rule it claims to check can be seen to fail.
"""

from __future__ import annotations

from typing import Union

import pytest

from hicache_contracts import ContractViolation
from hicache_contracts.engine import TraceOperation, check_operation, check_trace
from tests.engine.traces import (
    BATCH,
    CHAIN,
    PAGE_SIZE,
    PREFIX,
    backup_trace,
    drop_call,
    duplicate_call,
    find,
    move_call,
    prefetch_trace,
    replace_call,
    with_fields,
)

EVERY_PREFIX = ["none", "empty", "anchor"]


@pytest.mark.clause(
    "PFX-1",
    "PFX-2",
    "PFX-3",
    "PFX-4",
    "PFX-7",
    "PFX-8",
    "PFX-9",
    "CTL-1",
    "CTL-2",
    "CTL-4",
    "CTL-5",
    "CTL-6",
    "HYB-1",
    "HYB-2",
    "HYB-3",
    "RANK-2",
    "RANK-3",
)
@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("prefix", EVERY_PREFIX)
def test_conforming_prefetch_passes(prefix, hybrid):
    report = check_operation(prefetch_trace(prefix, hybrid=hybrid))
    assert report.ok, report.format_table()
    expected = {"CTL-1", "CTL-2", "CTL-4", "CTL-5", "CTL-6", "CTL-11", "RANK-2", "RANK-3", "PFX-1"}
    expected |= {"PFX-3"} if prefix == "none" else {"PFX-2", "PFX-4", "PFX-7"}
    if hybrid:
        expected |= {"PFX-8", "HYB-1", "HYB-2", "HYB-3"} | ({"PFX-9"} if prefix != "none" else set())
    assert expected <= set(report.checked)


@pytest.mark.clause("CTL-7", "CTL-13", "HYB-5", "PFX-9")
@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("prefix", EVERY_PREFIX)
def test_conforming_backup_passes(prefix, hybrid):
    report = check_operation(backup_trace(prefix, hybrid=hybrid))
    assert report.ok, report.format_table()
    assert {"CTL-7", "CTL-13"} <= set(report.checked)
    assert ("HYB-5" in report.checked) == hybrid


def _prefetch(prefix="anchor", hybrid=False, **operation):
    return prefetch_trace(prefix, hybrid=hybrid, **operation)


def _read(trace, number, derived=None):
    method = "batch_get_v2" if derived is not None else "batch_get_v1"
    return find(trace, method, number, derived=derived)


PLANTED = {
    # ---- tri-state (PFX-1, PFX-3, PFX-4, PFX-7)
    "feature off but a call carries []": ("PFX-3", lambda: replace_call(_prefetch("none"), 0, prefix_keys=())),
    "feature on but no extra_info argument": (
        "PFX-7",
        lambda: replace_call(_prefetch(), 3, extra_info_state="absent", prefix_keys=None),
    ),
    "feature on but extra_info=None": (
        "PFX-7",
        lambda: replace_call(_prefetch(), 3, extra_info_state="none", prefix_keys=None),
    ),
    "[] collapsed to None": ("PFX-4", lambda: replace_call(_prefetch("empty"), 0, prefix_keys=None)),
    "a non-empty list turned into None": ("PFX-4", lambda: replace_call(_prefetch(), 4, prefix_keys=None)),
    "[] never grows": ("PFX-4", lambda: replace_call(_prefetch("empty"), 1, prefix_keys=())),
    "a prefix that is not a sequence": (
        "PFX-1",
        lambda: replace_call(
            _prefetch(), 0, prefix_keys=None, prefix_keys_problem="prefix_keys is a str, not a sequence of keys"
        ),
    ),
    # ---- contiguity (PFX-2, PFX-9) and same batch (PFX-8)
    "a read whose prefix skips a key": ("PFX-2", lambda: replace_call(_prefetch(), 4, prefix_keys=PREFIX + CHAIN[1:4])),
    "a hit query whose prefix repeats the slice before": (
        "PFX-2",
        lambda: replace_call(_prefetch(), 2, prefix_keys=PREFIX + CHAIN[:4]),
    ),
    "a sidecar read with the operation-level prefix": (
        "PFX-9",
        lambda: replace_call(
            _prefetch(hybrid=True), find(_prefetch(hybrid=True), "batch_get_v2", 0, derived=False), prefix_keys=PREFIX
        ),
    ),
    "a v2 write whose prefix does not join its keys": (
        "PFX-9",
        lambda: replace_call(backup_trace(hybrid=True), 1, prefix_keys=PREFIX + CHAIN[:4]),
    ),
    "a KV-derived v2 write with an extended prefix": (
        "PFX-9",
        lambda: replace_call(backup_trace(hybrid=True), 0, prefix_keys=PREFIX + CHAIN[:1]),
    ),
    "trailing groups merged into one call with one prefix": (
        "PFX-9",
        lambda: replace_call(
            backup_trace(hybrid=True),
            0,
            transfers=(
                {"name": "indexer", "keys": CHAIN, "indices_from_pool": "kv"},
                {"name": "swa", "keys": CHAIN[-2:], "hit_policy": "trailing_pages"},
            ),
        ),
    ),
    "a KV-derived read with the operation's prefix": (
        "PFX-8",
        lambda: replace_call(
            _prefetch(hybrid=True), _read(_prefetch(hybrid=True), 1, derived=True), prefix_keys=PREFIX
        ),
    ),
    "a KV-derived read without extra_info": (
        "PFX-8",
        lambda: replace_call(
            _prefetch(hybrid=True),
            _read(_prefetch(hybrid=True), 0, derived=True),
            extra_info_state="absent",
            prefix_keys=None,
        ),
    ),
    # ---- immutability (PFX-5)
    "a prefix changed after the call": (
        "PFX-5",
        lambda: replace_call(_prefetch(), 1, prefix_keys_after=PREFIX + CHAIN[:8]),
    ),
    "the operation's own prefix changed": (
        "PFX-5",
        lambda: with_fields(_prefetch(), prefix_keys_after=PREFIX + CHAIN[:4]),
    ),
    # ---- slicing (CTL-1, CTL-2, CTL-4) and agreement (RANK-2)
    "a read of more than batch_size keys": ("CTL-2", lambda: replace_call(_prefetch(), 3, keys=CHAIN[:5])),
    "a read that starts inside a slice": (
        "CTL-2",
        lambda: replace_call(_prefetch(), 4, keys=CHAIN[2:6], prefix_keys=PREFIX + CHAIN[:2]),
    ),
    "a call for keys of another chain": (
        "CTL-2",
        lambda: replace_call(_prefetch(), 3, keys=tuple(reversed(CHAIN[:4]))),
    ),
    "hit query goes on after a short slice": ("CTL-1", lambda: replace_call(_prefetch(), 0, result=3)),
    "hit query stops although every slice hit": (
        "CTL-1",
        lambda: with_fields(drop_call(_prefetch(), 2), agreed_pages=10),
    ),
    "hit query out of order": ("CTL-1", lambda: move_call(_prefetch(), 1, 0)),
    "IO goes on after a short slice": ("CTL-4", lambda: replace_call(_prefetch(), 3, result=[True, True, False, True])),
    "IO goes on after termination": ("CTL-4", lambda: with_fields(_prefetch(), terminated_before_slice=1)),
    "IO stops without a reason": ("CTL-4", lambda: drop_call(_prefetch(), 5)),
    "IO reads a slice twice": ("CTL-4", lambda: duplicate_call(_prefetch(), 3)),
    "IO beyond the agreed hit": ("RANK-2", lambda: with_fields(_prefetch(), agreed_pages=6)),
    # ---- hybrid (HYB-1, HYB-2, HYB-3, HYB-5)
    "a KV-derived read in a slice with no KV read": (
        "HYB-1",
        lambda: drop_call(_prefetch(hybrid=True), _read(_prefetch(hybrid=True), 2)),
    ),
    "sidecars read although KV was short": (
        "HYB-2",
        lambda: replace_call(_prefetch(hybrid=True), _read(_prefetch(hybrid=True), 2), result=[True, False]),
    ),
    "sidecars read twice": (
        "HYB-2",
        lambda: duplicate_call(_prefetch(hybrid=True), find(_prefetch(hybrid=True), "batch_get_v2", 0, derived=False)),
    ),
    "sidecars read before KV finished": (
        "HYB-2",
        lambda: move_call(_prefetch(hybrid=True), find(_prefetch(hybrid=True), "batch_get_v2", 0, derived=False), 3),
    ),
    "a trailing window that does not end at the hit": (
        "HYB-3",
        lambda: replace_call(
            _prefetch(hybrid=True),
            find(_prefetch(hybrid=True), "batch_get_v2", 0, derived=False),
            transfers=({"name": "swa", "keys": CHAIN[6:8], "hit_policy": "trailing_pages"},),
        ),
    ),
    "sidecars written after KV": ("HYB-5", lambda: move_call(backup_trace(hybrid=True), 0, 4)),
    "sidecars written in more calls than needed": (
        "HYB-5",
        lambda: duplicate_call(duplicate_call(backup_trace(hybrid=True), 1), 1),
    ),
    "a sidecar page written twice": ("HYB-5", lambda: duplicate_call(backup_trace(hybrid=True), 1)),
    "whole-chain hit query goes on after a short answer": (
        "CTL-1",
        lambda: replace_call(duplicate_call(_prefetch(whole_chain_query=True), 0), 0, result=7),
    ),
    # ---- backup (CTL-7, CTL-13)
    "backup goes on after a failed slice": (
        "CTL-7",
        lambda: replace_call(backup_trace(), 0, result=[True, False, True, True]),
    ),
    "backup reports tokens it did not complete": (
        "CTL-7",
        lambda: with_fields(backup_trace(), backup_completed_tokens=4 * PAGE_SIZE),
    ),
    "backup stops without a failed slice": (
        "CTL-13",
        lambda: with_fields(drop_call(backup_trace(), 2), backup_completed_tokens=8 * PAGE_SIZE),
    ),
    "backup writes slices out of order": ("CTL-7", lambda: move_call(backup_trace(), 2, 0)),
    # ---- acks against the trace (CTL-5, CTL-6, CTL-11)
    "an ack counts a page the backend did not confirm": (
        "CTL-11",
        lambda: replace_call(_prefetch(), 5, result=[True, False]),
    ),
}


@pytest.mark.clause(
    "PFX-1",
    "PFX-2",
    "PFX-3",
    "PFX-4",
    "PFX-5",
    "PFX-7",
    "PFX-8",
    "PFX-9",
    "CTL-1",
    "CTL-2",
    "CTL-4",
    "CTL-7",
    "CTL-11",
    "CTL-13",
    "HYB-1",
    "HYB-2",
    "HYB-3",
    "HYB-5",
    "RANK-2",
)
@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_change_is_named_by_its_clause(name):
    clause_id, build = PLANTED[name]
    report = check_operation(build())
    assert clause_id in report.violated, report.format_table()
    assert all(violation.clause in report.checked for violation in report.violations)


@pytest.mark.clause("PFX-2", "PFX-4")
def test_messages_name_the_call_and_the_values():
    report = check_operation(replace_call(_prefetch("empty"), 1, prefix_keys=()))
    (violation,) = report.violations
    assert violation.clause == "PFX-4" and violation.call_index == 1
    assert violation.message == (
        "hit query batch_exists at page 4: received [] but 4 key(s) precede its first "
        "key; an empty prefix must grow like any list"
    )
    report = check_operation(replace_call(_prefetch(), 4, prefix_keys=PREFIX + CHAIN[1:4]))
    (violation,) = report.violations
    assert violation.message == (
        "KV read batch_get_v1 at page 4: received a prefix of 5 key(s), expected the operation's prefix (2 key(s)) "
        "followed by chain[:4] = 6 key(s); first difference at position 2"
    )
    assert violation.statement.startswith("The prefix a call receives equals the operation's prefix")
    assert str(violation) == f"[PFX-2] call #4: {violation.message}"


@pytest.mark.clause("CTL-4")
def test_termination_before_a_slice_allows_the_earlier_reads():
    trace = with_fields(drop_call(_prefetch(), 5), terminated_before_slice=2)
    acks = list(trace.acks)
    acks[2] = acks[2].model_copy(update={"tokens": 8 * PAGE_SIZE})
    acks[3] = acks[3].model_copy(update={"tokens": 8 * PAGE_SIZE})
    report = check_operation(with_fields(trace, acks=tuple(acks)))
    assert report.ok, report.format_table()


@pytest.mark.clause("CTL-2", "CTL-1")
def test_the_hybrid_hit_query_is_one_call_over_the_chain():
    trace = prefetch_trace(hybrid=True, batch_size=4)
    assert len(trace.calls[0].keys) == 10 > BATCH
    assert check_operation(trace).ok


def test_live_calls_with_the_operations_object_take_its_first_snapshot():
    from hicache_contracts.engine import RecordingBackend
    from tests.engine.test_recorder import PoolAwareBackend, SGLangExtraInfo

    recorder = RecordingBackend(PoolAwareBackend())
    operation_prefix = list(PREFIX)
    recorder.batch_exists(list(CHAIN[:4]), SGLangExtraInfo(prefix_keys=operation_prefix))
    operation_prefix += CHAIN[:4]  # the controller grows the operation's own list
    recorder.batch_exists(list(CHAIN[4:8]), SGLangExtraInfo(prefix_keys=list(operation_prefix)))
    report = check_trace(recorder.calls, chain=CHAIN[:8], prefix_keys=operation_prefix, batch_size=BATCH)
    immutability = report.for_clause("PFX-5")
    assert [violation.call_index for violation in immutability] == [0, None]
    assert immutability[1].message == (
        "the operation's own prefix list was extended in place by 4 key(s) (chain[:4]), as by prefix_keys += batch, "
        "during the operation: 2 key(s) when first handed out, 6 key(s) now; build a new list per batch "
        "(prefix_keys + batch_keys)"
    )


@pytest.mark.clause("PFX-5")
def test_an_operation_list_grown_in_place_is_seen_when_the_extra_info_copied_it():
    from hicache_contracts import HiCacheStorageExtraInfo
    from hicache_contracts.engine import RecordingBackend
    from tests.engine.list_prefix import Answers

    recorder = RecordingBackend(Answers())
    operation_prefix = list(PREFIX)
    for start in (0, 4):  # the model copies the list: no call receives the operation's object itself
        batch = list(CHAIN[start : start + 4])
        recorder.batch_exists(batch, HiCacheStorageExtraInfo(prefix_keys=operation_prefix))
        operation_prefix += batch  # the controller grows the operation's own list
    report = check_trace(recorder.calls, chain=CHAIN[:8], prefix_keys=operation_prefix, batch_size=BATCH)
    assert report.violated == ("PFX-5",), report.format_table()
    (violation,) = report.violations
    assert violation.message.startswith(
        "the operation's own prefix list was extended in place by 8 key(s) (chain[:8]), as by prefix_keys += batch"
    )
    # A list that holds other keys than the chain's start is taken as the operation's prefix, as before.
    unrelated = list(PREFIX) + ["not-a-chain-key"]
    report = check_trace(recorder.calls, chain=CHAIN[:8], prefix_keys=unrelated, batch_size=BATCH)
    assert "PFX-5" not in report.violated and "PFX-2" in report.violated


@pytest.mark.parametrize(
    "arguments,message",
    [
        (
            dict(chain="abc", prefix_keys=None),
            "check_trace.chain: must be a list, tuple or key sequence of str (got 'abc') [KEY-2]",
        ),
        (dict(chain=[1], prefix_keys=None), "check_trace.chain[0]: page key must be a non-empty str (got 1) [KEY-2]"),
        (
            dict(chain=CHAIN, prefix_keys="abc"),
            "check_trace.prefix_keys: must be None or a sequence of page keys (got 'abc') [PFX-1]",
        ),
        (
            dict(chain=CHAIN, prefix_keys=None, batch_size=0),
            "check_trace.batch_size: must be an int >= 1 (got 0) [CTL-2]",
        ),
        (
            dict(chain=CHAIN, prefix_keys=None, acks=[]),
            "check_trace.page_size: must be given with acks or backup_completed_tokens (got None) [CTL-5]",
        ),
        (
            dict(chain=CHAIN, prefix_keys=None, agreed_pages=11),
            "check_trace.agreed_pages: must be <= len(chain) = 10 (got 11) [RANK-2]",
        ),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ContractViolation) as error:
        check_trace([], **arguments)
    assert str(error.value) == message


def test_calls_must_be_recorded_calls():
    with pytest.raises(ContractViolation) as error:
        check_trace([{"method": "batch_exists"}], chain=CHAIN, prefix_keys=None)
    assert str(error.value) == (
        "check_trace.calls[0]: must be a RecordedCall or TraceCall (got {'method': 'batch_exists'}) [PFX-2]"
    )


# ------------------------------------------------------------------ properties over any size
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hicache_contracts import FinalAck, ProgressAck  # noqa: E402
from hicache_contracts.engine import TraceCall  # noqa: E402
from hicache_spec import compute_prefetch_acks, expected_prefixes, plan_batches  # noqa: E402
from tests.engine.traces import key  # noqa: E402


def any_prefetch(pages: int, batch: int, prefix):
    """A conforming prefetch of ``pages`` pages in slices of ``batch``, built from the spec functions."""
    chain = tuple(key(500 + index) for index in range(pages))
    slices = plan_batches(pages, batch)
    prefixes = expected_prefixes(prefix, chain, batch)
    calls: list[TraceCall] = []
    for method in ("batch_exists", "batch_get_v1"):
        for (start, end), expected in zip(slices, prefixes):
            result = end - start if method == "batch_exists" else [True] * (end - start)
            calls.append(
                TraceCall(
                    index=len(calls),
                    method=method,
                    keys=chain[start:end],
                    result=result,
                    extra_info_state="present",
                    prefix_keys=expected,
                )
            )
    tokens = compute_prefetch_acks(
        tuple(end - start for start, end in slices), tuple(end - start for start, end in slices), 1
    )
    acks: list[Union[ProgressAck, FinalAck]] = [
        ProgressAck(operation_id=0, slice_index=index, tokens=value) for index, value in enumerate(tokens)
    ]
    acks.append(FinalAck(operation_id=0, tokens=pages))
    return chain, calls, acks


@pytest.mark.clause("PFX-2", "PFX-3", "PFX-4", "PFX-7", "CTL-1", "CTL-4", "CTL-5")
@given(st.integers(0, 12), st.integers(1, 5), st.sampled_from([None, (), (key(1),), (key(1), key(2))]), st.data())
def test_any_conforming_prefetch_passes_and_any_wrong_prefix_is_caught(pages, batch, prefix, data):
    chain, calls, acks = any_prefetch(pages, batch, prefix)
    report = check_trace(calls, chain=chain, prefix_keys=prefix, batch_size=batch, page_size=1, acks=acks)
    assert report.ok, report.format_table()
    if not calls:
        return
    position = data.draw(st.integers(0, len(calls) - 1))
    received = calls[position].prefix_keys
    candidates = [
        None if received is not None else (),  # on turned off, or off turned on
        (received or ()) + (key(999),),  # one key too many
        (received or ())[1:] if received else None,  # one key too few (or off)
    ]
    wrong = data.draw(st.sampled_from([candidate for candidate in candidates if candidate != received]))
    state = "present" if wrong is not None or data.draw(st.booleans()) else "absent"
    calls[position] = TraceCall(**{**calls[position].model_dump(), "prefix_keys": wrong, "extra_info_state": state})
    report = check_trace(calls, chain=chain, prefix_keys=prefix, batch_size=batch, page_size=1, acks=acks)
    assert set(report.violated) & {"PFX-2", "PFX-3", "PFX-4", "PFX-7"}, (prefix, received, wrong, state)


# ------------------------------------------------------------------ legacy writes
def _legacy_backup(results, completed_tokens):
    calls = tuple(
        TraceCall(index=index, method="batch_set", keys=CHAIN[start:end], result=result)
        for index, ((start, end), result) in enumerate(zip(((0, 4), (4, 8), (8, 10)), results))
    )
    return TraceOperation(
        chain=CHAIN,
        prefix_keys=None,
        batch_size=BATCH,
        page_size=PAGE_SIZE,
        calls=calls,
        backup_completed_tokens=completed_tokens,
    )


@pytest.mark.clause("CTL-7", "CTL-13")
def test_a_legacy_batch_set_confirms_its_whole_slice_with_one_true():
    report = check_operation(_legacy_backup([True, True, True], 10 * PAGE_SIZE))
    assert report.ok, report.format_table()
    stopped = check_operation(_legacy_backup([True, False], 4 * PAGE_SIZE))
    assert stopped.ok, stopped.format_table()


@pytest.mark.clause("CTL-7")
def test_a_legacy_backup_that_goes_on_after_a_false_is_caught():
    report = check_operation(_legacy_backup([True, False, True], 4 * PAGE_SIZE))
    assert report.violated == ("CTL-7",)
    assert report.violations[0].message == "backup wrote pages [8...) after slice 1 failed"
    overcounted = check_operation(_legacy_backup([True, [True] * 4], 8 * PAGE_SIZE))  # a list is not the bool
    assert overcounted.violated == ("CTL-7",)
